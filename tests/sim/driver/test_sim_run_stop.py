"""Failures of the run, not of an item (a model that cannot start, an engine dead for good): the job
stops before (or as soon as) they would fail every item, no failed row is written, what finished
stays and the same command resumes. On fake engines here (serve/backends/fake.py start_error, dies_after);
tests/sim/pool/test_sim_engine_start_slow.py does it with real vLLM engines."""
import json
import subprocess
import sys

import pytest
import yaml

from esc_eval.serve.chat.interface import EngineStartError, RunStopError
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder


def sim_cfg(role=None, targets=None, limit=6, **execution):
    ex = {"executor": "local", "concurrency": 2, "flush_rows": 1, "flush_seconds": 0.05, **execution}
    return SimulationConfig(cards="sample", limit=limit, role=role or ModelRef(model="fake/seeker"),
                            targets=targets or [ModelRef(model="fake/echo")], execution=ExecutionConfig(**ex))


def rows(path):
    return list(RunFolder(path, create=False).iter_rows("dialogues"))


def events(path, kind):
    return [e for e in json.loads((path / "manifest.json").read_text())["events"] if e["kind"] == kind]


def test_a_model_that_cannot_start_stops_the_job_before_any_dialogue(tmp_path):
    role = ModelRef(model="fake/seeker", options={"start_error": "CUDA out of memory"})
    with pytest.raises(EngineStartError) as e:
        run_simulation(sim_cfg(role=role), tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and "fake/seeker did not start: CUDA out of memory" in msg
    assert msg.endswith("no dialogue was run; run the same command again once that is fixed")
    assert rows(tmp_path) == []
    (ev,) = events(tmp_path, "simulation_stopped")
    assert "CUDA out of memory" in ev["error"] and ev["finished"] == 0


def test_an_engine_dead_for_good_mid_run_stops_resumably(tmp_path):
    """The target's engine dies for good after 12 calls (a dialogue makes 5 of them): the dialogues
    that finished keep their rows, none is written as failed, and the same command goes on from
    there (here each run's engine dies again after 12 calls: a few runs finish the job)."""
    dying = sim_cfg(targets=[ModelRef(model="fake/echo", options={"dies_after": 12})])
    with pytest.raises(RunStopError, match=r"fake/echo died .*; simulation stopped after \d+ dialogues? \(their rows "
                                           r"are in .*\); run the same command again to resume$"):
        run_simulation(dying, tmp_path)
    done = rows(tmp_path)
    assert 1 <= len(done) < 6 and all(r["status"] == "ok" for r in done)
    assert events(tmp_path, "simulation_stopped")[0]["finished"] == len(done)
    for _ in range(3):
        try:
            res = run_simulation(dying, tmp_path)  # the same command
            break
        except RunStopError:
            assert len(rows(tmp_path)) > len(done)  # each run gets further: turn checkpoints kept
            done = rows(tmp_path)
    assert res["failed"] == 0 and sorted(r["status"] for r in rows(tmp_path)) == ["ok"] * 6


def test_a_later_target_that_cannot_start_stops_the_job_after_the_first_targets_dialogues(tmp_path):
    targets = [ModelRef(model="fake/echo"), ModelRef(model="fake/fixed", options={"start_error": "no weights"})]
    with pytest.raises(EngineStartError, match="fake/fixed did not start: no weights"):
        run_simulation(sim_cfg(targets=targets, limit=2, concurrency=1), tmp_path)
    assert {r["target_model"] for r in rows(tmp_path)} == {"fake/echo"}  # its turn never came: no failed rows
    assert all(r["status"] == "ok" for r in rows(tmp_path))


def test_scoring_stops_when_the_judge_dies(tmp_path):
    run_simulation(sim_cfg(), tmp_path)
    judge = JudgeConfig(model=ModelRef(model="fake/judge", options={"dies_after": 14}))
    cfg = ScoringConfig(judge=judge, execution=ExecutionConfig(executor="local", concurrency=1, flush_rows=1,
                                                               flush_seconds=0.05))
    with pytest.raises(RunStopError, match="scoring stopped after 2 dialogues"):
        run_scoring(cfg, tmp_path)
    scores = list(RunFolder(tmp_path).iter_rows("scores"))
    assert len(scores) == 14 and all(s["error"] is None for s in scores)  # no error rows for the dead judge
    healthy = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake/judge")), execution=cfg.execution)
    assert run_scoring(healthy, tmp_path)["outcome"]["error_rows"] == 0


@pytest.mark.slow
def test_on_ray_the_setup_fails_with_the_cause_and_a_dead_engine_stops_every_worker(tmp_path, ray_local):
    """One local Ray (about 35 s): a model that cannot start fails the workers' setup with its cause;
    an engine dead for good mid-run stops both workers, the rows stay and the same command resumes."""
    role = ModelRef(model="fake/seeker", options={"start_error": "config.json: bad intermediate_size"})
    with pytest.raises(EngineStartError, match="bad intermediate_size; no dialogue was run") as e:
        run_simulation(sim_cfg(role=role, executor="ray", workers=2, num_cpus_per_worker=0.5), tmp_path / "a")
    assert type(e.value) is EngineStartError and rows(tmp_path / "a") == []  # itself, not Ray's wrapper

    out = tmp_path / "b"
    dying = sim_cfg(targets=[ModelRef(model="fake/echo?latency=0.01", options={"dies_after": 12})], limit=8,
                    executor="ray", workers=2, num_cpus_per_worker=0.5, chunk_size=2)
    with pytest.raises(RunStopError, match="died") as e:
        run_simulation(dying, out)
    assert type(e.value) is RunStopError
    done = rows(out)
    assert 2 <= len(done) < 8 and all(r["status"] == "ok" for r in done)
    for _ in range(3):  # the same command: new workers, whose engines die again after 12 calls each
        try:
            run_simulation(dying, out)
            break
        except RunStopError:
            assert len(rows(out)) > len(done)
            done = rows(out)
    assert sorted(r["status"] for r in rows(out)) == ["ok"] * 8


def test_the_command_prints_one_line_and_exits_1(tmp_path):
    config = tmp_path / "sim.yaml"
    config.write_text(yaml.safe_dump({
        "cards": "sample", "limit": 2, "targets": [{"model": "fake/echo"}],
        "role": {"model": "fake/seeker", "options": {"start_error": "weights missing"}},
        "execution": {"executor": "local"}}))
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "simulate", "-c", str(config), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the engine for fake/seeker did not start: weights missing; no dialogue was run")
    assert proc.stdout == "" and rows(out) == []
