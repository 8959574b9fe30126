"""esc-eval compare: two runs paired by dialogue (two judges) or by card and seed (two models)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from analysis_testdata import dialogue_row, score_rows
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.compare.runs import compare_runs, comparison_markdown
from esc_eval.cli.app import app

CARDS = [f"c{i}" for i in range(12)]


def _run(make_run, name, model, judge, level, empathy_shift=0, cards=CARDS, dialogues=True, prefix=None):
    ds, ss = [], []
    for i, card in enumerate(cards):
        did = f"{prefix or model}-{card}"
        ds.append(dialogue_row(did, model, card_id=card, run_id=name))
        vals = [min(4, max(0, level + (i % 3) - 1))] * 7
        vals[2] = min(4, max(0, vals[2] + empathy_shift))
        ss += score_rows(did, model, vals, judge=judge, run_id=name)
    return make_run(name, dialogues=ds if dialogues else None, scores=ss)


def _dim(result, dim):
    return next(r for r in result["dimensions"] if r["dimension"] == dim)


def test_two_judges_on_the_same_dialogues(make_run):
    a = _run(make_run, "judge1", "m1", "judge-1", 2)
    # The same dialogue ids, scored by another judge that gives one point more on empathy only.
    b = _run(make_run, "judge2", "m1", "judge-2", 2, empathy_shift=1)
    res = compare_runs(a, b, n_resamples=999)
    assert res["pair_by"] == "dialogue" and res["judges_b"] == ["judge-2"]
    emp, flu = _dim(res, "empathy"), _dim(res, "fluency")
    assert emp["n_pairs"] == 12 and emp["diff"] > 15 and emp["ci_lo"] > 0 and emp["p_holm"] < 0.05
    assert flu["diff"] == 0 and flu["p_value"] == 1.0
    assert _dim(res, "average")["diff"] == pytest.approx(emp["diff"] / 7)
    # Holm: adjusted p-values are never below the raw ones.
    assert all(r["p_holm"] >= r["p_value"] for r in res["dimensions"])


def test_two_models_on_the_same_cards(make_run):
    a = _run(make_run, "base", "base-model", "judge", 1)
    b = _run(make_run, "tuned", "tuned-model", "judge", 3, cards=CARDS[:10])
    res = compare_runs(a, b, n_resamples=999, top=3)
    assert res["pair_by"] == "card" and res["pair_keys"] == ["language", "card_id", "seed"]
    avg = _dim(res, "average")
    assert avg["n_pairs"] == 10 and avg["diff"] > 30 and avg["p_holm"] < 0.05
    assert avg["mean_b"] > avg["mean_a"] and avg["diff"] == pytest.approx(avg["mean_b"] - avg["mean_a"])
    assert len(res["cards_moved"]) == 3 and all(c["diff"] > 0 for c in res["cards_moved"])
    md = comparison_markdown(res)
    assert "| Empathy | 10 |" in md and "Cards that moved most" in md
    # Forcing dialogue pairing finds no shared dialogues: no test, NaN numbers, a note.
    none = compare_runs(a, b, pair_by="dialogue", n_resamples=99)
    assert _dim(none, "average")["n_pairs"] == 0 and "no paired test" in _dim(none, "average")["note"]


def test_several_models_need_a_choice(make_run):
    a = make_run("a", dialogues=[dialogue_row("x1", "m1", card_id="c1"), dialogue_row("x2", "m2", card_id="c1")],
                 scores=score_rows("x1", "m1", [2] * 7) + score_rows("x2", "m2", [3] * 7))
    b = _run(make_run, "b", "m3", "judge-a", 2, cards=["c1"])
    with pytest.raises(AnalysisInputError, match="--model-a"):
        compare_runs(a, b, n_resamples=99)
    res = compare_runs(a, b, model_a="m2", n_resamples=99)
    assert res["models_a"] == ["m2"] and _dim(res, "average")["n_pairs"] == 1
    with pytest.raises(AnalysisInputError, match="no scores for --model-a"):
        compare_runs(a, b, model_a="nope")


def test_compare_cli_writes_markdown_and_json(make_run, tmp_path):
    a = _run(make_run, "base", "base-model", "judge", 1)
    b = _run(make_run, "tuned", "tuned-model", "judge", 3)
    out = tmp_path / "cmp"
    r = CliRunner().invoke(app, ["compare", str(a), str(b), "-o", str(out), "--n-resamples", "199"])
    assert r.exit_code == 0, r.output
    data = json.loads((out / "compare.json").read_text())
    assert data["pair_by"] == "card" and _dim(data, "overall")["diff"] > 0
    assert "| Overall |" in (out / "compare.md").read_text()
    default = CliRunner().invoke(app, ["compare", str(a), str(b), "--n-resamples", "99"])
    assert default.exit_code == 0 and (b / "report" / "compare-base" / "compare.md").exists()
