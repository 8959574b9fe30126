"""One decision of "cuda" or "cpu" (serve/devices/accelerator.py) that the plan and the engines share, on
fake machines: a stand-in nvidia-smi (GPUs, driver, CUDA), NVML and torch's CUDA build patched
(tests/conftest.py `fake_gpus`). A machine that contradicts itself stops every command that would
start an engine, in one line, before anything starts or is written."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from esc_eval.serve.devices import accelerator
from esc_eval.serve.devices.accelerator import (AcceleratorMismatch, check_accelerator, decide_accelerator,
                                                driver_facts)

H100 = ("NVIDIA H100 80GB HBM3", 81559)
BOOTSTRAP = "ESC_EVAL_EXTRA=gpu bash cluster/local/bootstrap.sh"


def test_a_gpu_node_with_a_cuda_torch_decides_cuda_and_the_engines_follow(fake_gpus):
    from esc_eval.serve.engines.args import detect_device

    fake_gpus(H100)
    d = check_accelerator()
    assert (d.kind, d.problem, d.driver, d.torch_cuda, d.cuda_available) == ("cuda", None, "570.86.15", "12.8", True)
    assert d.gpus.count == 1 and d.reason.startswith("engines on CUDA: 1 x NVIDIA H100")
    assert "driver 570.86.15 (CUDA 12.8)" in d.reason
    dev = detect_device()
    assert (dev.kind, dev.count, dev.memory_gb, dev.name) == ("cuda", 1, 85.5, "NVIDIA H100 80GB HBM3")
    assert json.loads(json.dumps(d.as_dict()))["gpus"]["count"] == 1


def test_a_gpu_node_with_a_cpu_build_of_torch_is_one_line_naming_both_and_the_fix(fake_gpus):
    """The H100 run's first defect: the plan saw the GPU, torch (a CPU build) did not; the engines ran on the CPU."""
    from esc_eval.serve.engines.args import detect_device

    fake_gpus(H100, torch_cuda=None)
    d = decide_accelerator()
    assert d.kind == "cpu" and d.torch_version == "2.11.0+cpu" and d.torch_cuda is None
    assert d.problem == ("1 x NVIDIA H100 80GB HBM3, 85.5 GB on this machine (nvidia-smi), but torch 2.11.0+cpu is a "
                         f"CPU build (engines would run on the CPU): install the GPU build: `{BOOTSTRAP}`, or set "
                         "ESC_EVAL_ACCELERATOR=cpu to run on the CPU on purpose")
    with pytest.raises(AcceleratorMismatch) as e:
        check_accelerator()
    assert str(e.value) == d.problem and "\n" not in d.problem
    again = pickle.loads(pickle.dumps(e.value))  # crosses Ray actor boundaries
    assert type(again) is AcceleratorMismatch and str(again) == d.problem
    assert not detect_device().gpu


def test_a_driver_older_than_torchs_cuda_names_both_versions(fake_gpus):
    fake_gpus(H100, driver="550.54.15", cuda="12.4", torch_cuda="13.0")
    d = decide_accelerator()
    assert d.kind == "cpu" and d.driver == "550.54.15"
    assert d.problem == ("1 x NVIDIA H100 80GB HBM3, 85.5 GB on this machine (nvidia-smi): the NVIDIA driver 550.54.15 "
                         "(CUDA 12.4) is older than torch 2.11.0+cu130's CUDA 13.0: update the driver to one for CUDA "
                         "13.0, or install a torch built for CUDA 12.4 or older")


def test_an_older_driver_of_the_same_major_cuda_runs_only_when_asked(fake_gpus, monkeypatch):
    fake_gpus(H100, cuda="12.4", torch_cuda="12.8")
    assert decide_accelerator().problem.endswith("(ESC_EVAL_ACCELERATOR=cuda tries it anyway)")
    monkeypatch.setenv("ESC_EVAL_ACCELERATOR", "cuda")
    assert (decide_accelerator().kind, decide_accelerator().problem) == ("cuda", None)


def test_cuda_torch_that_cannot_reach_the_gpus_is_named(fake_gpus):
    fake_gpus(H100, cuda_available=False)
    problem = decide_accelerator().problem
    assert problem.startswith("1 x NVIDIA H100 80GB HBM3, 85.5 GB on this machine (nvidia-smi) and torch 2.11.0+cu128 "
                              "is built for CUDA 12.8, but torch.cuda.is_available() is False")


def test_the_cpu_on_purpose_and_a_bad_override(fake_gpus, monkeypatch):
    fake_gpus(H100, torch_cuda=None)
    monkeypatch.setenv("ESC_EVAL_ACCELERATOR", "cpu")
    d = check_accelerator()
    assert d.kind == "cpu" and d.problem is None and "ESC_EVAL_ACCELERATOR=cpu" in d.reason
    monkeypatch.setenv("ESC_EVAL_ACCELERATOR", "gpu")
    assert decide_accelerator().problem == "ESC_EVAL_ACCELERATOR='gpu': expected cpu or cuda (or unset)"


def test_gpus_hidden_by_cuda_visible_devices_are_the_cpu_and_each_setting_is_decided_once(fake_gpus, monkeypatch):
    fake_gpus(H100, torch_cuda=None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    d = check_accelerator()  # what a Ray worker given no GPU sees: no contradiction
    assert d.kind == "cpu" and d.problem is None and d.gpus.count == 0
    assert decide_accelerator() is d  # cached for this setting
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert decide_accelerator().problem is not None


def test_the_driver_from_nvml_or_proc():
    class Nvml:
        def nvmlInit(self):
            pass

        def nvmlSystemGetDriverVersion(self):
            return b"580.65.06"

        def nvmlSystemGetCudaDriverVersion(self):
            return 13000

        def nvmlShutdown(self):
            pass

    facts = driver_facts(nvml=Nvml(), run=lambda *a, **k: pytest.fail("asked nvidia-smi"))
    assert (facts.version, facts.cuda, facts.source) == ("580.65.06", "13.0", "nvml")


def test_the_driver_version_file_when_nothing_else_answers(monkeypatch, tmp_path):
    from esc_eval.serve.devices import gpus as gpu_detect

    (tmp_path / "gpus").mkdir()
    (tmp_path / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Wed Jan 22 2025\n")
    monkeypatch.setattr(gpu_detect, "NVIDIA_PROC", tmp_path / "gpus")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    facts = driver_facts(run=lambda *a, **k: (_ for _ in ()).throw(FileNotFoundError("nvidia-smi")))
    assert (facts.version, facts.cuda, facts.source) == ("570.86.15", None, "driver")


def test_a_machine_without_gpus_decides_cpu_without_importing_torch():
    """CPU machines stay fast: no torch import, no CUDA probe (torch's version and CUDA build read from its files)."""
    code = ("import sys; from esc_eval.serve.devices.accelerator import decide_accelerator; d = decide_accelerator(); "
            "print(d.kind, d.problem, 'torch' in sys.modules, d.torch_version, d.torch_cuda)")
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = str(Path(sys.executable).parent)  # no nvidia-smi
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    import torch

    assert out.stdout.split() == ["cpu", "None", "False", str(torch.__version__), str(torch.version.cuda)], out.stderr


def test_esc_eval_plan_refuses_a_gpu_node_whose_torch_is_a_cpu_build(fake_gpus, model_folder, tmp_path):
    """The plan follows the same decision as the engines: no GPU plan the engines would not follow."""
    fake_gpus(H100, torch_cuda=None)
    role = model_folder("j7b")
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(f"role: {{model: vllm/{role}}}\ntargets: [{{model: vllm/{role}}}]\n")
    out = subprocess.run([str(Path(sys.executable).parent / "esc-eval"), "plan", str(cfg)], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ))
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "plan: in-process on no GPUs (CPU)"
    assert any(line.startswith("refused: 1 x NVIDIA H100 80GB HBM3") and "torch 2.11.0+cpu is a CPU build" in line
               for line in lines), lines


def _cli(monkeypatch, capsys, *argv: str) -> tuple[int, str]:
    from esc_eval.cli.app import main

    monkeypatch.setattr(sys, "argv", ["esc-eval", *argv])
    with pytest.raises(SystemExit) as e:
        main()
    return e.value.code, capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["simulate", "--role", "vllm/embedded", "--target", "vllm/embedded", "-n", "1", "-o", "{out}"],
    ["score", "-i", "{out}", "--judge", "vllm/embedded"],
    ["demo", "-n", "1", "-o", "{out}"],
    ["serve", "up"],
], ids=["simulate", "score", "demo", "serve-up"])
def test_every_command_that_starts_engines_stops_in_one_line_and_writes_nothing(fake_gpus, monkeypatch, capsys,
                                                                                 tmp_path, argv):
    from esc_eval.sim.pool import pool

    fake_gpus(H100, torch_cuda=None)
    monkeypatch.setattr(pool.WorkerPool, "__init__", lambda *a, **k: pytest.fail("a worker pool was started"))
    out = tmp_path / "run"
    code, err = _cli(monkeypatch, capsys, *[a.replace("{out}", str(out)) for a in argv])
    assert code == 1
    assert err.strip().splitlines() == [f"error: {decide_accelerator().problem}"]
    assert not out.exists()


def test_an_engine_on_a_contradicting_machine_names_the_problem_instead_of_starting(fake_gpus, fake_vllm):
    """An engine a Ray worker starts on such a node (a cluster joined by address): its start says why."""
    from esc_eval.serve.backends import vllm_engine
    from esc_eval.serve.chat.interface import EngineStartError

    fake_gpus(H100, torch_cuda=None)
    seen = fake_vllm(None, {})
    host = vllm_engine._EngineHost("/models/fake", {}, {})
    try:
        with pytest.raises(EngineStartError) as e:
            host._start_sync()
    finally:
        host.shutdown()
    assert str(e.value) == f"the vLLM engine for /models/fake did not start: {decide_accelerator().problem}"
    assert seen == {}  # vLLM was never asked


def test_in_process_engines_planned_on_the_cpu_beside_gpus_are_given_none(fake_gpus, tmp_path):
    """Ray leaves a zero-GPU worker every GPU of its node: the plan's CPU engines would have decided "cuda"."""
    from esc_eval.serve.engines.args import detect_device
    from esc_eval.serve.plan.planner import PlacementConfig
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.sim.launch.placed import placed_simulation
    from esc_eval.sim.pool.config import ExecutionConfig

    fake_gpus(H100)
    cfg = SimulationConfig(cards="sample", limit=1, role=ModelRef(model="vllm/embedded"),
                           targets=[ModelRef(model="vllm/embedded")],
                           execution=ExecutionConfig(executor="local", placement=PlacementConfig(mode="in_process")))
    assert detect_device().gpu
    with placed_simulation(cfg, tmp_path / "run") as placed:
        assert placed.execution.env["CUDA_VISIBLE_DEVICES"] == ""  # the workers'
        assert not detect_device().gpu  # this process's (the local executor's worker)
    assert detect_device().gpu and "CUDA_VISIBLE_DEVICES" not in os.environ
