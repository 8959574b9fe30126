"""The panel on run folders: `esc-eval analysis panel` writes the Markdown, the JSON and the panel's
rows (read back equal), bad input writes nothing, and the report gains the "panels" section right
after Table 2 when the scores hold several judges."""
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.panels.panel_runs import panel_of_runs
from esc_eval.sim.runs.runfolder import RunFolder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = tmp_path_factory.mktemp("panel") / "run"
    for seed, judge in enumerate(["j1", "j2", "j3"]):  # the same dialogues, three judges
        write_fake_run(path, 24, models=["m-a", "m-b"], seed=seed, judge=judge)
    RunFolder(path).update_manifest(
        scoring={"panel": {"rule": "mean", "judges": [{"judge": "j1", "weight": 2.0, "family": "qwen", "model": "q"},
                                                      {"judge": "j2", "weight": 1.0, "family": None, "model": "l"},
                                                      {"judge": "j3", "weight": 1.0, "family": None, "model": "e"}]}},
        families={"targets": {"m-a": "qwen", "m-b": None}, "judges": {"j1": "qwen"}})
    return path


def test_the_command_writes_the_panel_files(run, tmp_path):
    from esc_eval.cli.app import app

    res = CliRunner().invoke(app, ["analysis", "panel", str(run), "-o", str(tmp_path / "out"), "--rule", "majority",
                                   "--n-boot", "0", "--alpha-boot", "20"])
    assert res.exit_code == 0, res.output
    paths = json.loads(res.stdout)
    data = json.loads(open(paths["json"]).read())
    assert data["judge"] == "panel:majority" and [j["weight"] for j in data["judges"]] == [2.0, 1.0, 1.0]
    assert {(r["model"], r["judge"]) for r in data["self_preference"]} == {("m-a", "j1")}
    rows = pd.read_parquet(paths["panel_scores.parquet"])
    csv = pd.read_csv(paths["panel_scores.csv"])
    assert len(rows) == 24 * 7 and set(rows["judge"]) == {"panel:majority"}
    assert rows["score"].tolist() == csv["score"].tolist() and rows["score"].isin(range(5)).all()
    assert "Self-preference" in open(paths["markdown"]).read()


def test_bad_input_writes_nothing(run, tmp_path):
    out = tmp_path / "never"
    for kwargs in ({"weights": {"j2": -1.0}}, {"judges": ["j1", "j1"]}, {"judges": ["j1", "nobody"]}, {"judges": ["j1"]}):
        with pytest.raises(AnalysisInputError):
            panel_of_runs([run], out, n_boot=0, **kwargs)
    assert not out.exists()


def test_the_report_has_the_panels_section_after_table_2(run, tmp_path):
    from esc_eval.analysis.report.report import write_report

    paths = write_report([run], tmp_path / "report", n_boot=0)
    report = json.loads(paths["json"].read_text())
    ids = report["sections"]
    # order 270, after Table 2 and the self-preference of a judge of a target's family (260: the data has one)
    assert ids.index("leaderboard") + 2 == ids.index("self-preference") + 1 == ids.index("panels") < ids.index("by-category")
    assert report["panels"]["judge"] == "panel:mean" and [j["judge"] for j in report["panels"]["judges"]] == ["j1", "j2", "j3"]
    assert "## Judge panel" in paths["markdown"].read_text()
