"""The demo's defaults: one engine per core, the CPU's dtype, the dialogue-first judge, 8 cards,
two targets that differ (the release's prompt and a curt one) under distinct names."""
from __future__ import annotations

from esc_eval.cli.demo import DEMO_CARDS, TERSE_PROMPT, TERSE_TARGET, demo_config
from esc_eval.sim.dialogue.targets import target_name
from esc_eval.sim.runs.records import dialogue_id


def test_demo_uses_one_engine_per_core_and_the_shared_prefix_judge(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    cfg = demo_config()
    sim, score = cfg.simulation, cfg.scoring
    assert DEMO_CARDS == 8 and sim.limit == 8 and sim.cards == "sample"
    for ex in (sim.execution, score.execution):
        assert ex.workers == 2 and ex.cpu_bind == "per_worker" and ex.dtype == "auto" and ex.num_cpus_per_worker == 1.0
        # every dialogue in flight at once: 8 cards x 2 targets, one chunk of 8 per worker, room for all of them
        assert ex.chunk_size == 8 and ex.concurrency >= 8
    assert score.judge.prompt_order == "dialogue_first" and score.judge.method == "logprob"
    assert sim.role.params.max_tokens == 48 and sim.targets[0].params.max_tokens == 72  # 4.5 min on 2 AVX2 cores


def test_demo_on_one_core_keeps_vllms_binding(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    ex = demo_config(3).simulation.execution
    assert ex.workers == 1 and ex.cpu_bind == "auto" and ex.chunk_size == 6


def test_demo_has_two_targets_that_differ_with_their_own_dialogue_ids():
    helpful, terse = demo_config().simulation.targets
    # the first is the release's setup, named as before: an existing runs/demo keeps its ids
    assert target_name(helpful) == "vllm/embedded" and helpful.system_prompt is None and helpful.name is None
    assert target_name(terse) == TERSE_TARGET and terse.system_prompt == TERSE_PROMPT and terse.model == helpful.model
    assert terse.params.max_tokens < helpful.params.max_tokens
    ids = {dialogue_id("en-001", target_name(t), "vllm/embedded", "official", 0) for t in (helpful, terse)}
    assert len(ids) == 2
