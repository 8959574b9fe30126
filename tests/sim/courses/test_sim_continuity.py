"""The continuity judge (sim/courses/continuity.py): the prompt shows the previous session, then this
one, in the frame of the seven; each later session finds its previous one among the run's rows; a
judge call through score_dialogue reads both."""
from esc_eval.serve.chat.interface import ChatModel, ChatResult
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.courses.continuity import continuity_messages, earlier_sessions
from esc_eval.sim.jobs.scoring import score_dialogue
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.rubrics import human_levels, rubric_text

EARLIER = [("assistant", "Hello"), ("seeker", "My shifts are killing my sleep."), ("assistant", "Try a fixed bedtime.")]
NOW = [("assistant", "Hello again"), ("seeker", "I tried the bedtime."), ("assistant", "How did the bedtime go?")]


def test_the_judge_reads_the_previous_session_then_this_one():
    (official,) = continuity_messages(EARLIER, NOW, "en")
    body = official.content
    assert official.role == "user" and body.startswith(rubric_text("continuity", "en", "official"))
    assert body.index("Previous conversation between user and AI assistant:") < body.index("My shifts are killing")
    assert body.index("Try a fixed bedtime.") < body.index("Dialogue between user and AI assistant:") < body.index("I tried")
    assert body.endswith("give your continuity score (The number only) to the Dialogue.")
    system, user = continuity_messages(EARLIER, NOW, "zh", rubric="paper", rendering="clean", order="dialogue_first")
    assert system.role == "system" and user.content.index("User: I tried the bedtime.") < user.content.index("连续性包括")
    assert set(human_levels("continuity", "zh")) == {"0", "1", "2", "3", "4"}


def test_each_later_session_finds_its_previous_one_when_it_is_ok():
    def row(did, course, session, status="ok", text="x"):
        return {"dialogue_id": did, "course_id": course, "session": session, "status": status,
                "turns": [{"speaker": "assistant", "text": "hi"}, {"speaker": "seeker", "text": text}]}

    rows = [row("a1", "A", 1, text="first"), row("a2", "A", 2, text="second"), row("a3", "A", 3),
            row("b1", "B", 1, status="failed"), row("b2", "B", 2), row("single", None, None)]
    found = earlier_sessions(rows)
    assert set(found) == {"a2", "a3"} and found["a2"][1] == ("seeker", "first") and found["a3"][1] == ("seeker", "second")


class Judge(ChatModel):
    def __init__(self):
        self.prompts = []

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        self.prompts.append(messages[-1].content)
        return ChatResult(text="3", prompt_tokens=50)


async def test_score_dialogue_shows_continuity_the_previous_session_and_the_seven_only_this_one():
    judge = Judge()
    cfg = JudgeConfig(model=ModelRef(model="fake/judge"), method="generate", dimensions=["empathy", "continuity"])
    rows = await score_dialogue(NOW, "en", cfg, judge, earlier=EARLIER)
    assert [(r["dimension"], r["score"], r["parse_status"]) for r in rows] == [("empathy", 3, "ok"), ("continuity", 3, "ok")]
    empathy, continuity = judge.prompts
    assert "killing my sleep" in continuity and "killing my sleep" not in empathy and "I tried the bedtime." in empathy
