"""The dtype option on the batch side: validated at the door, carried to the workers' engines,
recorded in the run manifest with the CPU it resolved on."""
from __future__ import annotations

import json
import os

import pytest
import yaml

from esc_eval.serve.devices import cpu
from esc_eval.serve.config import ConfigError, load_config
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.job import Job
from esc_eval.sim.pool.on_ray import worker_env
from esc_eval.sim.pool.pool import WorkerPool


def test_bad_dtype_names_file_and_field(tmp_path):
    f = tmp_path / "sim.yaml"
    f.write_text(yaml.safe_dump({"execution": {"dtype": "int8"}}))
    with pytest.raises(ConfigError) as e:
        load_config(f, SimulationConfig)
    assert str(f) in str(e.value) and "execution.dtype" in str(e.value) and "\n" not in str(e.value)


def test_worker_env_carries_an_explicit_dtype_only():
    assert cpu.DTYPE_ENV not in worker_env(ExecutionConfig(), 0)
    env = worker_env(ExecutionConfig(dtype="bfloat16", cpu_bind="per_worker", env={"A": "1"}), 1)
    assert env[cpu.DTYPE_ENV] == "bfloat16" and env["A"] == "1"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == str(1 % (os.cpu_count() or 1))


def _cfg(**ex):
    return SimulationConfig(cards="sample", limit=1, role=ModelRef(model="fake/seeker"),
                            targets=[ModelRef(model="fake/echo")], execution=ExecutionConfig(executor="local", **ex))


def test_manifest_records_dtype_and_isa(tmp_path, monkeypatch):
    monkeypatch.delenv(cpu.DTYPE_ENV, raising=False)
    run_simulation(_cfg(), tmp_path / "auto")
    rt = json.loads((tmp_path / "auto" / "manifest.json").read_text())["simulation"]["runtime"]
    info = cpu.cpu_info()
    assert rt["dtype"] == cpu.best_dtype(info) and rt["isa"] == info.isa and rt["cores"] == info.cores
    assert rt["cpu_model"] == info.model and isinstance(rt["isa_flags"], list)
    run_simulation(_cfg(dtype="bfloat16"), tmp_path / "forced")
    rt = json.loads((tmp_path / "forced" / "manifest.json").read_text())["simulation"]["runtime"]
    assert rt["dtype"] == "bfloat16"
    run_simulation(_cfg(num_gpus_per_worker=1), tmp_path / "gpu")
    rt = json.loads((tmp_path / "gpu" / "manifest.json").read_text())["simulation"]["runtime"]
    assert rt["dtype"] == "bfloat16"  # auto on GPU workers


class _DtypeSeenJob(Job):
    """Records the dtype the local worker's engines would read while the job starts them."""

    kind = "dialogues"
    seen: list[str | None] = []

    async def setup(self, models):
        _DtypeSeenJob.seen.append(os.environ.get(cpu.DTYPE_ENV))
        _DtypeSeenJob.seen.append(cpu.resolve_dtype("auto"))

    async def run(self, item):
        return [], {"ok": True}


def test_local_executor_exports_the_dtype_to_its_engines_and_restores_the_env(tmp_path, monkeypatch):
    monkeypatch.delenv(cpu.DTYPE_ENV, raising=False)
    _DtypeSeenJob.seen = []
    with WorkerPool(_cfg(dtype="float32").execution) as pool:
        assert cpu.DTYPE_ENV not in os.environ  # nothing runs: the env is set only while a job runs locally
        pool.run(_DtypeSeenJob(), [{"i": 0}], str(tmp_path))
    assert _DtypeSeenJob.seen == ["float32", "float32"]  # what the engines started by the job read
    assert cpu.DTYPE_ENV not in os.environ  # the caller's environment as it was
