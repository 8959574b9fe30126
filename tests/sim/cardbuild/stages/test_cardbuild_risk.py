"""The card builder's risk labelling (beyond the paper) on the scripted fake: the prompt reads the
source, constrained answers become each card's risk level, an unreadable one leaves the card
unassessed, a rebuild makes no call, and the stage stays off unless asked for."""
from __future__ import annotations

import json

import pytest

from cardbuild_fakes import ScriptedCardModel
from esc_eval.sim.cardbuild import (SourceItem, Turn, build_cards, parse_build_config, parse_risk_reply, risk_choices,
                                    risk_messages)
from esc_eval.sim.cards.card import load_cards

# Our own short dialogues in the ESConv layout (seeker / supporter), one per level, and one whose
# risk reply the fake cannot give.
SEEKER = {
    "none": "My exams start next week and my flatmate plays music until three every night, I am exhausted.",
    "passive": "Since the layoff I sometimes wish I could go to sleep and not wake up, though I would never act on it.",
    "active": "I have picked a date to end my life and written letters to my family, I feel strangely calm.",
    "others": "My neighbour keeps wrecking my car and I keep thinking about going over there to hurt him badly.",
    "unclear": "RISK-GIBBERISH my landlord raised the rent again and I do not know how to pay the deposit.",
}


def _esconv(tmp_path):
    records = [{"experience_type": "Current Experience", "emotion_type": "sadness", "problem_type": key,
                "situation": f"A person in a hard situation ({key}).",
                "dialog": [{"speaker": "supporter", "content": "Hi, how are you feeling today?"},
                           {"speaker": "seeker", "content": text},
                           {"speaker": "supporter", "content": "Thank you for telling me. Tell me more."},
                           {"speaker": "seeker", "content": "It has been like this for weeks and it is getting worse."}]}
               for key, text in SEEKER.items()]
    path = tmp_path / "esconv.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def _config(tmp_path, **risk):
    return parse_build_config({"output": str(tmp_path / "out"), "sources": [{"path": str(_esconv(tmp_path)),
                                                                             "dataset": "ESConv"}],
                               "filter": {"enabled": False}, "annotation": {"enabled": False}, "risk": risk,
                               "concurrency": 2, "retry_wait_s": 0.0})


def test_risk_stage_labels_each_card_and_resumes(tmp_path):
    model = ScriptedCardModel()
    res = build_cards(_config(tmp_path, enabled=True), model, show_progress=False)
    assert model.calls["risk"] == 5
    cards = {c.problem: c.risk_level for c in load_cards(res.cards_path)}
    by_key = {key: next(level for problem, level in cards.items() if SEEKER[key][:40] in problem) for key in SEEKER}
    assert by_key == {"none": "none", "passive": "passive_ideation", "active": "active_ideation_plan",
                      "others": "harm_to_others", "unclear": None}
    stage = [json.loads(x) for x in (res.output / "stages" / "risk.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["method"] for r in stage) == ["llm", "llm", "llm", "llm", "unparsed"]
    manifest = json.loads((res.output / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["risk_levels"] == {"none": 1, "passive_ideation": 1, "active_ideation_plan": 1,
                                       "harm_to_others": 1, "not assessed": 1}
    again = ScriptedCardModel()
    res2 = build_cards(_config(tmp_path, enabled=True), again, show_progress=False)
    assert sum(again.calls.values()) == 0 and load_cards(res2.cards_path) == load_cards(res.cards_path)


def test_risk_stage_is_off_by_default(tmp_path):
    model = ScriptedCardModel()
    res = build_cards(_config(tmp_path), model, show_progress=False)
    assert model.calls["risk"] == 0 and not (res.output / "stages" / "risk.jsonl").exists()
    assert all(c.risk_level is None for c in load_cards(res.cards_path))
    assert "risk_levels" not in json.loads((res.output / "manifest.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("language", ["en", "zh"])
def test_risk_prompt_reads_the_source_and_offers_the_four_labels(language):
    item = SourceItem(id="i1", dataset="esconv", language=language, kind="md", native_id="1", source_file="f",
                      situation="SITUATION-TEXT", turns=[Turn(speaker="seeker", text="SEEKER-TEXT"),
                                                         Turn(speaker="supporter", text="SUPPORTER-TEXT")])
    body = risk_messages(item)[-1].content
    assert all(t in body for t in ("SITUATION-TEXT", "SEEKER-TEXT", "SUPPORTER-TEXT"))
    choices = risk_choices(language)
    assert len(choices) == 4 and all(c in body for c in choices)
    assert [parse_risk_reply(c, language).risk_level for c in choices] == [
        "none", "passive_ideation", "active_ideation_plan", "harm_to_others"]


@pytest.mark.parametrize("reply, level", [("Passive ideation.", "passive_ideation"), ("'harm to others'", "harm_to_others"),
                                          ("active_ideation_plan", "active_ideation_plan"), ("maybe passive", None),
                                          ("", None)])
def test_risk_reply_parsing_is_strict(reply, level):
    parsed = parse_risk_reply(reply, "en")
    assert parsed.risk_level == level and parsed.method == ("llm" if level else "unparsed")
