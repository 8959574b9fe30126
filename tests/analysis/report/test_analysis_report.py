import json
import re
import shutil
import subprocess

import pandas as pd
import pytest

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.report.report import write_report

from analysis_testdata import T0, dialogue_row, score_rows


def build_run(make_run, name="run"):
    d, s = [], []
    for m, base in (("model-a", 3), ("model-b", 1)):
        for c in range(4):
            did = f"{m}-{c}"
            d.append(dialogue_row(did, m, card_id=f"card{c}", minutes=c,
                                  categories=(["Work", "Family"][c % 2], f"sub{c % 2}", "leaf")))
            s += score_rows(did, m, [base, base + (c % 2), base, None if c == 0 else base, base, base, base], minutes=c)
    d.append(dialogue_row("solo-0", "model-solo", card_id="card0"))
    s += score_rows("solo-0", "model-solo", [4] * 7)
    d.append(dialogue_row("failed-0", "model-b", card_id="card7", status="failed"))
    d.append(dialogue_row("breaker", "model-a", card_id="card5",
                          seeker=["I'm sad.", "As an AI language model, I can't feel that.", "Okay."]))
    events = [{"kind": "simulation_start", "at": T0.isoformat(), "todo": 11},
              {"kind": "simulation_end", "at": (T0 + pd.Timedelta(minutes=5)).isoformat(), "items": 11}]
    return make_run(name, dialogues=d, scores=s, events=events,
                    manifest={"run_id": "test-run", "simulation": {"last": {"items": 11, "failed": 1, "tokens": 999,
                                                                           "elapsed_s": 300.0, "items_per_s": 0.04,
                                                                           "tokens_per_s": 3.3}}})


def test_report_files_tables_and_in_place_notices(make_run, tmp_path):
    run = build_run(make_run)
    paths = write_report([run], n_boot=200, n_resamples=500)
    assert paths["html"] == run / "report" / "report.html"
    for key in ("markdown", "leaderboard_md", "leaderboard_csv", "figure:radar", "figure:bars",
                "figure:distributions", "figure:card_categories", "figure:throughput"):
        assert paths[key].exists() and paths[key].stat().st_size > 0, key
    html = paths["html"].read_text()
    # self-contained: every image is a data URI, no external src/href
    imgs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(imgs) == 5 and all(src.startswith("data:image/png;base64,") for src in imgs)
    assert not re.search(r'(src|href)="(http|file|/)', html)
    assert 'id="leaderboard"' in html and "model-solo" in html
    assert "no confidence interval" in html  # the single-dialogue model, in place
    assert "1 of 5 dialogues failed" in html
    assert "As an AI language model" in html  # character-break excerpt
    md = paths["markdown"].read_text()
    assert "![Radar of the seven dimensions per model](figures/radar.png)" in md
    assert "| model-a | en |" in md.replace("| test-run", "")
    lb = pd.read_csv(paths["leaderboard_csv"])
    a = lb.set_index("model").loc["model-a"]
    assert a["Fluency"] == 75.0 and a["Information"] == 75.0  # the unparsed score is left out, not a 0
    notices = json.loads((run / "report" / "report.json").read_text())["notices"]
    assert any("parse" in n["text"] for n in notices)


def test_report_without_scores_says_so_instead_of_failing(make_run, tmp_path):
    run = make_run("noscores", dialogues=[dialogue_row("d1", "m"), dialogue_row("d2", "m", card_id="c2")])
    paths = write_report([run], out_dir=tmp_path / "out", n_boot=50)
    html = paths["html"].read_text()
    assert "no scores yet" in html and "the leaderboard is empty" in html
    assert "figure:radar" not in paths and "not drawn" in html
    assert paths["markdown"].read_text().count("## ") >= 8


def test_report_on_mixed_judges_and_two_runs(make_run):
    r1 = make_run("r1", dialogues=[dialogue_row("d1", "m"), dialogue_row("d2", "m", card_id="c2")],
                  scores=score_rows("d1", "m", [4] * 7, judge="j1") + score_rows("d2", "m", [3] * 7, judge="j1"))
    r2 = make_run("r2", scores=score_rows("d1", "m", [0] * 7, judge="j2", run_id="r2")
                  + score_rows("d2", "m", [1] * 7, judge="j2", run_id="r2"))
    paths = write_report([r1, r2], n_boot=50)
    html = paths["html"].read_text()
    assert "Scores come from 2 judges (j1, j2)" in html
    assert f"{r2}: no dialogue rows." in html
    lb = pd.read_csv(paths["leaderboard_csv"])
    assert sorted(lb["Average"]) == [12.5, 87.5]


def test_report_needs_a_run(tmp_path):
    with pytest.raises(AnalysisInputError):
        write_report([])
    with pytest.raises(AnalysisInputError, match="does not exist"):
        write_report([tmp_path / "missing"])


def test_analysis_commands_through_the_root_cli(make_run, tmp_path):
    from typer.testing import CliRunner

    from esc_eval.cli.app import app

    run = build_run(make_run, "clirun")
    runner = CliRunner()
    res = runner.invoke(app, ["leaderboard", str(run), "--n-boot", "20"])
    assert res.exit_code == 0, res.output
    assert "| model-a |" in res.output.replace("| en | unassigned ", "| ").replace("| en | open ", "| ") or "model-a" in res.output
    res = runner.invoke(app, ["analysis", "compare-models", str(run), "--a", "model-a", "--b", "model-b", "--n-resamples", "200"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n_pairs"] == 4 and not res.stderr
    # the old name, for one release: the same command, saying its new name on stderr
    res = runner.invoke(app, ["analysis", "compare", str(run), "--a", "model-a", "--b", "model-b", "--n-resamples", "200"])
    assert res.exit_code == 0 and json.loads(res.stdout)["n_pairs"] == 4
    assert "`esc-eval analysis compare` is now `esc-eval analysis compare-models`" in res.stderr
    res = runner.invoke(app, ["annotate", "sheets", str(run), "--out", str(tmp_path / "sheets"), "--annotators", "2"])
    assert res.exit_code == 0 and (tmp_path / "sheets" / "annotate_a2.csv").exists()
    res = runner.invoke(app, ["analysis", "roleplay-fidelity", str(run)])
    assert res.exit_code == 0 and json.loads(res.output)[0]["break_rate"] > 0


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.beside
@pytest.mark.light  # no engine, no Ray: starts while the heavy tests run (tests/slow_apart.py)
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install chromium)")
def test_report_renders_in_headless_chromium(make_run, tmp_path):
    run = build_run(make_run, "browser")
    html = write_report([run], n_boot=100, n_resamples=200)["html"]
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000"]
    shot = tmp_path / "report.png"
    subprocess.run([_chromium(), *flags, f"--screenshot={shot}", html.as_uri()], check=True, timeout=120,
                   capture_output=True)
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    dom = subprocess.run([_chromium(), *flags, "--dump-dom", html.as_uri()], check=True, timeout=120,
                         capture_output=True, text=True).stdout
    assert dom.count("<table") >= 6 and 'id="leaderboard"' in dom
    assert len(re.findall(r"<img [^>]*src=\"data:image/png;base64,", dom)) == 5
    assert "model-solo" in dom and "no confidence interval" in dom
