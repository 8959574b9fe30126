"""A panel on the real stack: two judges on the session's embedded vLLM engine (the release's rubric
and the paper's, so two judge ids and two prompts on one engine) and a fake one, one short dialogue,
two dimensions each, through run_scoring: each judge's rows apart, the engine's P(0..4) in each."""
from __future__ import annotations

import math

import pytest

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.panel import PanelConfig, PanelJudge
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.records import dialogue_id, dialogue_row
from esc_eval.sim.runs.runfolder import RunFolder

# beside the other slow tests: the in-process engine, no Ray, no timing compared
pytestmark = [pytest.mark.slow, pytest.mark.beside]

TURNS = [("assistant", "Hello, I'm here for you. What's on your mind?"),
         ("seeker", "I failed my exam and I feel like I let my parents down."),
         ("assistant", "That sounds really painful. Failing one exam doesn't define you. How did they react?")]


def test_a_panel_of_two_embedded_judges_and_a_fake_one_scores_in_one_pass(embedded_model, tmp_path):
    run = RunFolder(tmp_path / "run")
    run.write_part("dialogues", [dialogue_row(
        run_id="panel", dialogue_id=dialogue_id("c1", "model-a", "role", "official", 0), card_id="c1", language="en",
        target_model="model-a", status="ok", n_turns=3,
        turns=[{"index": i, "speaker": s, "text": t} for i, (s, t) in enumerate(TURNS)])])
    dims = ["empathy", "fluency"]
    judges = [JudgeConfig(model=ModelRef(model="vllm/embedded"), rubric=rubric, dimensions=dims, name=f"embedded-{rubric}")
              for rubric in ("official", "paper")]
    judges.append(JudgeConfig(model=ModelRef(model="fake/judge?score=2"), dimensions=dims, name="fake"))
    cfg = ScoringConfig(panel=PanelConfig(judges=[PanelJudge(judge=j) for j in judges]),
                        execution=ExecutionConfig(executor="local"))
    result = run_scoring(cfg, run.location)
    assert result["items"] == 1 and result["failed"] == 0 and result["model_calls"] == 6
    rows = {(r["judge"], r["dimension"]): r for r in run.iter_rows("scores")}
    assert set(rows) == {(j.name, d) for j in judges for d in dims}
    for rubric in ("official", "paper"):
        for d in dims:
            r = rows[(f"embedded-{rubric}", d)]
            assert r["parse_status"] == "ok" and r["score"] in range(5) and r["method"] == "logprob"
            assert math.isclose(sum(r["probs"]), 1.0, rel_tol=1e-5) and r["prompt_tokens"] > 100
    # two rubrics, two prompts: the engine's distributions differ
    assert rows[("embedded-official", "empathy")]["probs"] != rows[("embedded-paper", "empathy")]["probs"]
    assert {rows[("fake", d)]["score"] for d in dims} == {2}
