"""serve/app/cpu_engine.py on a stand-in for ray.serve.llm's VLLMEngine: which replica engines get our
two-process layout, and what they start under. (The real replica: tests/serve/app/test_serve_slow.py.)"""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from esc_eval.serve.app.cpu_engine import UNIPROC, layout_engine_class, replica_layout
from esc_eval.serve.engines.cpu_layout import BIND_ENV, MULTIPROCESSING_ENV, THREADS_ENV


class StandInEngine:
    """Records the executor and the environment AsyncLLM would have been built under."""

    def _start_async_llm_engine(self, args, config, placement_group):
        return {"executor": config.parallel_config.distributed_executor_backend,
                "env": {k: os.environ.get(k) for k in (MULTIPROCESSING_ENV, THREADS_ENV)},
                "cores": os.sched_getaffinity(0)}


def config(device="cpu", world_size=1, dp=1):
    return SimpleNamespace(device_config=SimpleNamespace(device_type=device),
                           parallel_config=SimpleNamespace(world_size=world_size, data_parallel_size=dp,
                                                           distributed_executor_backend="mp"))


@pytest.fixture
def clean_env(monkeypatch):
    for name in (BIND_ENV, MULTIPROCESSING_ENV, THREADS_ENV):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_a_one_rank_cpu_engine_runs_in_engine_core_under_our_layout_and_the_env_is_restored(clean_env):
    engine = layout_engine_class(StandInEngine)()
    started = engine._start_async_llm_engine(None, config(), None)
    assert started["executor"] == UNIPROC
    assert started["env"][MULTIPROCESSING_ENV] == "0"
    assert int(started["env"][THREADS_ENV]) == max(1, len(os.sched_getaffinity(0)) - 1)
    assert MULTIPROCESSING_ENV not in os.environ and THREADS_ENV not in os.environ  # only for the start
    assert layout_engine_class(StandInEngine) is type(engine)  # one class per base
    assert type(engine).__name__ == "CpuLayoutStandInEngine" and isinstance(engine, StandInEngine)


def test_a_binding_to_a_list_of_cores_confines_the_start(clean_env):
    core = min(os.sched_getaffinity(0))
    clean_env.setenv(BIND_ENV, str(core))
    before = os.sched_getaffinity(0)
    started = layout_engine_class(StandInEngine)()._start_async_llm_engine(None, config(), None)
    assert started["executor"] == UNIPROC and started["cores"] == {core} and started["env"][THREADS_ENV] == "1"
    assert os.sched_getaffinity(0) == before


@pytest.mark.parametrize("case", ["gpu", "tensor_parallel", "data_parallel", "per_rank_lists", "user_multiprocessing"])
def test_everything_else_keeps_ray_serve_llms_executor(clean_env, case):
    cfg = {"gpu": config(device="cuda"), "tensor_parallel": config(world_size=2), "data_parallel": config(dp=2)}.get(case, config())
    if case == "per_rank_lists":
        clean_env.setenv(BIND_ENV, "0|1")
    if case == "user_multiprocessing":
        clean_env.setenv(MULTIPROCESSING_ENV, "1")
    assert replica_layout(cfg) is None
    started = layout_engine_class(StandInEngine)()._start_async_llm_engine(None, cfg, None)
    assert started["executor"] == "mp" and started["env"][THREADS_ENV] is None


def test_the_server_starts_its_engines_through_the_layout_class():
    pytest.importorskip("ray.serve.llm")
    from esc_eval.serve.app.server import LLMServer

    class Unstarted(LLMServer):
        def __del__(self):  # Ray's is a coroutine, for a started server
            pass

    cls = Unstarted.__new__(Unstarted)._get_default_engine_class()
    from ray.llm._internal.serve.engines.vllm.vllm_engine import VLLMEngine

    assert issubclass(cls, VLLMEngine) and cls.__name__ == "CpuLayoutVLLMEngine"
    assert "_start_async_llm_engine" in vars(cls)  # the method this module overrides still exists upstream
    assert callable(getattr(VLLMEngine, "_start_async_llm_engine"))
