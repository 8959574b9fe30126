"""The planted backend (serve/backends/planted.py): a real registered backend whose behaviour is set
by its options and known, through the seam every caller uses."""
from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from esc_eval.serve.backends import planted_math as pm
from esc_eval.serve.backends.planted import spoils
from esc_eval.serve.chat.interface import ChatMessage as M
from esc_eval.serve.chat.interface import ContextOverflowError, GenerationParams, get_chat_model

SYSTEM = "Here is your character card:'Age: young\nOccupation: nurse\nProblem: My manager keeps piling work on me.\n'"


def chat(model, messages, params=None):
    return asyncio.run(model.chat(messages, params))


def chat_many(model, conversations, params=None):
    """Many calls in one event loop (a loop per call costs more than the planted model's answer)."""
    async def all_of():
        return [await model.chat(m, params) for m in conversations]

    return asyncio.run(all_of())


def seeker_turns(model, system=SYSTEM, rounds=5):
    msgs, out = [M(role="system", content=system), M(role="user", content="Hello, how can I help?")], []
    for _ in range(rounds):
        text = chat(model, msgs).text
        out.append(text)
        msgs += [M(role="assistant", content=text), M(role="user", content="I hear you.")]
    return out


def target_replies(model, lines):
    msgs, out = [], []
    for line in lines:
        msgs.append(M(role="user", content=line))
        out.append(chat(model, msgs).text)
        msgs.append(M(role="assistant", content=out[-1]))
    return out


def test_a_target_plants_its_quality_from_round_k_and_its_length():
    lines = seeker_turns(get_chat_model("planted/seeker?seed=1"))
    replies = target_replies(get_chat_model("planted/target?q=2.5&drop=-0.25&from_round=4&words=30-50&family=a&seed=1"),
                             lines)
    tags = [pm.read_tags(r)[0] for r in replies]
    assert [float(t["q"]) for t in tags] == [2.5, 2.5, 2.5, 2.25, 2.25] and {t["f"] for t in tags} == {"a"}
    words = {pm.count_words(r) for r in replies}
    assert len(words) == 1 and 30 <= words.pop() <= 50  # one length per dialogue, as planted
    never = target_replies(get_chat_model("planted/target?q=2.5&seed=1"), lines)
    assert {pm.read_tags(r)[0]["q"] for r in never} == {"2.500"}


def test_a_seeker_tags_its_card_ends_when_told_and_says_a_hard_setting():
    turns = seeker_turns(get_chat_model("planted/seeker?seed=1&ends=3"), SYSTEM + " end with <END:resolved>")
    assert "<END:resolved>" in turns[2] and "<END:" not in turns[1] + turns[3]
    key = pm.card_key("My manager keeps piling work on me.")
    assert {pm.read_tags(t)[0]["s"] for t in turns} == {key} and "manager" in turns[0]
    assert "<END:" not in "".join(seeker_turns(get_chat_model("planted/seeker?seed=1&ends=3")))  # not told: never
    hard = seeker_turns(get_chat_model("planted/seeker?seed=1&hard=Be+difficult"), SYSTEM + "\nBe difficult.")
    assert {pm.read_tags(t)[0]["h"] for t in hard} == {"1"} and pm.read_tags(hard[0])[0]["s"] == key
    hurt = target_replies(get_chat_model("planted/target?q=2.5&hard=-0.5&seed=1"), hard)
    assert {pm.read_tags(r)[0]["q"] for r in hurt} == {"2.000"}


def test_a_seeker_spoils_its_share_of_cards_and_replays_people(tmp_path):
    spoiler = get_chat_model("planted/seeker?seed=0&spoil=out_of_character&spoil_rate=0.5")
    spoiled = [spoils(spoiler, pm.card_key(f"problem {i}")) for i in range(400)]
    assert 0.4 < np.mean(spoiled) < 0.6
    key = next(i for i, s in enumerate(spoiled) if s)
    turns = seeker_turns(spoiler, f"Problem: problem {key}\n")
    assert "As an AI language model" in turns[1] and "AI language model" not in turns[0] + turns[2]
    people = tmp_path / "replay.json"
    people.write_text(json.dumps([{"key": "piling work", "lines": ["one", "two", "three"]}]))
    replay = seeker_turns(get_chat_model("planted/seeker", replay=str(people), longer=2), rounds=4)
    assert replay[0].startswith("one ") and replay[3].startswith("one ") and len(replay[1].split()) == 3


def _dialogue(q_seeker: str, reply_q: list[float], words: int = 40, family: str = "a") -> str:
    lines = []
    for r, q in enumerate(reply_q, 1):
        lines.append(pm.tag(s=q_seeker, r=r, h=0) + " a line")
        lines.append(pm.tag(q=f"{q:.3f}", f=family, w=words) + " a reply")
    return "\n".join(lines)


def test_a_judge_scores_what_it_reads_with_its_noise_and_biases():
    judge = get_chat_model("planted/judge?sigma=0.4&seed=3")
    params = GenerationParams(max_tokens=1, choices=list("01234"), logprobs=5)
    labels = []
    for res in chat_many(judge, [[M(role="user", content=f"rubric {i % 7}\n" + _dialogue(f"card{i}", [3.0] * 5))]
                                 for i in range(300)], params):
        probs = np.exp([res.top_logprobs[0][k] for k in "01234"])
        assert probs.sum() == pytest.approx(1.0) and res.text == "01234"[int(probs.argmax())]
        labels.append(int(res.text))
    truth = pm.expected_label(3.0, pm.center_sd(0.6, 0.4), pm.stated_spread(0.6, 0.4, 0.5))
    assert abs(np.mean(labels) - float(truth)) < 0.12  # 300 draws: about 4 standard errors
    again = chat(judge, [M(role="user", content="rubric 0\n" + _dialogue("card0", [3.0] * 5))], params)
    assert again.text == str(labels[0])  # deterministic per prompt and seed
    biased = get_chat_model("planted/judge?sigma=0&card_sd=0&people_sd=0.3&beta=1&family=a&own=0.6")
    read = lambda d: int(chat(biased, [M(role="user", content=d)]).text)  # noqa: E731
    assert read(_dialogue("c", [2.0] * 5, words=0, family="b")) == 2
    assert read(_dialogue("c", [2.0] * 5, words=100, family="b")) == 3  # a point per 100 words
    assert read(_dialogue("c", [2.0] * 5, words=0, family="a")) == 3  # its own family: +0.6
    assert read(_dialogue("c", [1.9, 1.9, 1.9, 0.0, 0.0], words=0, family="b")) == 1  # the mean of what it reads


def test_a_judge_refuses_past_its_context_and_picks_the_first_shown_as_planted():
    small = get_chat_model("planted/judge?context=50")
    with pytest.raises(ContextOverflowError):
        chat(small, [M(role="user", content="x" * 400)])
    pair = get_chat_model("planted/judge?first=0.6&pair_sd=0.5&seed=2")
    shown = [[M(role="user", content=f"Dialogue 1\n{_dialogue(f'k{i}', [2.5] * 5)}\n\nDialogue 2\n"
                                     f"{_dialogue(f'k{i}', [2.5] * 5)}")] for i in range(600)]
    firsts = [r.text == "1" for r in chat_many(pair, shown)]
    assert 0.55 < np.mean(firsts) < 0.65  # 600 answers: about 2.5 standard errors either side
    better = chat_many(pair, [[M(role="user", content=_dialogue(f"k{i}", [3.0] * 5) + "\n" + _dialogue(f"k{i}", [2.0] * 5))]
                              for i in range(100)])
    assert [r.text for r in better].count("1") > 90


def test_the_truth_arithmetic_matches_draws():
    rng = np.random.default_rng(0)
    spread = pm.stated_spread(0.6, 0.4, 0.5)
    centers = 3.3 + 0.5 * rng.normal(size=40_000)
    assert pm.argmax_label(centers, spread).mean() == pytest.approx(float(pm.expected_label(3.3, 0.5, spread)), abs=0.015)
    people = np.clip(np.floor(2.2 + rng.normal(0, np.hypot(0.6, 0.5), 40_000) + 0.5), 0, 4)
    assert people.mean() == pytest.approx(pm.expected_person(2.2, 0.6, 0.5), abs=0.015)  # 4 standard errors
    t = pm.label_thresholds(spread)
    assert t[1:3] == pytest.approx([1.5, 2.5]) and 0.5 < t[0] < 0.6 and 3.4 < t[3] < 3.5  # clipping moves the ends
    with pytest.raises(ValueError, match="unknown planted role"):
        get_chat_model("planted/critic")


def test_a_per_reply_judge_rates_the_last_reply_it_is_shown():
    """reply=1 (score --by-reply): the judge reads the context and rates the reply its prompt ends
    with, so a reply of quality 0.5 after three of 3.5 gets a low label; without it, the mean of all."""
    good, bad = pm.tag(q="3.500", f="a", w=40), pm.tag(q="0.500", f="a", w=40)
    prompt = f"{pm.tag(s='k1', r=1, h=0)} hi\n{good} a\n{good} b\n{good} c\nThe AI assistant's reply to rate:\n{bad} d"
    params = GenerationParams(max_tokens=1, logprobs=5)
    reply = chat(get_chat_model("planted/judge?reply=1&sigma=0&card_sd=0&seed=0"), [M(role="user", content=prompt)], params)
    whole = chat(get_chat_model("planted/judge?sigma=0&card_sd=0&seed=0"), [M(role="user", content=prompt)], params)
    assert int(reply.text) <= 1 and int(whole.text) >= 2
