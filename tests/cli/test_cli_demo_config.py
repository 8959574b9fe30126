"""The demo's defaults: one engine per core, the CPU's dtype, the dialogue-first judge, 8 cards."""
from __future__ import annotations

from esc_eval.cli.demo import DEMO_CARDS, demo_config


def test_demo_uses_one_engine_per_core_and_the_shared_prefix_judge(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    cfg = demo_config()
    sim, score = cfg.simulation, cfg.scoring
    assert DEMO_CARDS == 8 and sim.limit == 8 and sim.cards == "sample"
    for ex in (sim.execution, score.execution):
        assert ex.workers == 2 and ex.cpu_bind == "per_worker" and ex.dtype == "auto" and ex.num_cpus_per_worker == 1.0
        # every card in flight at once: one chunk of 4 per worker, room for all of them
        assert ex.chunk_size == 4 and ex.concurrency >= 4
    assert score.judge.prompt_order == "dialogue_first" and score.judge.method == "logprob"
    assert sim.role.params.max_tokens == 48 and sim.targets[0].params.max_tokens == 72  # 4.5 min on 2 AVX2 cores


def test_demo_on_one_core_keeps_vllms_binding(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    ex = demo_config(3).simulation.execution
    assert ex.workers == 1 and ex.cpu_bind == "auto" and ex.chunk_size == 3
