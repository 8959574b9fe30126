"""Real vLLM engines that cannot start (each fails inside vLLM's EngineCore or its worker process,
so the cause is only in their output): the job stops before its first dialogue with that cause, in
one line and in the manifest, no row written. And the real CPU engine's capacity, read after start.

Heavy (engine starts): run under `flock /tmp/esc-eval-heavy.lock`."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from esc_eval.serve.chat.interface import EngineStartError
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.jobs.simulation import SimulationJob, run_simulation
from esc_eval.sim.jobs.simulation_items import dialogue_demand, select_cards
from esc_eval.sim.pool.capacity import choose_concurrency, items_in_flight
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]


def broken_model(tmp_path: Path, embedded_model) -> Path:
    """The embedded model's folder with a config.json its weights do not match (vLLM reads the config
    in this process; its worker process fails loading the weights)."""
    src, folder = Path(embedded_model.model_path), tmp_path / "broken-model"
    folder.mkdir()
    for f in src.iterdir():
        if f.name != "config.json" and f.is_file():
            os.symlink(f, folder / f.name)
    config = json.loads((src / "config.json").read_text())
    config["intermediate_size"] += 64
    (folder / "config.json").write_text(json.dumps(config))
    return folder


# First in the module: the test before it in the slow tests' order (sim/pool's batch test) shares its Ray
def test_the_ray_job_and_the_command_say_why_the_engine_did_not_start(tmp_path, ray_local):
    """`esc-eval simulate` joining a local Ray: the role's engine fails inside the EngineCore (its
    max_model_len needs more KV cache than VLLM_CPU_KVCACHE_SPACE holds). Without -v the worker's logs
    stay in Ray's files; the console still gets the cause, in one line, and the command exits 1."""
    role = {"model": "vllm/embedded", "options": {"max_model_len": 200000,
                                                  "hf_overrides": {"max_position_embeddings": 200000}}}
    config = tmp_path / "sim.yaml"
    config.write_text(yaml.safe_dump({"cards": "sample", "limit": 2, "role": role, "targets": [{"model": "fake/echo"}],
                                      "execution": {"workers": 1}}))
    out = tmp_path / "run"
    address = ray_local.get_runtime_context().gcs_address
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "simulate", "-c", str(config), "-o", str(out),
                           "--address", address], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the vLLM engine for ") and " did not start: ValueError: To serve at least one " \
        "request with the model's max seq len (200000)" in last, proc.stderr[-3000:]
    assert last.endswith("no dialogue was run; run the same command again once that is fixed")
    assert proc.stdout == "" and list(RunFolder(out).iter_rows("dialogues")) == []
    stop = [ev for ev in json.loads((out / "manifest.json").read_text())["events"] if ev["kind"] == "simulation_stopped"]
    assert "max seq len (200000)" in stop[0]["error"]


def test_a_target_that_cannot_start_stops_the_local_job_with_the_engines_cause(tmp_path, embedded_model):
    """The role (the session's engine) starts; the target's engine fails in vLLM's worker process."""
    folder = broken_model(tmp_path, embedded_model)
    cfg = SimulationConfig(cards="sample", limit=2, role=ModelRef(model="vllm/embedded"),
                           targets=[ModelRef(model=f"vllm/{folder}")], execution=ExecutionConfig(executor="local"))
    with pytest.raises(EngineStartError) as e:
        run_simulation(cfg, tmp_path / "run")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"the vLLM engine for {folder} did not start: RuntimeError: ")
    assert "exceeds dimension size (1536)" in msg and msg.endswith("no dialogue was run; run the same command again "
                                                                  "once that is fixed")
    assert list(RunFolder(tmp_path / "run").iter_rows("dialogues")) == []
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    (stop,) = [ev for ev in manifest["events"] if ev["kind"] == "simulation_stopped"]
    assert "exceeds dimension size" in stop["error"] and any("Traceback" in line for line in stop["detail"])
    from esc_eval.serve.backends.vllm_engine import VLLMChatModel

    again = VLLMChatModel(str(folder))  # the failed engine is forgotten: a retry in this process starts afresh
    assert again.host.engine is None and again.host._started is None
    again.release()


def test_the_cpu_engine_reports_its_kv_cache_and_keeps_the_cpu_default(embedded_model):
    cap = embedded_model.capacity()
    host = embedded_model.host
    engine_cache = host.engine.vllm_config.cache_config
    assert cap.device == "cpu" and cap.kv_tokens == engine_cache.num_gpu_blocks * engine_cache.block_size
    # SmolLM2-135M: 30 layers x K and V x 3 KV heads x 64 dims at the engine's dtype, in VLLM_CPU_KVCACHE_SPACE GiB
    per_token = 30 * 2 * 3 * 64 * (2 if host.dtype == "bfloat16" else 4)
    space = float(os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2")) * 2**30
    assert space - engine_cache.block_size * per_token < cap.kv_tokens * per_token <= space
    assert cap.max_num_seqs == 128 and cap.max_model_len == 8192
    cfg = SimulationConfig(execution=ExecutionConfig(executor="local"))
    role, _ = dialogue_demand(cfg, select_cards(cfg))
    chosen = choose_concurrency(None, SimulationJob.default_concurrency, [(cap, role)])
    assert chosen.value == 32 and chosen.source == "default"  # on CPU nothing moves
    # the same figures on a GPU engine would size the worker: KV tokens over a dialogue's mean context
    as_gpu = type(cap)(**{**cap.__dict__, "device": "gpu"})
    assert choose_concurrency(None, 32, [(as_gpu, role)]).value == items_in_flight(as_gpu, role)[0] == min(
        cap.kv_tokens // role.tokens_per_seq, 128)


@pytest.fixture(autouse=True)
def _no_leftover_models(tmp_path):
    yield
    shutil.rmtree(tmp_path / "broken-model", ignore_errors=True)
