"""Scenarios of risk that emerges mid-conversation as card data: the shipped set (at least 40, every kind
in en and zh, what each follows, C-SSRS items on ideation, nothing of a method), the level a card reaches,
and a malformed schedule refused in one line naming the card."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from esc_eval.sim.cards.card import (CardError, RoleCard, emerging_risk_cards, load_cards, sample_cards,
                                     shipped_cards_path, validate_cards, write_cards)
from esc_eval.sim.cards.emergence import EMERGENCE_KINDS, SOURCES, onset_round
from esc_eval.sim.cards.risk import RISK_LEVELS

# no method of harm and no phone number in any scenario (the role model is told these words)
UNSAFE = re.compile(r"\b(pills?|overdose|rope|hang|jump|bridge|knife|gun|medication dose)\b|药|跳楼|上吊|割腕|刀", re.I)


def test_the_shipped_scenarios_cover_every_kind_in_both_languages():
    cards = emerging_risk_cards()
    assert len(cards) >= 40 and len({c.id for c in cards}) == len(cards)
    kinds = Counter((c.language, c.risk_emergence.kind) for c in cards)
    assert set(kinds) == {(lang, k) for lang in ("en", "zh") for k in EMERGENCE_KINDS} and min(kinds.values()) >= 5
    for c in cards:
        e = c.risk_emergence
        assert e.follows and set(e.follows) <= set(SOURCES) and c.source == "esc-eval-emerging-risk" and c.category_3
        assert c.risk_level == e.level() and c.risk_level in RISK_LEVELS[1:]  # the level the dialogue reaches
        assert 1 <= e.onset.round <= 3 and max(d.round for d in e.disclosures) <= 4  # seen for 2+ replies of 5 rounds
        ideation = [d for d in e.disclosures if d.level in ("passive_ideation", "active_ideation_plan")]
        if e.kind == "ideation":
            assert [d.c_ssrs for d in e.disclosures][0] == 1 and e.disclosures[-1].c_ssrs >= 4  # passive, then active
        assert all(d.c_ssrs is not None for d in ideation)
        assert not any(d.c_ssrs for d in e.disclosures if d.level in ("none", "harm_to_others"))
        said = " ".join([c.problem, *(d.says for d in e.disclosures)])
        assert not UNSAFE.search(said) and not re.search(r"\d{3}[- ]?\d{3,}", said), c.id
        # the card text the role model starts from holds no crisis: the risk comes with a disclosure only
        assert not re.search(r"suicid|end (his|her|their) life|kill|自杀|结束.*生命|伤害", c.text), c.id


def test_the_scenarios_whose_risk_emerges_in_a_later_session_are_a_course_of_two():
    cards = emerging_risk_cards(sessions=True)
    assert len(cards) >= 8 and len(cards) + len(emerging_risk_cards()) >= 52 and len({c.id for c in cards}) == len(cards)
    assert set(Counter((c.language, c.risk_emergence.kind) for c in cards)) == {
        (lang, k) for lang in ("en", "zh") for k in EMERGENCE_KINDS}
    for c in cards:
        e = c.risk_emergence
        assert max(d.session for d in e.disclosures) == 2 and max(d.round for d in e.disclosures) <= 3  # --sessions 2 --rounds 3
        assert onset_round([d.model_dump() for d in e.disclosures], 2) is not None and c.session_updates
        assert c.risk_level == e.level() and c.risk_level in RISK_LEVELS[1:] and set(e.follows) <= set(SOURCES)
        if e.kind == "ideation":  # passive in session 1, active in session 2 (C-SSRS items 1, then 4)
            assert [(d.session, d.c_ssrs) for d in e.disclosures] == [(1, 1), (2, 4)]
        said = " ".join([c.problem, *c.session_updates, *(d.says for d in e.disclosures)])
        assert not UNSAFE.search(said) and not re.search(r"\d{3}[- ]?\d{3,}", said), c.id
        # neither the card nor the update before session 2 holds the crisis: only the disclosures do
        calm = " ".join([c.text, *c.session_updates])
        assert not re.search(r"suicid|end (his|her|their) life|kill|hurt|自杀|结束.*生命|伤害|报复", calm), c.id


def test_validating_the_set_counts_its_kinds():
    counts = validate_cards(shipped_cards_path("emerging_risk"))
    assert counts["cards"] == 48 and counts["by_emergence_kind"] == {k: 12 for k in sorted(EMERGENCE_KINDS)}
    assert "by_emergence_kind" not in validate_cards(shipped_cards_path("sample"))


def test_cards_without_an_emergence_load_and_write_as_before(tmp_path):
    cards = sample_cards()
    assert all(c.risk_emergence is None for c in cards)
    path = write_cards(cards, tmp_path / "cards.json")
    assert "risk_emergence" not in path.read_text() and load_cards(path) == cards
    again = write_cards(emerging_risk_cards(limit=3), tmp_path / "risk.json")
    assert load_cards(again) == emerging_risk_cards(limit=3)  # the schedule survives a round trip


@pytest.mark.parametrize("emergence, says", [
    ({"kind": "ideation", "follows": ["c-ssrs"], "disclosures": [
        {"round": 3, "level": "passive", "says": "a"}, {"round": 2, "level": "active", "says": "b"}]},
     "disclosures out of order"),
    ({"kind": "ideation", "follows": ["a blog"], "disclosures": [{"round": 1, "level": "passive", "says": "a"}]},
     "follows ['a blog']"),
    ({"kind": "ideation", "follows": ["c-ssrs"], "disclosures": []}, "no disclosure"),
    ({"kind": "grief", "follows": ["c-ssrs"], "disclosures": [{"round": 1, "level": "none", "says": "a"}]}, "kind"),
])
def test_a_malformed_schedule_is_one_line_naming_the_card(tmp_path, emergence, says):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "s1", "language": "en", "problem": "p", "risk_emergence": emergence}]))
    with pytest.raises(CardError) as e:
        load_cards(bad)
    assert str(e.value).startswith(f"{bad} card #0 (id 's1'): field 'risk_emergence") and says in str(e.value)
    assert "\n" not in str(e.value)


def test_the_onset_is_the_first_disclosure_of_the_session():
    card = RoleCard(id="x", language="en", problem="p", risk_emergence={
        "kind": "ideation", "follows": ["c-ssrs"], "disclosures": [
            {"round": 4, "session": 1, "level": "passive", "says": "a"},
            {"round": 2, "session": 2, "level": "active", "says": "b"}]})
    assert card.risk_level == "active_ideation_plan" and card.risk_emergence.onset.round == 4
    rows = [d.model_dump() for d in card.risk_emergence.disclosures]
    assert onset_round(rows) == 4 and onset_round(rows, session=2) == 2 and onset_round(None) is None
    assert RoleCard(id="y", language="en", problem="p", risk_level="none",
                    risk_emergence=card.risk_emergence).risk_level == "none"  # a level given is kept
