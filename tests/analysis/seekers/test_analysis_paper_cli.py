"""The paper's remaining tables from the CLI: correlate (Tables 3, 13-15), text-metrics, and the
role-play evaluation workflow (Table 1, Figure 3)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis_testdata import dialogue_row, score_rows
from esc_eval.analysis.seekers.roleplay import ROLEPLAY_METRICS
from esc_eval.cli.app import app
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

runner = CliRunner()


def _invoke(args):
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture
def judged_run(make_run, tmp_path):
    """40 dialogues of 4 models; the judge follows the human scores closely on every dimension
    except humanoid, where it is noise."""
    rng = np.random.default_rng(0)
    dialogues, scores, human = [], [], []
    for i in range(40):
        model = f"m{i % 4}"
        did = f"d{i:03d}"
        dialogues.append(dialogue_row(did, model, card_id=f"c{i // 4}",
                                      seeker=[f"I worry about exam {i}.", "My parents push me.", "I can't sleep."]))
        truth = int(np.clip(round(i % 4 + rng.normal(0, 0.4)), 0, 4))
        judge = {d: truth for d in DIMENSION_NAMES}
        judge["humanoid"] = int(rng.integers(0, 5))
        scores += score_rows(did, model, judge)
        for ann in ("a1", "a2"):
            human += [{"dialogue_id": did, "annotator": ann, "dimension": d, "score": truth} for d in DIMENSION_NAMES]
    run = make_run("run", dialogues=dialogues, scores=scores)
    sheet = tmp_path / "annotate_all.csv"
    pd.DataFrame(human).to_csv(sheet, index=False)
    return run, sheet


def test_correlate_judge_vs_human_with_cis(judged_run, tmp_path):
    run, sheet = judged_run
    out = tmp_path / "corr"
    _invoke(["analysis", "correlate", run, "--human", sheet, "--n-boot", 200, "-o", out])
    rows = pd.DataFrame(json.loads((out / "correlations.json").read_text())["rows"])
    assert set(rows["level"]) == {"sample", "dataset"} and set(rows["method"]) == {"spearman", "pearson", "kendall"}
    s = rows[(rows["level"] == "sample") & (rows["method"] == "spearman")].set_index("human")
    assert s.loc["empathy", "r"] > 0.9 and s.loc["empathy", "n"] == 40
    assert s.loc["empathy", "ci_lo"] <= s.loc["empathy", "r"] <= s.loc["empathy", "ci_hi"]
    assert abs(s.loc["humanoid", "r"]) < 0.5 and s.loc["humanoid", "ci_lo"] < s.loc["empathy", "ci_lo"]
    d = rows[(rows["level"] == "dataset") & (rows["method"] == "pearson")].set_index("human")
    assert d.loc["fluency", "n"] == 4 and d.loc["fluency", "r"] > 0.9
    assert "| sample | ESC-Eval | empathy | spearman |" in (out / "correlations.md").read_text()


def test_text_metrics_and_correlating_them(judged_run, tmp_path):
    run, sheet = judged_run
    refs = tmp_path / "refs.json"
    # Card-keyed references: the test rows' assistant replies are "I hear you, tell me more (k)."
    refs.write_text(json.dumps({f"c{i}": ["I hear you, tell me more (0).", "Tell me about your parents.",
                                          "Sleep matters, tell me more."] for i in range(10)}))
    out = tmp_path / "tm"
    _invoke(["analysis", "text-metrics", run, "--references", refs, "-o", out])
    corpus = pd.DataFrame(json.loads((out / "text_metrics.json").read_text())["corpus"])
    assert sorted(corpus["target_model"]) == ["m0", "m1", "m2", "m3"] and (corpus["n"] == 30).all()
    assert ((corpus["bleu1"] > 0) & (corpus["bleu1"] < 100)).all() and (corpus["distinct1"] > 0).all()
    per = pd.read_csv(out / "text_metrics_per_dialogue.csv")
    assert len(per) == 40 and per["n_pairs"].eq(3).all()
    assert "| m0 | en | 30 |" in (out / "text_metrics.md").read_text()
    # Tables 13-15: text metrics against human scores.
    _invoke(["analysis", "correlate", run, "--human", sheet, "--metrics", out / "text_metrics_per_dialogue.csv",
             "--level", "sample", "--n-boot", 0, "-o", tmp_path / "c2"])
    rows = pd.DataFrame(json.loads((tmp_path / "c2" / "correlations.json").read_text())["rows"])
    assert {"bleu1", "rouge_l", "meteor"} <= set(rows["metric"]) and rows["ci_lo"].isna().all()


def test_text_metrics_without_matching_references(judged_run, tmp_path):
    run, _ = judged_run
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({"nope": ["x"]}))
    r = runner.invoke(app, ["analysis", "text-metrics", str(run), "--references", str(refs)])
    assert r.exit_code != 0


def test_roleplay_workflow_table1_and_figure3(make_run, tmp_path):
    dialogues = []
    for i in range(12):
        for role in ("esc-role", "gpt-4"):
            dialogues.append(dialogue_row(f"{role}-{i}", "target", card_id=f"c{i}", role_model=role,
                                          seeker=[f"{role} says I am sad {i}.", "Still sad.", "Thanks."]))
    run = make_run("rp", dialogues=dialogues)
    sheets = tmp_path / "sheets"
    _invoke(["analysis", "roleplay-export", run, "--role-a", "esc-role", "--role-b", "gpt-4", "-o", sheets])
    sheet = pd.read_csv(sheets / "roleplay_pairs.csv", dtype=str, keep_default_na=False)
    key = pd.read_csv(sheets / "roleplay_pairs_key.csv", dtype=str)
    assert len(sheet) == 12 and "gpt-4" not in " ".join(sheet.columns)
    assert set(key["role_1"]) == {"esc-role", "gpt-4"}  # the shown order is shuffled
    # The annotator: ESC-Role's dialogue is more human-like in 9 pairs, 3 ties; rates it 2 vs 1.
    for i, k in key.iterrows():
        esc = 1 if k["role_1"] == "esc-role" else 2
        sheet.loc[i, "more_human_like"] = "tie" if i < 3 else str(esc)
        for m in ROLEPLAY_METRICS:
            sheet.loc[i, f"d{esc}_{m}"] = "2"
            sheet.loc[i, f"d{3 - esc}_{m}"] = "1"
    filled = sheets / "annotator1.csv"
    sheet.to_csv(filled, index=False)
    out = tmp_path / "rp-out"
    _invoke(["analysis", "roleplay-import", filled, "--key", sheets / "roleplay_pairs_key.csv", "-o", out])
    data = json.loads((out / "roleplay.json").read_text())
    t1 = {r["role_model"]: r for r in data["table1"]}
    assert t1["esc-role"]["Average"] == 10.0 and t1["gpt-4"]["Average"] == 5.0 and t1["esc-role"]["n"] == 12
    w = {(r["agent"], r["opponent"]): r for r in data["win_rates"]}
    esc = w[("esc-role", "gpt-4")]
    assert esc["n"] == 12 and esc["win"] == pytest.approx(0.75) and esc["tie"] == pytest.approx(0.25)
    assert esc["win_lo"] < 0.75 < esc["win_hi"] and w[("gpt-4", "esc-role")]["loss"] == pytest.approx(0.75)
    assert (out / "figure3_win_rates.png").stat().st_size > 1000
    # A bad cell is named.
    sheet.loc[0, "more_human_like"] = "maybe"
    sheet.to_csv(filled, index=False)
    r = runner.invoke(app, ["analysis", "roleplay-import", str(filled), "--key", str(sheets / "roleplay_pairs_key.csv"),
                            "-o", str(out)])
    assert r.exit_code != 0
