"""Risk that emerges at a set session of a course, on the fake backends in this process: each session's
role prompt follows its own schedule (session 2's carries its disclosure from its round, session 1's
never; a later session starts with it said), a card disclosing in session 2 is refused in a
single-session run and accepted in a course, and the per-reply judge and the analysis read a 2-session
course's rows: a session's replies counted from its own disclosure, a session without one not rated."""
from __future__ import annotations

import re

import pytest

from esc_eval.analysis.safety.emerging import load_outcomes
from esc_eval.analysis.safety.emerging_stats import summarize_emerging
from esc_eval.serve.chat.interface import ChatModel, ChatResult
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.cards.card import emerging_risk_cards
from esc_eval.sim.courses.course import CourseSetup, Session, run_course
from esc_eval.sim.dialogue.dialogue import Participant
from esc_eval.sim.emerging.schedule import card_prompts
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.reply_safety import run_reply_safety
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.jobs.simulation_items import checked_inputs
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

LOCAL = ExecutionConfig(executor="local", max_attempts=1)
IDEATION, DELUSION = "risk-en-session-ideation-01", "risk-en-session-delusion-01"  # s1 r2 + s2 r2; s2 r1 + s2 r3


def card(card_id):
    return next(c for c in emerging_risk_cards(sessions=True) if c.id == card_id)


class Recorder(ChatModel):
    """Answers 'x', keeps every call's system prompt and routing key."""

    def __init__(self):
        self.calls = []

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        self.calls.append((messages[0].content if messages[0].role == "system" else None, session_id))
        return ChatResult(text="x", prompt_tokens=1, completion_tokens=1)


def told(prompt: str, says: str) -> str:
    """'now' when the prompt tells the seeker to say it in this turn, 'before' when as already said, '' when not at all."""
    line = next((ln for ln in prompt.splitlines() if says in ln), None)
    return "" if line is None else ("before" if re.search(r"already|earlier|before", line, re.I) else "now")


async def test_each_session_of_a_course_follows_its_own_disclosure_schedule():
    c = card(DELUSION)
    belief, distress = (d.says for d in c.risk_emergence.disclosures)
    setup = CourseSetup(card_text=c.text, language="en", sessions=3, rounds=3, card_updates=["u2", "u3"],
                        session_ids=["s1", "s2", "s3"], role_prompts=lambda prompt, k: card_prompts(c, prompt, k))
    role = Recorder()
    await run_course(setup, Participant(role), Participant(Recorder()))
    seeker = {k: [p for p, sid in role.calls if sid.startswith(f"s{k}:")] for k in (1, 2, 3)}
    assert [len(v) for v in seeker.values()] == [3, 3, 3]
    assert all(belief not in p and distress not in p for p in seeker[1])  # session 1: nothing disclosed
    assert [(told(p, belief), told(p, distress)) for p in seeker[2]] == [("now", ""), ("before", ""), ("before", "now")]
    assert {(told(p, belief), told(p, distress)) for p in seeker[3]} == {("before", "before")}  # said before it began
    assert "u2" in seeker[2][0] and "u3" in seeker[3][0]  # the card's updates still reach the seeker
    # without a schedule (a card without risk) the session's prompt throughout, as before
    plain = CourseSetup(card_text=c.text, language="en", sessions=2, rounds=2, card_updates=["u2"])
    assert plain.dialogue(Session(index=2), ["u2"]).role_prompt_from == {}


def test_a_card_disclosing_in_session_2_needs_a_course_of_2(tmp_path):
    def cfg(sessions):
        return SimulationConfig(cards="emerging_risk_sessions", card_ids=[DELUSION], rounds=3, sessions=sessions,
                                role=ModelRef(model="fake/seeker"), targets=[ModelRef(model="fake/echo")], execution=LOCAL)

    with pytest.raises(ValueError, match=r"discloses in session 2, but the run has 1 session\(s\).*--sessions 2"):
        checked_inputs(cfg(1), tmp_path / "run")
    assert [c.id for c in checked_inputs(cfg(2), tmp_path / "run")] == [DELUSION]
    with pytest.raises(ValueError, match="discloses at round 3, but the run has 2 round"):
        checked_inputs(cfg(2).model_copy(update={"rounds": 2}), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_two_session_course_is_judged_per_session_from_its_own_disclosure(tmp_path):
    # the target misses the risk until its 2nd reply of each session, then responds (each session starts over)
    target = ModelRef(model="fake/fixed", name="T", options={"replies": ["Okay. [MISS]", "Are you safe? [SAFE]"]})
    run_simulation(SimulationConfig(cards="emerging_risk_sessions", card_ids=[IDEATION, DELUSION], rounds=3, sessions=2,
                                    role=ModelRef(model="fake/seeker?vary=1"), targets=[target], execution=LOCAL),
                   tmp_path / "run")
    rows = {(r["card_id"], r["session"]): r for r in RunFolder(tmp_path / "run", create=False).iter_rows("dialogues")}
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows.values())
    assert all(len(r["risk_disclosures"]) == 2 and r["risk_kind"] for r in rows.values())
    # the seeker's prompt (tagged in each of its lines) changes at the scheduled rounds only
    tags = {k: [t["text"].rsplit("#", 1)[-1] for t in r["turns"] if t["speaker"] == "seeker"] for k, r in rows.items()}
    assert len(set(tags[(DELUSION, 1)])) == 1 and len(set(tags[(DELUSION, 2)])) == 3  # s2: r1 now, r2 said, r3 now
    assert tags[(IDEATION, 1)][0] != tags[(IDEATION, 1)][1] and len(set(tags[(IDEATION, 2)])) == 3
    marks = "[SAFE]:4/0,[MISS]:1/1"
    result = run_reply_safety(ScoringConfig(judge=JudgeConfig(model=ModelRef(model=f"fake/judge?marks={marks}"),
                                                              name="J"), execution=LOCAL), tmp_path / "run")
    rated = {}
    for r in RunFolder(tmp_path / "run", create=False).iter_rows("reply_safety"):
        rated.setdefault(r["dialogue_id"], set()).add(r["reply"])
    ids = {k: r["dialogue_id"] for k, r in rows.items()}
    # replies from each session's own first disclosure; the delusion card's session 1 has none: not rated
    assert rated == {ids[(IDEATION, 1)]: {2, 3}, ids[(IDEATION, 2)]: {2, 3}, ids[(DELUSION, 2)]: {1, 2, 3}}
    assert result["dialogues"] == 3
    out = load_outcomes(tmp_path / "run").set_index("dialogue_id")
    assert sorted(out.index) == sorted(ids[k] for k in [(IDEATION, 1), (IDEATION, 2), (DELUSION, 2)])
    i1, i2, d2 = (out.loc[ids[k]] for k in [(IDEATION, 1), (IDEATION, 2), (DELUSION, 2)])
    # reply 2 is the first appropriate in every session: taken counts from the session's own onset
    assert (i1["session"], i1["onset"], i1["first_reply"], i1["replies_taken"]) == (1, 2, 2, 1)
    assert (i2["session"], i2["onset"], i2["first_reply"], i2["replies_taken"]) == (2, 2, 2, 1)
    assert (d2["session"], d2["onset"], d2["first_reply"], d2["replies_taken"], d2["last_disclosure"]) == (2, 1, 2, 2, 3)
    # escalation: session 1 of the ideation card has none; its session 2 (active after passive) is one, met
    assert i1["escalation"] is None and i2["escalation"] and d2["escalation"]
    s = summarize_emerging(out.reset_index(), n_boot=50).iloc[0]
    assert (s["n_dialogues"], s["n_cards"], s["responded"], s["n_escalation"]) == (3, 2, 1.0, 2)
