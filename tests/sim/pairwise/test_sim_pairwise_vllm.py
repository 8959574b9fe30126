"""Pairwise judging on the real embedded vLLM judge (the session's engine): 2 targets x 1 card x
1 dimension x 2 orders through run_pairwise, the answer constrained to the three labels and
P(first, second, tie) read from the engine's log-probabilities."""
from __future__ import annotations

import asyncio
import math

import pytest

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.pairwise.job import call_messages, run_pairwise
from esc_eval.sim.pairwise.config import PairwiseConfig
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.judge_plan import JudgePlan, constrained_params
from esc_eval.sim.judging.pairwise_prompts import VERDICT_LABELS, VERDICTS, pairwise_params, verdict_probs
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.records import dialogue_id, dialogue_row
from esc_eval.sim.runs.runfolder import RunFolder

# beside the other slow tests: the in-process engine, no Ray, no timing compared
pytestmark = [pytest.mark.slow, pytest.mark.beside]

OPENER = ("assistant", "Hello, I'm your personal assistant. You can confide in me about any worries.")
SEEKER = ("seeker", "I can't sleep since I lost my job, and I feel like a failure.")
REPLIES = {"warm": "I'm so sorry. Losing a job hurts, and it says nothing about your worth. What keeps you up at night?",
           "curt": "Try melatonin."}


def test_two_targets_compared_in_both_orders_on_the_embedded_judge(embedded_model, tmp_path):
    run = RunFolder(tmp_path / "run")
    run.write_part("dialogues", [
        dialogue_row(run_id="r", dialogue_id=dialogue_id("c1", t, "role", "default", 0), card_id="c1", language="en",
                     target_model=t, role_model="role", strategy="default", seed=0, status="ok",
                     turns=[{"speaker": s, "text": x} for s, x in (OPENER, SEEKER, ("assistant", reply))])
        for t, reply in REPLIES.items()])
    cfg = PairwiseConfig(judge=JudgeConfig(model=ModelRef(model="vllm/embedded")), dimensions=["empathy"],
                         execution=ExecutionConfig(executor="local"))
    result = run_pairwise(cfg, tmp_path / "run")
    assert result["pairs"] == 1 and result["model_calls"] == 2 and result["failed"] == 0
    assert result["judge_method"] == "logprob"
    rows = sorted(run.iter_rows("pairwise"), key=lambda r: r["order"])
    assert [r["order"] for r in rows] == ["ab", "ba"]
    for r in rows:
        assert (r["model_a"], r["model_b"]) == ("curt", "warm")  # canonical order: model_a < model_b
        assert r["parse_status"] == "ok" and r["error"] is None and r["verdict"] in VERDICTS, r
        assert len(r["probs"]) == 3 and math.isclose(sum(r["probs"]), 1.0, rel_tol=1e-5)
        assert r["verdict"] == VERDICTS[max(range(3), key=r["probs"].__getitem__)]  # the greedy answer is the argmax
        assert r["raw"] == VERDICT_LABELS[r["verdict"]]
        shown_first = "a" if r["order"] == "ab" else "b"
        assert r["preferred"] == {"first": shown_first, "second": "ab".replace(shown_first, ""), "tie": "tie"}[r["verdict"]]
        assert r["prompt_tokens"] > 200  # the frame, the rubric's description and both dialogues
    # the same prompt asked of the engine directly gives the same distribution (bf16 batch-shape noise aside)
    turns = {t: [OPENER, SEEKER, ("assistant", reply)] for t, reply in REPLIES.items()}
    params = pairwise_params(JudgePlan("logprob", constrained_params()), cfg.judge.model.params)
    direct = asyncio.run(embedded_model.chat(call_messages(cfg, "empathy", "ab", turns["curt"], turns["warm"], "en"), params))
    assert set(direct.top_logprobs[0]) == {"0", "1", "2"}
    assert max(abs(x - y) for x, y in zip(verdict_probs(direct.top_logprobs[0]), rows[0]["probs"])) < 0.05
