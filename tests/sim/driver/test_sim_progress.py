"""Progress when the output is not a terminal: plain lines with done/total, tok/s and ETA, at least
every interval even while nothing finishes."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from esc_eval.sim.driver.progress import progress_line

LINE = re.compile(r"^simulate: (\d+)/(\d+) dialogues(?: \| (\d+) calls)? \| [\d.]+ dialogues/s \| (\d+) tok/s \| "
                  r"ETA (\S+) \| elapsed (\d+)m(\d+)s \| failed (\d+)$")


def test_progress_line_fields():
    assert progress_line("score", "dialogues", 2, 8, 3000, 1, 60.0) == (
        "score: 2/8 dialogues | 0.033 dialogues/s | 50 tok/s | ETA 3m00s | elapsed 1m00s | failed 1")
    assert "ETA ?" in progress_line("simulate", "dialogues", 0, 8, 0, 0, 12.0)
    assert "ETA 0m00s" in progress_line("simulate", "dialogues", 8, 8, 100, 0, 12.0)
    # nothing finished yet, but 20 of the 80 calls answered in 30 s: 90 s to go
    assert progress_line("simulate", "dialogues", 0, 8, 600, 0, 30.0, calls=20, calls_per_item=10) == (
        "simulate: 0/8 dialogues | 20 calls | 0.000 dialogues/s | 20 tok/s | ETA 1m30s | elapsed 0m30s | failed 0")


def test_piped_simulate_prints_progress_lines(tmp_path):
    cfg = {"cards": "sample", "languages": ["en"], "limit": 3,
           "role": {"model": "fake/seeker?latency=0.12"}, "targets": [{"model": "fake/echo?latency=0.12"}],
           "execution": {"executor": "local", "concurrency": 1}}
    (tmp_path / "sim.yaml").write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "ESC_EVAL_PROGRESS_INTERVAL": "0.4", "ESC_EVAL_LIVE_PROGRESS_S": "0.2", "COLUMNS": "200"}
    exe = Path(sys.executable).with_name("esc-eval")
    proc = subprocess.run([str(exe), "simulate", "-c", str(tmp_path / "sim.yaml"), "-o", str(tmp_path / "run")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [m for m in (LINE.match(x.strip()) for x in proc.stderr.splitlines()) if m]
    assert lines, proc.stderr[-2000:]
    done = [int(m.group(1)) for m in lines]
    assert {int(m.group(2)) for m in lines} == {3}
    assert done[0] == 0 and done[-1] == 3 and done == sorted(done)
    # the ticker writes while no dialogue finishes (each takes ~1.2 s here)
    assert len(done) > len(set(done)), proc.stderr[-2000:]
    elapsed = [int(m.group(6)) * 60 + int(m.group(7)) for m in lines]
    assert all(b - a <= 2 for a, b in zip(elapsed, elapsed[1:]))
    assert int(lines[-1].group(4)) > 0  # tokens/s once dialogues finished
    assert lines[-1].group(5) == "0m00s"
    # before the first dialogue finished: the calls answered so far, their tokens/s and an ETA
    early = [m for m in lines if m.group(1) == "0" and m.group(3)]
    assert early and int(early[-1].group(3)) > 0 and int(early[-1].group(4)) > 0 and early[-1].group(5) != "?", \
        proc.stderr[-2000:]
    assert "\x1b[" not in proc.stderr  # no terminal control codes in a log
