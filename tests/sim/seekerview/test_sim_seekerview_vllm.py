"""The person's own view on the real stack: the embedded SmolLM2 on the vLLM-CPU engine (the session's,
executor local) rating its own dialogue as the seeker, and reading FailedESConv's rated dialogues as
their seekers beside its seven scores; then the check through the CLI in a process of its own."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from esc_eval.analysis.seekers.esconv import read_human_seekers
from esc_eval.analysis.seekerview import seeker_view
from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.launch.seeker_check import SeekerCheckConfig, run_seeker_check
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
LOCAL = ExecutionConfig(executor="local")


def _shortest_rated(shared_data, n: int) -> list[dict]:
    d = read_human_seekers(shared_data / "esconv" / "FailedESConv.json").dialogues
    d = d[d["empathy"].notna() & d["final_intensity"].notna()]
    d = d.loc[d["turns"].map(lambda t: sum(len(x["text"]) for x in t)).sort_values(kind="stable").index[:n]]
    return [{"dialogue_id": r["dialogue_id"], "language": r["language"], "turns": r["turns"],
             "ratings": {"empathy": r["empathy"], "relevance": r["relevance"], "intensity_before": r["initial_intensity"],
                         "intensity_after": r["final_intensity"]}} for _, r in d.iterrows()]


def test_the_embedded_seeker_rates_its_dialogue_and_reads_peoples(embedded_model, shared_data, tmp_path):
    run = tmp_path / "run"
    short = GenerationParams(max_tokens=16)
    sim = run_simulation(SimulationConfig(cards="sample", languages=["en"], limit=1, rounds=1, seeker_ratings=True,
                                          role=ModelRef(params=short), targets=[ModelRef(params=short)], execution=LOCAL), run)
    assert sim["failed"] == 0 and sim["seeker_ratings"]["method"] == "logprob"
    rows = list(RunFolder(run, create=False).iter_rows("seeker_ratings"))
    assert sorted(r["item"] for r in rows) == ["empathy", "intensity_after", "intensity_before", "relevance"]
    for r in rows:  # P(1..5) read at the constrained answer: always a rating, never a made-up one
        assert r["parse_status"] == "ok" and r["rating"] in range(1, 6) and math.isclose(sum(r["probs"]), 1, rel_tol=1e-5)
        assert r["rater"] == "vllm/embedded:seeker" and 1 <= r["expected"] <= 5
    people = _shortest_rated(shared_data, 6)
    check = tmp_path / "check"
    result = run_seeker_check(SeekerCheckConfig(execution=LOCAL), people, check)
    assert result["seeker_ratings"]["failed"] == 0 and result["scoring"]["items"] == 6
    view = seeker_view([check], n_boot=200)
    assert view["reference"] == "people"
    agreement = view["agreement"]
    assert len(agreement) == 5 + 7 * 3 and set(agreement["n"]) <= {6}
    again = run_seeker_check(SeekerCheckConfig(execution=LOCAL), people, check)
    assert again["seeker_ratings"]["items"] == 0 and again["scoring"]["items"] == 0


def test_the_check_through_the_cli_in_its_own_process(shared_data, tmp_path):
    """`esc-eval analysis seeker-check` with the embedded model as the judge, in a process of its own (its
    own engine, no Ray): the first two rated dialogues of FailedESConv, the tables, and a resume."""
    local = tmp_path / "local.yaml"
    local.write_text("execution: {executor: local}\n")
    out = tmp_path / "check"
    args = [sys.executable, "-m", "esc_eval.cli", "analysis", "seeker-check", "--humans",
            str(shared_data / "esconv" / "FailedESConv.json"), "-j", "vllm/embedded", "-c", str(local), "--limit", "2",
            "--no-score", "--n-boot", "100", "-o", str(out)]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| vllm/embedded:as-seeker | as the seeker | Empathy | Empathy | 2 |" in proc.stdout
    data = json.loads((out / "report" / "seeker_view.json").read_text())
    assert data["reference"] == "people" and len(data["agreement"]) == 5
    rows = list(RunFolder(out, create=False).iter_rows("seeker_ratings"))
    assert len([r for r in rows if r["rater"] == "vllm/embedded:as-seeker" and r["parse_status"] == "ok"]) == 8
    bad = subprocess.run(args[:-2] + ["--limit", "0", "-o", str(tmp_path / "bad")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--limit 0" in bad.stderr and not (tmp_path / "bad").exists()
