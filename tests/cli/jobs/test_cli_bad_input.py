"""CLI behaviour on bad input: one clear line, non-zero exit, no traceback, nothing lost."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def cli(*args, cwd=REPO):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def assert_one_line_error(proc, *needles):
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert "Traceback" not in err, err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]


def test_cards_validate_ok_and_counts():
    proc = cli("cards", "validate", str(REPO / "sim/data/sample_cards.json"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["cards"] >= 24


def test_malformed_card_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("[{")
    assert_one_line_error(cli("cards", "validate", str(p)), str(p), "malformed")


def test_card_without_problem(tmp_path):
    p = tmp_path / "cards.json"
    p.write_text(json.dumps([{"id": "a", "language": "en", "problem": ""}]))
    assert_one_line_error(cli("simulate", "--cards", str(p), "--out", str(tmp_path / "r")), str(p), "problem")


def test_missing_card_file(tmp_path):
    assert_one_line_error(cli("cards", "validate", str(tmp_path / "none.json")), "not found")


def test_unknown_model_fails_before_starting_anything(tmp_path):
    proc = cli("simulate", "--target", "no-such-model", "--out", str(tmp_path / "r"))
    assert_one_line_error(proc, "no-such-model")
    assert not (tmp_path / "r" / "dialogues").exists()


def test_bad_config_field_is_named(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rounds: -1\n")
    assert_one_line_error(cli("simulate", "--config", str(p)), str(p), "rounds")
    p.write_text("execution: {workerz: 2}\n")
    assert_one_line_error(cli("simulate", "--config", str(p)), "execution.workerz")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere; permissions cannot be tested")
def test_unwritable_output(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    assert_one_line_error(cli("simulate", "--target", "fake/echo", "--role", "fake/seeker", "--out", str(ro / "x")), "not writable")


def test_unwritable_output_file_in_the_way(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_one_line_error(cli("simulate", "--target", "fake/echo", "--out", str(blocker / "run")), "not writable")


def test_existing_run_is_not_corrupted_by_a_failing_rerun(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("limit: 2\nrole: {model: fake/seeker}\ntargets: [{model: fake/echo}]\nexecution: {executor: local}\n")
    out = tmp_path / "run"
    assert cli("simulate", "--config", str(cfg), "--out", str(out)).returncode == 0
    before = sorted(p.read_bytes() for p in (out / "dialogues").glob("*.parquet"))
    bad = cli("simulate", "--config", str(cfg), "--out", str(out), "--target", "no-such-model")
    assert bad.returncode != 0
    assert sorted(p.read_bytes() for p in (out / "dialogues").glob("*.parquet")) == before


def test_registry_judge_without_local_adapters_says_how_to_give_them(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("limit: 1\nrole: {model: fake/seeker}\ntargets: [{model: fake/echo}]\nexecution: {executor: local}\n")
    assert cli("simulate", "--config", str(cfg), "--out", str(tmp_path / "run")).returncode == 0
    proc = cli("score", "--input", str(tmp_path / "run"), "--judge", "esc-rank")
    assert_one_line_error(proc, "esc-rank", "ESC_EVAL_MODEL_PATHS")
    assert not (tmp_path / "run" / "scores").exists()
