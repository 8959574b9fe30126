"""Statistics: Table 6/9 layouts and the Figure 5 chart; the 655 official high-quality cards."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from esc_eval.cli.jobs.cards import cards_stats
from esc_eval.sim.cardbuild import card_summary, category_table, plot_distribution, stage_table
from esc_eval.sim.cards.card import RoleCard, load_cards

SHARED = Path(__file__).resolve().parents[4].parent / "shared"
CARDS = SHARED / "data" / "esc-eval" / "cards"
needs_official = pytest.mark.skipif(not (CARDS / "card_high_en.json").exists(),
                                    reason=f"official ESC-Eval cards not present under {CARDS}")


def _card(i, lang="en", c3=None, quality=None, c1="Family and Life"):
    from esc_eval.sim.cards.taxonomy import load_taxonomy

    c2 = None
    if c3:
        c1, c2, c3 = load_taxonomy().path(c3)
    return RoleCard(id=str(i), language=lang, problem="A problem long enough to count.", category_1=c1,
                    category_2=c2, category_3=c3, quality=quality)


def test_stage_table_layout():
    df = stage_table({"Extract": {"en": 10, "zh": 4}, "LLM_F": {"en": 8, "zh": 3}, "High": {"en": 2, "zh": 1},
                      "Middle": {"en": 5, "zh": 2}, "Human_F": {"en": 7, "zh": 3}})
    assert list(df.columns) == ["Language", "Extract", "LLM_F", "Human_F", "High", "Middle"]
    assert df.iloc[0].tolist() == ["English", 10, 8, 7, 2, 5]


def test_category_table_full_taxonomy_rows():
    cards = [_card(1, c3="death_of_family_member", quality="high"), _card(2, c3="death_of_family_member", quality="middle"),
             _card(3, "zh", c3="criminal_cases", quality="middle")]
    df = category_table(cards)
    assert len(df) == 35 and list(df.columns)[:3] == ["Category 1", "Category 2", "Category 3"]
    row = df[df["Category 3"] == "death of family member"].iloc[0]
    assert (row["Category 1"], row["Category 2"], row["High"], row["Middle"]) == (
        "Family and Life", "Mental and physical health issues", 1, 1)
    assert df["Middle"].sum() == 2 and df["High"].sum() == 1
    top = category_table(cards, level=1)
    assert top.set_index("Category 1").loc["Social interaction and Others", "Middle"] == 1


@needs_official
def test_stats_on_the_655_official_cards(tmp_path):
    en = load_cards(CARDS / "card_high_en.json")
    zh = load_cards(CARDS / "card_high_zh.json")
    assert (len(en), len(zh)) == (331, 324)  # Table 6: High 331 / 324
    s = card_summary(en + zh)
    assert s["cards"] == 655
    assert s["by_language_category_1"]["en"] == {"Family and Life": 172, "Work and Study": 87, "Social interaction and Others": 72}
    assert s["by_language_category_1"]["zh"] == {"Family and Life": 215, "Work and Study": 72, "Social interaction and Others": 37}
    assert s["by_source"]["ESconv"] == 158 and s["by_source"]["PsyQA"] == 252
    df = category_table(en + zh)  # only `res` is known: the table collapses to the top level
    assert list(df.columns) == ["Category 1", "High", "Middle", "Unrated", "Total"]
    assert df["Total"].sum() == 655 and df.set_index("Category 1").loc["Family and Life", "Total"] == 387
    png = plot_distribution(en + zh, tmp_path / "fig.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    cards_stats(CARDS / "card_high_zh.json", tmp_path / "zh")
    rows = list(csv.DictReader((tmp_path / "zh" / "categories_top.csv").open(encoding="utf-8")))
    assert {r["Category 1"]: int(r["Total"]) for r in rows} == {"Family and Life": 215, "Work and Study": 72,
                                                                "Social interaction and Others": 37}
    assert not (tmp_path / "zh" / "table6_stages.csv").exists()  # a plain card file has no stage counts
    cards_stats(CARDS / "card_high_en.json", tmp_path / "en", assume_quality="high")  # card_high = Table 6 High
    rows = list(csv.DictReader((tmp_path / "en" / "categories_top.csv").open(encoding="utf-8")))
    assert sum(int(r["High"]) for r in rows) == 331 and sum(int(r["Middle"]) for r in rows) == 0
