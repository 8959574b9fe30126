"""Human annotation: sheets, the Appendix A.2 correction rules, the reviewer, agreement."""
from __future__ import annotations

import csv

import pytest

from esc_eval.sim.cardbuild import (Vote, agreement, apply_correction_rules, cohen_kappa, export_card_annotation_sheets,
                                    export_reviewer_sheet, finalize_cards, read_annotator_sheet, read_reviewer_sheet,
                                    resolve_leaf)
from esc_eval.sim.cards.card import RoleCard

FRIENDS = "friends_relations_general_issues"
WORK = "work_and_study_performance_issues"


def _cards(n=6):
    return [RoleCard(id=f"k{i}", language="en", problem=f"Problem number {i} with enough words in it.", source="ESconv")
            for i in range(n)]


def test_rules_of_appendix_a2():
    ids = ["inv", "hh", "mm", "hm", "cat", "both", "half"]
    a = {"inv": Vote("invalid", None), "hh": Vote("high", FRIENDS), "mm": Vote("middle", WORK),
         "hm": Vote("high", FRIENDS), "cat": Vote("middle", FRIENDS), "both": Vote("high", FRIENDS),
         "half": Vote("high", FRIENDS)}
    b = {"inv": Vote("high", FRIENDS), "hh": Vote("high", FRIENDS), "mm": Vote("middle", WORK),
         "hm": Vote("middle", FRIENDS), "cat": Vote("middle", WORK), "both": Vote("middle", WORK)}
    out = apply_correction_rules(ids, a, b).decisions
    assert out["inv"].status == "discarded"  # one invalid vote discards
    assert (out["hh"].status, out["hh"].quality, out["hh"].category_3) == ("accepted", "high", FRIENDS)
    assert (out["mm"].status, out["mm"].quality) == ("accepted", "middle")
    assert (out["hm"].status, out["hm"].needs, out["hm"].category_3) == ("needs_review", ["tier"], FRIENDS)
    assert (out["cat"].status, out["cat"].needs, out["cat"].quality) == ("needs_review", ["category"], "middle")
    assert out["both"].needs == ["tier", "category"]
    assert out["half"].status == "pending"  # only one annotator so far
    # the reviewer decides tier and category
    r = {"hm": Vote("high", None), "cat": Vote(None, WORK), "both": Vote("middle", FRIENDS)}
    out = apply_correction_rules(ids, a, b, r).decisions
    assert (out["hm"].status, out["hm"].quality) == ("accepted", "high")
    assert (out["cat"].status, out["cat"].category_3) == ("accepted", WORK)
    assert (out["both"].quality, out["both"].category_3) == ("middle", FRIENDS)
    # "the remaining role cards were considered middle-quality"
    out = apply_correction_rules(["hm"], a, b, unreviewed_tier="middle").decisions
    assert (out["hm"].status, out["hm"].quality) == ("accepted", "middle")


def test_cohen_kappa_known_value_and_edges():
    a = ["high", "high", "middle", "middle", "invalid", "invalid", "high", "middle"]
    b = ["high", "middle", "middle", "middle", "invalid", "high", "high", "middle"]
    assert cohen_kappa(a, b) == pytest.approx(25 / 41)  # po = 6/8, pe = 23/64
    assert cohen_kappa(["high"] * 3, ["high"] * 3) == 1.0
    assert cohen_kappa([], []) is None
    with pytest.raises(ValueError):
        cohen_kappa(["a"], [])


def test_agreement_report():
    a = {"1": Vote("high", FRIENDS), "2": Vote("middle", WORK), "3": Vote("invalid", None), "4": Vote("high", WORK)}
    b = {"1": Vote("high", FRIENDS), "2": Vote("middle", FRIENDS), "3": Vote("middle", WORK)}
    rep = agreement(a, b)
    assert rep["n_tier"] == 3 and rep["n_category"] == 2 and rep["category_percent_agreement"] == 50.0
    assert rep["tier_percent_agreement"] == pytest.approx(66.67)
    assert rep["kappa_tier"] == pytest.approx(cohen_kappa(["high", "middle", "invalid"], ["high", "middle", "middle"]), abs=1e-4)


def _fill(path, answers):
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    for r in rows:
        if r["card_id"] in answers:
            r["quality"], r["category_3"] = answers[r["card_id"]]
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_sheet_round_trip_reviewer_flow_and_bad_cells(tmp_path):
    cards = _cards()
    p1, p2 = export_card_annotation_sheets(cards, tmp_path, ["ann1", "ann2"], {"k0": "x (llm)"})
    text = (tmp_path / "instructions.md").read_text(encoding="utf-8")
    assert "Table 8" in text and "35. `social_and_public_events`" in text and "invalid" in text
    _fill(p1, {"k0": ("high", "28"), "k1": ("medium", "General issues in getting along with friends"),
               "k2": ("invalid", ""), "k3": ("high", FRIENDS), "k4": ("great", "1"), "k5": ("high", "nonsense")})
    _fill(p2, {"k0": ("High", "与朋友相处的一般问题"), "k1": ("middle", WORK), "k2": ("high", "1"),
               "k3": ("middle", FRIENDS)})
    a, err_a = read_annotator_sheet(p1)
    b, _ = read_annotator_sheet(p2)
    assert resolve_leaf("28") == FRIENDS and a["k0"] == Vote("high", FRIENDS) and b["k0"] == Vote("high", FRIENDS)
    assert {(e.card_id, e.field) for e in err_a} == {("k4", "quality"), ("k5", "category_3")}
    assert "row" in str(err_a[0]) and "great" in str(err_a[0])
    out = apply_correction_rules([c.id for c in cards], a, b)
    st = {cid: d.status for cid, d in out.decisions.items()}
    assert st == {"k0": "accepted", "k1": "needs_review", "k2": "discarded", "k3": "needs_review",
                  "k4": "pending", "k5": "pending"}
    rpath = export_reviewer_sheet(out, cards, a, b, tmp_path / "rev.csv")
    rows = list(csv.DictReader(rpath.open(encoding="utf-8")))
    assert [(r["card_id"], r["needs"]) for r in rows] == [("k1", "category"), ("k3", "tier")]
    assert rows[0]["category_3_a"] == FRIENDS and rows[0]["category_3_b"] == WORK
    _fill(rpath, {"k1": ("", WORK), "k3": ("high", "")})
    r, err_r = read_reviewer_sheet(rpath)
    assert err_r == [] and r["k1"] == Vote(None, WORK) and r["k3"] == Vote("high", None)
    out = apply_correction_rules([c.id for c in cards], a, b, r)
    final = finalize_cards(cards, out)
    assert {(c.id, c.quality, c.category_3) for c in final} == {
        ("k0", "high", "General issues in getting along with friends"),
        ("k1", "middle", "Issues related to work and study performance"),
        ("k3", "high", "General issues in getting along with friends"),
    }
    assert all(c.category_1 and c.category_2 for c in final)
    # re-exporting keeps what the annotators filled and adds new cards only
    export_card_annotation_sheets(cards + _cards(8)[6:], tmp_path, ["ann1", "ann2"])
    a2, _ = read_annotator_sheet(p1)
    assert a2 == a and len(list(csv.DictReader(p1.open(encoding="utf-8")))) == 8


def test_reviewer_may_not_mark_invalid(tmp_path):
    p = tmp_path / "rev.csv"
    p.write_text("card_id,quality,category_3\nk1,invalid,\n", encoding="utf-8")
    r, errs = read_reviewer_sheet(p)
    assert r == {} or r["k1"].quality is None
    assert errs[0].field == "quality"
