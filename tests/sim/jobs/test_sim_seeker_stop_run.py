"""Long dialogues the seeker may end (issue: long and hard conversations), through run_simulation on
the fake backends: 30 rounds, the row recording who ended each dialogue and at which round, a resume
that changes the setting refused, the report's count per target, and the CLI's bad rounds."""
from __future__ import annotations

import pytest

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.jobs.fingerprint import StaleRunError
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder


def config(seeker: str, seeker_stop: bool, targets=("fake/echo",)) -> SimulationConfig:
    return SimulationConfig(cards="sample", languages=["en"], limit=2, rounds=30, seeker_stop=seeker_stop,
                            role=ModelRef(model=seeker), targets=[ModelRef(model=t) for t in targets],
                            execution=ExecutionConfig(executor="local"))


def rows(run):
    return list(RunFolder(run, create=False).iter_rows("dialogues"))


def test_the_row_says_who_ended_the_dialogue_and_at_which_round(tmp_path):
    run_simulation(config("fake/seeker?ends=4&end=gave_up", True), tmp_path / "stop")
    ended = rows(tmp_path / "stop")
    assert len(ended) == 2
    for r in ended:
        assert r["status"] == "ok" and r["termination_reason"] == "seeker_ended"
        assert r["end_reason"] == "gave_up" and r["end_round"] == 4 and r["n_turns"] == 1 + 2 * 3 + 1
        assert r["turns"][-1]["speaker"] == "seeker" and "<END" not in r["turns"][-1]["text"]
    # the same seeker without the setting: never told of the mark, so it talks to the cap
    run_simulation(config("fake/seeker?ends=4&end=gave_up", False), tmp_path / "cap")
    capped = rows(tmp_path / "cap")
    assert {(r["termination_reason"], r["end_reason"], r["end_round"], r["n_turns"]) for r in capped} == {
        ("completed", "still_going", 30, 61)}


def test_turning_the_setting_on_for_a_folder_made_without_it_is_refused(tmp_path):
    run_simulation(config("fake/seeker", False), tmp_path / "run")
    with pytest.raises(StaleRunError, match="'seeker_stop' differs"):
        run_simulation(config("fake/seeker", True), tmp_path / "run")
    run_simulation(config("fake/seeker", True), tmp_path / "on")
    with pytest.raises(StaleRunError, match="'seeker_stop' differs"):  # and off again
        run_simulation(config("fake/seeker", False), tmp_path / "on")


def test_the_report_counts_the_endings_per_target(tmp_path):
    from esc_eval.analysis.results.loaders import load_dialogues
    from esc_eval.analysis.seekers.endings import ending_counts, endings_section

    run_simulation(config("fake/seeker?ends=2", True, targets=("fake/echo", "fake/fixed?reply=I+hear+you.")), tmp_path / "run")
    counts = ending_counts(load_dialogues([tmp_path / "run"])).set_index("target_model")
    assert list(counts.index) == ["fake/echo", "fake/fixed?reply=I+hear+you."]
    assert counts["resolved"].tolist() == [2, 2] and counts["gave_up"].tolist() == [0, 0]
    assert counts["still_going"].tolist() == [0, 0] and counts["median_end_round"].tolist() == [2.0, 2.0]
    section = endings_section(load_dialogues([tmp_path / "run"]))
    assert section["data"]["counts"][0]["resolved_share"] == 1.0


def test_rounds_outside_1_to_50_are_one_line_and_nothing_is_written(tmp_path):
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "simulate", "--target", "fake/echo", "--role", "fake/seeker",
                           "--rounds", "51", "--out", str(tmp_path / "r")], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and "rounds" in lines[0] and "50" in lines[0], proc.stderr
    assert not (tmp_path / "r").exists()


def test_the_section_is_in_a_report_of_a_run_made_with_the_setting_only(tmp_path):
    from types import SimpleNamespace

    import pandas as pd

    from esc_eval.analysis.results.loaders import load_dialogues
    from esc_eval.analysis.results.section_registry import registered_sections
    from esc_eval.analysis.seekers.endings import has_endings

    assert "endings" in [s.id for s in registered_sections()]
    for on in (True, False):
        run = tmp_path / str(on)
        run_simulation(config("fake/seeker", on), run)  # never ends: every dialogue still going at the cap
        ctx = SimpleNamespace(manifests={str(run): RunFolder(run, create=False).read_manifest()},
                              dialogues=load_dialogues([run]))
        assert has_endings(ctx) is on
    assert not has_endings(SimpleNamespace(manifests={}, dialogues=pd.DataFrame()))


def test_a_dialogue_that_outgrows_its_targets_context_is_a_row_that_says_so_not_an_error(tmp_path):
    run_simulation(config("fake/seeker", False, targets=("fake/echo?context=200",)), tmp_path / "run")
    for r in rows(tmp_path / "run"):
        assert r["status"] == "ok" and r["error"] is None
        assert r["termination_reason"] == "context_full" and r["end_reason"] == "context_full"
        assert 1 <= r["end_round"] < 30 and r["end_round"] == r["n_turns"] // 2


def test_past_5_rounds_the_seeker_may_end_by_default_and_5_round_runs_are_unchanged(tmp_path):
    from esc_eval.sim.jobs.fingerprint import fingerprint, simulation_inputs

    def default(rounds: int, **kw) -> SimulationConfig:
        return SimulationConfig(cards="sample", languages=["en"], limit=2, rounds=rounds, role=ModelRef(model="fake/seeker"),
                                targets=[ModelRef(model="fake/echo")], execution=ExecutionConfig(executor="local"), **kw)

    paper, explicit_off = default(5), default(5, seeker_stop=False)
    assert paper.seeker_stop is False and "seeker_stop" not in paper.model_fields_set
    # the paper's 5-round runs: the same fingerprint as before the default (no seeker_stop field), on or off
    assert fingerprint(simulation_inputs(paper, {})) == fingerprint(simulation_inputs(explicit_off, {}))
    assert "seeker_stop" not in fingerprint(simulation_inputs(paper, {}))
    assert default(6).seeker_stop is True and default(30, seeker_stop=False).seeker_stop is False
    assert default(3, seeker_stop=True).seeker_stop is True
    assert fingerprint(simulation_inputs(default(30), {}))["seeker_stop"] == "true"
    # a long folder made with the setting off resumes only when it is said again
    run_simulation(default(8, seeker_stop=False), tmp_path / "long")
    with pytest.raises(StaleRunError, match="'seeker_stop' differs"):
        run_simulation(default(8), tmp_path / "long")
    assert run_simulation(default(8, seeker_stop=False), tmp_path / "long")["items"] == 0
    # a 5-round folder resumes with the default as it did
    run_simulation(paper, tmp_path / "paper")
    assert run_simulation(default(5), tmp_path / "paper")["items"] == 0
