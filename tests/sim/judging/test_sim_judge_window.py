"""The whole-dialogue judgment of a dialogue longer than the judge's context (sim/judging/window.py):
the whole dialogue when it fits; else the opener, round 1 and the last rounds with a marker, the late
rounds halving on each refusal; the rows say how many rounds the judge did not read."""
from __future__ import annotations

from esc_eval.serve.backends.fake import FakeChatModel
from esc_eval.serve.chat.interface import ChatResult
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.scoring import score_dialogue
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.window import dialogue_rounds, late_rounds_to_try, windowed


def _dialogue(rounds: int) -> list[tuple[str, str]]:
    turns = [("assistant", "Hello, I'm your personal assistant.")]
    for k in range(1, rounds + 1):
        turns += [("seeker", f"seeker line of round {k}"), ("assistant", f"supporter reply of round {k}")]
    return turns


def test_the_window_keeps_the_opener_round_one_and_the_last_rounds():
    turns = _dialogue(10)
    head, rounds = dialogue_rounds(turns)
    assert len(head) == 1 and len(rounds) == 10 and rounds[2] == [turns[5], turns[6]]
    assert late_rounds_to_try(10) == [4, 2, 1] and late_rounds_to_try(2) == [] and late_rounds_to_try(1) == []
    shown, left_out = windowed(turns, 4, "en")
    assert left_out == 5  # rounds 2-6
    assert [t for _, t in shown] == [turns[0][1], "seeker line of round 1", "supporter reply of round 1",
                                     "[... 5 rounds of the conversation left out ...] seeker line of round 7",
                                     "supporter reply of round 7", "seeker line of round 8", "supporter reply of round 8",
                                     "seeker line of round 9", "supporter reply of round 9", "seeker line of round 10",
                                     "supporter reply of round 10"]
    assert windowed(turns, 9, "en") == (turns, 0)  # all but round 1 kept: the dialogue as it is
    zh, n = windowed(turns, 1, "zh")
    assert n == 8 and zh[3][1].startswith("[……此处省略了8轮对话……]")
    # a dialogue its seeker ended has a last round of one seeker turn
    ended = _dialogue(6)[:-1]
    shown, left_out = windowed(ended, 1, "en")
    assert left_out == 4 and shown[-1] == ("seeker", "[... 4 rounds of the conversation left out ...] seeker line of round 6")


class Recording(FakeChatModel):
    def __init__(self, **kw):
        super().__init__("judge", **kw)
        self.prompts: list[str] = []

    async def chat(self, messages, params=None, **kw) -> ChatResult:
        self.prompts.append(messages[-1].content)
        return await super().chat(messages, params, **kw)


async def test_a_dialogue_over_the_judges_context_is_windowed_and_the_rows_say_so():
    judge = JudgeConfig(model=ModelRef(model="fake/judge"), dimensions=["empathy"])
    turns = _dialogue(30)
    roomy = Recording()
    (row,) = await score_dialogue(turns, "en", judge, roomy)
    assert row["score"] is not None and row["rounds_left_out"] == 0 and len(roomy.prompts) == 1  # it fits: whole
    whole = len(roomy.prompts[0])
    # a context the whole prompt overflows, but a window of round 1 and the last 7 rounds fits
    tight = Recording(context=int(whole / 4 * 0.62))
    (row,) = await score_dialogue(turns, "en", judge, tight)
    assert row["score"] is not None and row["parse_status"] == "ok" and row["error"] is None
    assert row["rounds_left_out"] == 22 and len(tight.prompts) == 3  # the whole (29 late), 14, then 7 late rounds
    assert "[... 22 rounds of the conversation left out ...] seeker line of round 24" in tight.prompts[-1]
    assert "seeker line of round 1\n" in tight.prompts[-1] and "round 23" not in tight.prompts[-1]
    # not even round 1 and the last round fit: the refusal is the row's error, never a score
    tiny = Recording(context=40)
    (row,) = await score_dialogue(turns, "en", judge, tiny)
    assert row["score"] is None and row["parse_status"] == "error" and row["error"].startswith("ContextOverflowError")
    assert row["rounds_left_out"] == 28 and len(tiny.prompts) == 1 + len(late_rounds_to_try(30))


async def test_other_errors_are_not_windowed():
    class Broken(Recording):
        async def chat(self, messages, params=None, **kw):
            self.prompts.append(messages[-1].content)
            raise RuntimeError("judge fell over")

    model = Broken()
    (row,) = await score_dialogue(_dialogue(10), "en", JudgeConfig(model=ModelRef(model="fake/judge"),
                                                                  dimensions=["fluency"]), model)
    assert row["error"] == "RuntimeError: judge fell over" and row["rounds_left_out"] == 0 and len(model.prompts) == 1
