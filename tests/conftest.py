"""Shared fixtures: the shared data folder, a local Ray, the embedded vLLM engine.

Engines and Ray start once per test session (an engine start costs ~25-45 s on CPU).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import time_budget

pytest_plugins = ["slow_apart"]  # --slow-apart with -n 2: slow tests on one worker, the rest beside (tests/slow_apart.py)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# 1 GiB of KV cache per test engine (23k float32 tokens of the embedded model, more than a test holds): each
# engine start allocates and touches it, 11 s for 2 GiB and 4.5 s for 1 GiB on the 2-core AVX2 EPYC
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
# Our code always calls ray.init explicitly; without this, a background thread left by one test
# (a Serve handle's metrics pusher) can silently start a new local Ray under a later test.
os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
# The analyses' tests read fixtures of a few cards: their verdicts as computed, not withheld by the shipped
# validity run's floors (analysis/checks/floors.py; the gate's own tests give it their floors)
os.environ.setdefault("ESC_EVAL_FLOORS", "off")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or a run without workers) keeps the times
        time_budget.register(config)  # every test's time against a budget scaled to this CPU (tests/time_budget.py)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data, which CI has and a user's clone may not."""
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip(f"shared data not present at {path} (only in the project's CI and dev machines)")
    return path


_RAY_LOCAL: dict = {"up": False, "env": None}  # a Ray ray_local started and left up for the next test asking for it


def _environment() -> dict[str, str]:
    """What Ray's processes inherit from this one (pytest's per-test variables aside)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


@pytest.fixture
def ray_local():
    """A local Ray (2 CPUs, no dashboard). Tests that ask for it one after another share one instance
    (a start and a shutdown are 6-9 s of a 2-core machine; nine tests asked for a Ray of their own).
    It is shut down after the last of such a run of tests and before any test that does not ask for it
    (the hooks below): other tests check that bad input fails before Ray starts, so none may be left
    running under them. It is also shut down after a test that failed or left a CPU held, and before a
    test whose environment differs from the one it started under (its workers inherit that: a test's
    AWS_* settings for its S3 server)."""
    import ray

    if _RAY_LOCAL["up"] and _RAY_LOCAL["env"] != _environment():
        _shutdown_ray_local()
    if not ray.is_initialized():
        # address="local": a fresh instance, never a cluster another test left behind
        from esc_eval.sim.pool.ray_start import start_local_ray

        start_local_ray(address="local", num_cpus=2, include_dashboard=False,  # once more after Ray's 30 s start timeout
                        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}})
        _RAY_LOCAL.update(up=True, env=_environment())
    yield ray
    if _RAY_LOCAL["up"] and (not ray.is_initialized() or not _all_cpus_free(ray)):
        _shutdown_ray_local()


def _all_cpus_free(ray, wait_s: float = 10.0) -> bool:
    """Every CPU of the cluster free again (an actor's CPU comes back shortly after it is gone)."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        if ray.available_resources().get("CPU", 0.0) >= ray.cluster_resources().get("CPU", 0.0):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def _shutdown_ray_local() -> None:
    import ray

    ray.shutdown()
    _RAY_LOCAL["up"] = False


def _asks_for_ray_local(item) -> bool:
    return item is not None and "ray_local" in getattr(item, "fixturenames", ())


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before any fixture of a test that does not ask for ray_local (a module's own Ray included)."""
    if _RAY_LOCAL["up"] and not _asks_for_ray_local(item):
        _shutdown_ray_local()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if _RAY_LOCAL["up"] and _asks_for_ray_local(item) and not _asks_for_ray_local(nextitem):
        _shutdown_ray_local()  # after the test's fixtures: none left under the next test


def pytest_runtest_makereport(item, call):
    if call.when == "call" and call.excinfo is not None and _RAY_LOCAL["up"] and _asks_for_ray_local(item):
        _shutdown_ray_local()  # a failed test's actors must not meet the next test


def pytest_sessionfinish(session, exitstatus):
    if _RAY_LOCAL["up"]:
        _shutdown_ray_local()


@pytest.fixture(scope="session")
def embedded_model():
    """The real vLLM-CPU engine with the embedded SmolLM2, in this process."""
    from esc_eval.serve.backends.vllm_engine import VLLMChatModel, shutdown_engines

    model = VLLMChatModel("embedded")
    model.host.ensure_started()
    yield model
    shutdown_engines()


@pytest.fixture
def fake_gpus(monkeypatch, tmp_path):
    """`fake_gpus(("NVIDIA H100 80GB HBM3", 81559), ...)`: a stand-in `nvidia-smi` first on PATH that
    answers esc-eval's query with these GPUs (name, MiB) as the real one prints them, and plain
    `nvidia-smi` with its header (driver `driver`, CUDA `cuda`); NVML absent (pynvml unimportable) and
    no /proc driver folder, so detection reaches nvidia-smi. With GPUs, torch is a build for CUDA
    `torch_cuda` (None: a CPU build) whose torch.cuda.is_available() says `cuda_available`, in this
    process and in the subprocesses it starts (a sitecustomize on PYTHONPATH); the accelerator decision
    (serve/devices/accelerator.py) is made afresh. No argument: a machine with none of the three. No Ray
    cluster is found running (a `ray start` head of another job on this machine would otherwise be
    joined and asked instead)."""
    from esc_eval.serve.devices import accelerator
    from esc_eval.serve.devices import gpus as gpu_detect

    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # Ray's address file: none here
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(gpu_detect, "NVIDIA_PROC", tmp_path / "no-driver")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv(accelerator.OVERRIDE_ENV, raising=False)
    monkeypatch.setattr(accelerator, "_CACHE", {})  # decided afresh on the fake machine, forgotten after

    def install(*gpus: tuple[str, int], driver: str = "570.86.15", cuda: str = "12.8", torch_cuda: str | None = "12.8",
                cuda_available: bool = True) -> Path:
        folder = tmp_path / "fake-bin"
        folder.mkdir(exist_ok=True)
        script = folder / "nvidia-smi"
        lines = "\n".join(f"{i}, GPU-{i:08x}-0000-4000-8000-fake{i:08x}, {name}, {mib}" for i, (name, mib) in enumerate(gpus))
        query = " ".join(gpu_detect.SMI_QUERY[1:])
        header = f"| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda}     |"
        plain = f"[ $# -eq 0 ] && {{ echo '{header}'; exit 0; }}\n" if gpus else ""
        script.write_text(f"#!/bin/sh\n{plain}[ \"$*\" = \"{query}\" ] || {{ echo \"unexpected: $*\" >&2; exit 2; }}\n"
                          + (f"cat <<'EOF'\n{lines}\nEOF\n" if gpus else "echo 'No devices were found' >&2; exit 6\n"))
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
        if gpus:
            _fake_torch_cuda(monkeypatch, tmp_path, torch_cuda, cuda_available)
        return script

    return install


def _fake_torch_cuda(monkeypatch, tmp_path: Path, torch_cuda: str | None, available: bool) -> None:
    """torch as a build for CUDA `torch_cuda` (None: CPU) whose is_available() says `available`: patched
    here, and in subprocesses by a sitecustomize that patches torch when it is imported."""
    import torch

    version = f"2.11.0+cu{torch_cuda.replace('.', '')}" if torch_cuda else "2.11.0+cpu"
    monkeypatch.setattr(torch, "__version__", version)
    monkeypatch.setattr(torch.version, "cuda", torch_cuda)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    site = tmp_path / "fake-site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(f"""import importlib.abc, importlib.util, sys


class _PatchTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.__version__, module.version.cuda = {version!r}, {torch_cuda!r}
            module.cuda.is_available = lambda: {available!r}

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchTorch())
""")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))


# The shapes of the models the H100 run used (notes/gpu-h100.md): (layers, heads, KV heads, hidden, parameters)
MODEL_SHAPES = {"r14b": (40, 40, 40, 5120, 13.1e9),  # Qwen1.5-14B's shape: ESC-Role
                "j7b": (32, 32, 8, 4096, 7.38e9)}  # InternLM2-7B's shape, Llama architecture: judge or target


@pytest.fixture
def model_folder(tmp_path):
    """`model_folder("j7b")`: a local weights folder of that shape: config.json, a tokenizer config with
    a chat template, and a sparse bf16 weights file of the model's size (no disk used, no real weights)."""
    import json

    def make(name: str, shape: str | None = None, chat_template: bool = True, weights: bool = True) -> Path:
        layers, heads, kv, hidden, params = MODEL_SHAPES[shape or name]
        folder = tmp_path / "models" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv, "hidden_size": hidden, "max_position_embeddings": 32768,
            "torch_dtype": "bfloat16"}))
        (folder / "tokenizer_config.json").write_text(json.dumps(
            {"chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"} if chat_template else {}))
        if weights:
            with open(folder / "model.safetensors", "wb") as f:
                f.truncate(int(params * 2))
        return folder

    return make
