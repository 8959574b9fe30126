"""`esc-eval analysis pairwise-ratings` (files, one-line errors with nothing written), the report's section
where the runs hold verdicts, and `esc-eval bench pairwise` on a small scale."""
import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from esc_eval.analysis.bench.pairwise import bench_pairwise
from esc_eval.analysis.pairwise.fake_verdicts import fake_verdict_frame, write_fake_verdicts
from esc_eval.analysis.pairwise.pairwise_analysis import analyse_pairwise
from esc_eval.analysis.report.report import write_report
from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.cli.app import app

MODELS = ["model-a", "model-b", "model-c"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    path = write_fake_run(tmp_path_factory.mktemp("pairwise") / "run", 15 * len(MODELS), MODELS)
    write_fake_verdicts(path, 15, MODELS, [-1.0, 0.0, 1.0], tie_rate=0.1, seed=2)
    return path


def _invoke(*args):
    return CliRunner().invoke(app, ["analysis", "pairwise-ratings", *map(str, args)])


def test_the_command_writes_markdown_json_and_csv(run, tmp_path):
    res = _invoke(run, "--n-boot", "50", "--dimension", "empathy", "--dimension", "fluency", "-o", tmp_path / "out")
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "out" / "pairwise.json").read_text())
    assert {r["dimension"] for r in data["ratings"]} == {"empathy", "fluency", "pooled"}
    assert data["n_boot"] == 50 and "counts as a tie" in data["ties"]
    csv = pd.read_csv(tmp_path / "out" / "pairwise_ratings.csv")
    pooled = csv[csv["dimension"] == "pooled"].set_index("model")
    assert pooled.loc["model-c", "rank"] == 1 and pooled.loc["model-a", "rank"] == 3
    assert pooled["elo"].mean() == pytest.approx(1000.0)
    md = (tmp_path / "out" / "pairwise.md").read_text()
    assert "## Position bias" in md and "Kendall's tau" in md


@pytest.mark.parametrize("args, message", [
    (["--judge", "nobody"], "judge 'nobody' has no pairwise rows"),
    (["--dimension", "charm"], "dimension(s) ['charm'] have no pairwise rows"),
])
def test_bad_input_is_one_line_and_writes_nothing(run, tmp_path, args, message):
    res = _invoke(run, *args, "-o", tmp_path / "out")
    assert res.exit_code != 0
    assert message in (res.output + str(res.exception))
    assert not (tmp_path / "out").exists()


def test_no_rows_and_one_target_are_refused(tmp_path):
    plain = write_fake_run(tmp_path / "plain", 6, MODELS)
    res = _invoke(plain, "-o", tmp_path / "out")
    assert res.exit_code != 0 and "no pairwise verdict rows" in (res.output + str(res.exception))
    rows = fake_verdict_frame(2, ["x", "y"]).assign(model_b="x")  # a target against itself only
    with pytest.raises(AnalysisInputError, match="name 1 target"):
        analyse_pairwise(rows)


def test_the_report_has_the_section_after_the_leaderboard(run, tmp_path):
    paths = write_report([run], tmp_path / "report", n_boot=20)
    report = json.loads(paths["json"].read_text())
    ids = report["sections"]
    assert ids.index("pairwise") == ids.index("leaderboard") + 1
    assert {r["model"] for r in report["pairwise"]["ratings"]} == set(MODELS)
    assert report["pairwise"]["tau"][0]["tau"] == pytest.approx(1.0)  # both rankings a < b < c
    assert "figure:pairwise_fake_judge" in paths
    assert "Pairwise ratings" in paths["markdown"].read_text()


def test_the_bench_times_the_steps_and_recovers_the_order(tmp_path):
    out = bench_pairwise(cards=12, targets=5, n_boot=30)
    assert out["verdict_rows"] == 12 * 10 * 7 * 2 and out["pairs_per_card"] == 10
    assert out["tau_with_true_strengths"] == pytest.approx(1.0)
    assert set(out["seconds"]) >= {"load_pairwise", "combine_orders", "position_bias", "bootstrap_bradley_terry"}
