"""bench_score's dialogue sources and helpers (the measurement itself is in the slow tests)."""
import pytest

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.bench.dialogues import load_bench_dialogues
from esc_eval.sim.bench.loops.scoring import _median_subset
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.pool.config import ExecutionConfig


def test_fake_dialogues_when_asked_for_a_run_folder(tmp_path):
    run_simulation(SimulationConfig(cards="sample", languages=["en"], limit=3, role=ModelRef(model="fake/seeker"),
                                    targets=[ModelRef(model="fake/echo")], execution=ExecutionConfig(executor="local")), tmp_path)
    rows, src = load_bench_dialogues(2, tmp_path)
    assert src["kind"] == "run_folder" and src["dialogues"] == 2 and len(rows) == 2
    assert all(len(r["turns"]) == 11 for r in rows)


def test_official_samples_by_default_when_present(shared_data):
    rows, src = load_bench_dialogues(12)
    assert src["kind"] == "official_sample" and src["dialogues"] == 12 and src["languages"] == ["en", "zh"]


def test_fake_generated_dialogues():
    from esc_eval.sim.bench.dialogues import _fake_dialogues

    rows = _fake_dialogues(2)
    assert len(rows) == 2 and all(r["status"] == "ok" and len(r["turns"]) == 11 for r in rows)


def test_bad_sources(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        load_bench_dialogues(2, tmp_path / "nope")
    (tmp_path / "dialogues").mkdir()
    with pytest.raises(ValueError, match="no completed dialogues"):
        load_bench_dialogues(2, tmp_path)


def test_median_subset():
    rows = [{}] * 5
    assert _median_subset(rows, 2, [100, 900, 500, 480, 10]) == [2, 3]


def test_bench_prompt_order_defaults_to_the_registry_entry():
    from esc_eval.sim.bench.loops.scoring import registry_prompt_order

    assert registry_prompt_order("embedded") == "dialogue_first"  # our stand-in judge reads dialogue first
    assert registry_prompt_order("esc-rank") == "rubric_first"  # the paper's judge keeps the paper's prompt
    assert registry_prompt_order("/models/my-judge") == "rubric_first"


def test_reference_thread_binding_is_set_for_the_engine_start_and_restored(monkeypatch):
    import os

    from esc_eval.sim.bench.loops.scoring import BIND_ENV, _reference_bindings, _thread_bind

    monkeypatch.setenv(BIND_ENV, "7")
    with _thread_bind("0-1"):
        assert os.environ[BIND_ENV] == "0-1"
    with _thread_bind(None):  # vLLM's default: the variable unset, not set empty
        assert BIND_ENV not in os.environ
    assert os.environ[BIND_ENV] == "7"
    monkeypatch.delenv(BIND_ENV)
    with _thread_bind("0"):
        pass
    assert BIND_ENV not in os.environ
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert _reference_bindings() == {"vllm_default": None, "all_2_cores": "0-1"}
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert _reference_bindings() == {"vllm_default": None}


@pytest.mark.parametrize("walls, winner", [({"vllm_default": 5.0, "all_2_cores": 3.0}, "all_2_cores"),
                                           ({"vllm_default": 2.0, "all_2_cores": 3.0}, "vllm_default")])
def test_binding_probe_keeps_the_winners_engine_and_stops_the_others(monkeypatch, walls, winner):
    import os

    import esc_eval.serve.backends.vllm_engine as ve
    import esc_eval.sim.bench.loops.scoring as sc

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(sc, "PHASE_PAUSE_S", 0)
    made, stopped = [], []

    class Host:
        def __init__(self, bind):
            self.bind = bind

    class Counting:
        def __init__(self, model, **kw):
            self.host = Host(os.environ.get(sc.BIND_ENV))  # the binding in force at the engine start
            made.append(self)

    monkeypatch.setattr(sc, "_start", lambda m: 1.5)
    monkeypatch.setattr(sc, "_on_loop", lambda m, coro: (coro.close(), {"wall_s": walls[
        "vllm_default" if m.host.bind is None else "all_2_cores"], "decoded_tokens": 9})[1])
    monkeypatch.setattr(ve, "shutdown_engine", stopped.append)
    name, probes = sc._fastest_reference_binding(Counting, "embedded", "float32", [], 8)
    assert name == winner and set(probes) == {"vllm_default", "all_2_cores"}
    assert probes["all_2_cores"]["VLLM_CPU_OMP_THREADS_BIND"] == "0-1" and probes[winner]["engine_start_s"] == 1.5
    kept = made[list(probes).index(winner)]
    assert stopped == [m.host for m in made if m is not kept]  # the loser only: the winner serves the reference


def test_shutdown_engine_forgets_only_that_engine(monkeypatch):
    import esc_eval.serve.backends.engine_host as ve

    class Host:
        down = False

        def shutdown(self):
            self.down = True

    a, b = Host(), Host()
    monkeypatch.setattr(ve, "_HOSTS", {("m", (), ("x",)): a, ("m", (), ("y",)): b})
    ve.shutdown_engine(a)
    assert a.down and not b.down and list(ve._HOSTS.values()) == [b]


def test_the_reference_starts_in_vllms_own_process_layout(monkeypatch):
    import os

    from esc_eval.serve.engines.cpu_layout import MULTIPROCESSING_ENV, CpuLayout, cpu_layout
    from esc_eval.sim.bench.loops.scoring import _thread_bind

    monkeypatch.delenv(MULTIPROCESSING_ENV, raising=False)
    for bind in (None, "0-1"):
        with _thread_bind(bind):
            assert cpu_layout() == CpuLayout()  # vLLM's layout, as the reference script runs
    assert MULTIPROCESSING_ENV not in os.environ
