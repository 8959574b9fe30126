"""Why Table 2's planted truth may ignore judge J2's windowing (issue 53, leaderboard-ci's 81%): in the
duo a dialogue's replies share one planted quality and one length, so what a windowed judgment leaves
out changes nothing the planted judge reads (the mean quality and words of the replies it is shown)."""
from __future__ import annotations

import asyncio

from esc_eval.serve.backends.planted import PlantedModel
from esc_eval.serve.backends import planted_math as pm
from esc_eval.serve.chat.interface import ChatMessage, GenerationParams
from esc_eval.sim.bench.planted.scenarios import plan
from esc_eval.sim.judging.window import windowed


def _turns(rounds: int = 6) -> list[tuple[str, str]]:
    target = PlantedModel("target", q=2.25, family="b", words="40-160", seed=3)
    turns = [("assistant", "Hello, I am here to listen.")]
    for r in range(1, rounds + 1):
        turns.append(("seeker", pm.tag(s="c0ffee00", r=r, h=0) + " things have been hard lately."))
        history = [ChatMessage(role="user" if s == "seeker" else "assistant", content=t) for s, t in turns[1:]]
        turns.append(("assistant", target._reply(history)))
    return turns


def _stated(turns: list[tuple[str, str]]) -> list[dict[str, float]]:
    options = dict(plan("duo", "planted").judges["J2"], sigma=0.0, card_sd=0.0)  # no noise: the stated P(0..4) is m + b's
    options.pop("context")
    judge = PlantedModel("judge", **options)
    prompt = "\n".join(f"{s}: {t}" for s, t in turns)
    return asyncio.run(judge.chat([ChatMessage(role="user", content=prompt)], GenerationParams(logprobs=True))).top_logprobs


def test_a_windowed_judgment_states_what_the_whole_dialogue_does():
    whole = _turns()
    window, left_out = windowed(whole, keep_late=1, language="en")
    assert left_out == 4 and len(window) < len(whole)
    view = pm.dialogue_view(pm.judged_tags(" ".join(t for _, t in window)))
    assert view["n"] == 2 and view["q"] == 2.25  # it read round 1's and the last round's replies only
    assert _stated(window) == _stated(whole)  # J2's planted length bias reads the same words per reply
