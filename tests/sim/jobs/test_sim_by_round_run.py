"""Scores by round end to end on the fake backends: simulate, `score --by-round` (prefixes cut and
scored by the judge like any dialogue, resumable), the leaderboard split by round, `analysis
rounds`, and the report's section."""
from __future__ import annotations

import json

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.launch.options import score_by_round_run
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder


def test_simulate_score_by_round_leaderboard_and_analysis(tmp_path):
    from esc_eval.analysis.report.from_runs import write_leaderboard_by_files
    from esc_eval.analysis.rounds.by_round import has_rounds, rounds_section, write_rounds
    from esc_eval.analysis.results.loaders import load_dialogues, load_scores

    local = ExecutionConfig(executor="local")
    run_simulation(SimulationConfig(cards="sample", languages=["en"], limit=3, rounds=4, role=ModelRef(model="fake/seeker"),
                                    targets=[ModelRef(model="fake/echo"), ModelRef(model="fake/fixed?reply=I+hear+you.")],
                                    execution=local), tmp_path / "run")
    cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake/judge")), execution=local)
    out = str(tmp_path / "rounds")
    result = score_by_round_run(cfg, str(tmp_path / "run"), out, every=1, say=lambda _: None)
    assert result["by_round"]["prefixes"] == 2 * 3 * 4 and result["dialogues"] == 24 and result["failed"] == 0
    scores = list(RunFolder(out, create=False).iter_rows("scores"))
    assert len(scores) == 24 * 7 and {s["dialogue_id"].rsplit("@r", 1)[1] for s in scores} == {"01", "02", "03", "04"}
    again = score_by_round_run(cfg, str(tmp_path / "run"), out, every=1, say=lambda _: None)
    assert again["by_round"]["written"] == 0 and again["skipped_done"] == 24  # nothing asked twice

    by = write_leaderboard_by_files([out], str(tmp_path / "lb"), "round", rule=lambda models: {}, n_boot=50)
    assert sorted(by.by) == ["01", "02", "03", "04"] and set(by.table["n_dialogues"]) == {3}
    paths, markdown = write_rounds([out], str(tmp_path / "an"), n_boot=50)
    assert "Score by round" in markdown and json.loads(json.dumps(paths))["csv"].endswith("rounds.csv")
    ctx_dialogues = load_dialogues([out])
    assert has_rounds(type("Ctx", (), {"dialogues": ctx_dialogues})())
    section = rounds_section(load_scores([out]), n_boot=50, seed=0)
    change = {r["target_model"]: r for r in section["data"]["change"]}
    assert set(change) == {"fake/echo", "fake/fixed?reply=I+hear+you."} and all(r["n_dialogues"] == 3 for r in change.values())
    assert all(r["verdict"] == "n/a" and r["rule"] == "prefix" for r in change.values())  # 3 cards: no verdict
    assert not has_rounds(type("Ctx", (), {"dialogues": load_dialogues([tmp_path / "run"])})())
