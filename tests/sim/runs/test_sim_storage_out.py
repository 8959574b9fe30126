"""`-o` and storage URIs, command by command: a command that writes a run folder takes an s3:// one
(judge-agreement on a real S3-protocol server), a command that writes local files refuses a URI in
one line instead of making a folder named `s3:`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from esc_eval.sim.runs.runfolder import RunFolder

REPO = Path(__file__).resolve().parents[3]


def cli(*args, cwd, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "RAY_AUTH_MODE": "disabled", **(env or {})})


def test_judge_agreement_writes_its_scores_to_object_storage(shared_data, s3_uri, s3_server, tmp_path):
    release = shared_data / "esc-eval"
    cfg = tmp_path / "score.yaml"
    cfg.write_text("execution: {executor: local}\njudge: {method: generate}\n")
    proc = cli("analysis", "judge-agreement", "--dialogues", str(release / "dialogues"), "--scores",
               str(release / "scores"), "--judge", "fake/judge?score=3", "--config", str(cfg), "-o", s3_uri,
               "--n-boot", "0", cwd=tmp_path, env=s3_server["env"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["run_dir"] == s3_uri and not (tmp_path / "s3:").exists()
    scores = RunFolder(s3_uri, create=False).read("scores").to_pylist()
    assert len(scores) == 12 * 7 and {s["score"] for s in scores} == {3}


@pytest.mark.parametrize("args", [
    ("cards", "stats", "sample", "--out", "s3://bucket/stats"),
    ("bench", "annotate", "-o", "gs://bucket/bench.json"),
    ("serve", "write-config", "-o", "s3://bucket/serve.yaml"),
])
def test_a_command_that_writes_local_files_refuses_a_uri_in_one_line(args, tmp_path):
    proc = cli(*args, cwd=tmp_path)
    uri = next(a for a in args if "://" in a)
    assert proc.returncode == 1 and proc.stdout == ""  # the CLI's bad-input exit (cli/app.py)
    assert proc.stderr.strip() == f"error: {uri}: this command writes local files only; give a local path (simulate, " \
                                  "score, demo, report, compare and the analysis reports take storage URIs)"
    assert list(tmp_path.iterdir()) == []  # nothing written, no folder named after the scheme
