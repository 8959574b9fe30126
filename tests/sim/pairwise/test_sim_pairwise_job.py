"""The pairwise job (sim/pairwise/job.py) through the real pool code path on fake judges: verdicts by
position mapped to the pair's terms, failed and unparsable answers as rows with no verdict, a resume
after a stopped run writing every (pair, dimension, order) exactly once, the manifest, and bad input
stopping before anything is written (the CLI's dry run too)."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from esc_eval.serve.chat.interface import RunStopError
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.pairwise.job import judge_pair, judge_pairs, run_pairwise
from esc_eval.sim.pairwise.config import PairwiseConfig, pairwise_config
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.judge_plan import JudgePlan
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.records import dialogue_id, dialogue_row, stable_id
from esc_eval.sim.runs.runfolder import RunFolder

REPO = Path(__file__).resolve().parents[3]
LOCAL = ExecutionConfig(executor="local")


def make_run(path: Path, cards=("c1", "c2", "c3"), targets=("m1", "m2", "m3", "m4"), language="en") -> Path:
    run = RunFolder(path)
    rows = []
    for c in cards:
        for t in targets:
            turns = [{"speaker": "seeker", "text": f"On {c} I feel low."}, {"speaker": "assistant", "text": f"{t} is here for you."}]
            rows.append(dialogue_row(run_id="run-1", dialogue_id=dialogue_id(c, t, "role", "default", 0), card_id=c,
                                     language=language, target_model=t, role_model="role", strategy="default", seed=0,
                                     status="ok", turns=turns))
    run.write_part("dialogues", rows)
    return path


def config(model: str, method: str = "logprob", dims=("empathy",), name: str | None = None, **kw) -> PairwiseConfig:
    return PairwiseConfig(judge=JudgeConfig(model=ModelRef(model=model), method=method, name=name),
                          dimensions=list(dims), execution=LOCAL, **kw)


def raw_rows(run_dir: Path) -> list[dict]:
    """Every row of every pairwise part, before the readers keep one per key."""
    return pq.read_table(run_dir / "pairwise").to_pylist()


@pytest.mark.parametrize("model,method", [("fake/fixed?reply=1", "generate"), ("fake/judge?score=1", "logprob")])
def test_a_judge_always_answering_1_prefers_a_in_order_ab_and_b_in_order_ba(tmp_path, model, method):
    run_dir = make_run(tmp_path / "run", cards=("c1",), targets=("m2", "m1"))
    result = run_pairwise(config(model, method, dims=("empathy", "overall")), run_dir)
    assert result["pairs"] == 1 and result["items"] == 1 and result["model_calls"] == 4 and result["failed"] == 0
    rows = raw_rows(run_dir)
    da, db = dialogue_id("c1", "m1", "role", "default", 0), dialogue_id("c1", "m2", "role", "default", 0)
    assert len(rows) == 4
    for r in rows:
        assert (r["model_a"], r["model_b"], r["dialogue_a"], r["dialogue_b"]) == ("m1", "m2", da, db)
        assert r["pair_id"] == stable_id("pair", da, db) and r["run_id"] == "run-1" and r["card_id"] == "c1"
        assert r["verdict"] == "first" and r["raw"] == "1" and r["parse_status"] == "ok"
        assert r["preferred"] == {"ab": "a", "ba": "b"}[r["order"]]
        assert r["method"] == method and r["judge"] == f"{model}:pairwise:{method}"
    assert sorted((r["dimension"], r["order"]) for r in rows) == [("empathy", "ab"), ("empathy", "ba"),
                                                                 ("overall", "ab"), ("overall", "ba")]
    if method == "logprob":  # the fake's weights e^-|i - 1| over the labels 0, 1, 2, renormalised: by hand
        z = 1 + 2 * 2.718281828459045 ** -1
        assert all(r["probs"] == pytest.approx([1 / z, 0.36787944 / z, 0.36787944 / z], rel=1e-6) for r in rows)
    else:
        assert all(r["probs"] is None for r in rows)


def test_an_answer_that_does_not_parse_and_a_failed_call_are_rows_without_a_verdict(tmp_path):
    run_dir = make_run(tmp_path / "run", cards=("c1",), targets=("m1", "m2"))
    run_pairwise(config("fake/fixed?reply=Both did well", "generate"), run_dir)
    rows = raw_rows(run_dir)
    assert [(r["verdict"], r["preferred"], r["parse_status"], r["raw"]) for r in rows] == [
        (None, None, "parse_failure", "Both did well")] * 2  # never a silent tie

    class Broken:
        async def chat(self, messages, params, adapter=None):
            raise ConnectionError("judge unreachable")

    item = {"language": "en", "turns_a": [("seeker", "hi")], "turns_b": [("seeker", "hi")], "tasks": [("empathy", "ab")]}
    (row,) = asyncio.run(judge_pair(item, config("fake/judge"), Broken(), JudgePlan("generate"), None))
    assert (row["verdict"], row["preferred"], row["parse_status"]) == (None, None, "error")
    assert row["error"] == "ConnectionError: judge unreachable"


def test_a_resume_after_a_stopped_run_writes_every_pair_dimension_and_order_exactly_once(tmp_path):
    run_dir = make_run(tmp_path / "run")  # 4 targets x 3 cards: 18 pairs, 2 dimensions x 2 orders = 72 calls
    dying = config("fake/judge?dies_after=20", dims=("empathy", "fluency"), name="judge-x")
    with pytest.raises(RunStopError, match="run the same command again to resume"):
        run_pairwise(dying, run_dir)
    first = raw_rows(run_dir)
    assert 0 < len(first) < 72 and len(first) % 4 == 0  # whole pairs only: a pair cut short left no row
    result = run_pairwise(config("fake/judge", dims=("empathy", "fluency"), name="judge-x"), run_dir)
    assert result["skipped_done"] == len(first) // 4 and result["items"] == 18 - len(first) // 4
    rows = raw_rows(run_dir)
    keys = Counter((r["pair_id"], r["dimension"], r["order"], r["judge"]) for r in rows)
    assert len(keys) == 72 and set(keys.values()) == {1}
    again = run_pairwise(config("fake/judge", dims=("empathy", "fluency"), name="judge-x"), run_dir)
    assert again["skipped_done"] == 18 and again["items"] == 0 and len(raw_rows(run_dir)) == 72
    # another dimension later: only its calls
    more = run_pairwise(config("fake/judge", dims=("empathy", "fluency", "overall"), name="judge-x"), run_dir)
    assert more["items"] == 18 and more["model_calls"] == 36 and len(raw_rows(run_dir)) == 108
    manifest = json.loads((run_dir / "manifest.json").read_text())["pairwise"]
    assert manifest["judge"] == "judge-x" and manifest["plan"]["pairs"] == 18 and manifest["calls"] == {"planned": 108}
    assert manifest["config"]["dimensions"] == ["empathy", "fluency", "overall"] and manifest["last"]["items"] == 18


def test_the_plans_reach_the_rows(tmp_path):
    run_dir = make_run(tmp_path / "run", language="zh")
    judge_pairs(config("fake/judge", plan="reference", reference="m3"), str(run_dir), say=lambda s: None)
    rows = raw_rows(run_dir)
    assert len(rows) == 3 * 3 * 2 and all("m3" in (r["model_a"], r["model_b"]) for r in rows)
    assert {r["language"] for r in rows} == {"zh"}
    said: list[str] = []
    result = judge_pairs(config("fake/judge", plan="round_robin", name="rr"), str(run_dir), say=said.append)
    assert said[0] == "pairwise plan round_robin: 3 cards (3 card groups), 4 targets, 6 pairs x 1 dimensions x 2 orders = 12 judge calls"
    assert result["items"] == 6 and len([r for r in raw_rows(run_dir) if r["judge"] == "rr"]) == 12


def listing(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_bad_input_stops_before_anything_is_written(tmp_path):
    run_dir = make_run(tmp_path / "run", cards=("c1",), targets=("m1", "m2"))
    lone = make_run(tmp_path / "lone", cards=("c1",), targets=("m1",))
    apart = make_run(tmp_path / "apart", cards=("c1",), targets=("m1",))
    RunFolder(apart).write_part("dialogues", [dialogue_row(run_id="r", dialogue_id="x", card_id="c2", language="en",
                                                           target_model="m2", role_model="role", strategy="default",
                                                           seed=0, status="ok", turns=[])])
    before = {p: listing(p) for p in (run_dir, lone, apart)}
    with pytest.raises(ValueError, match="at least 2 targets; the run has 1: m1"):
        run_pairwise(config("fake/judge"), lone)
    with pytest.raises(ValueError, match="no card was played by two targets"):
        run_pairwise(config("fake/judge"), apart)
    with pytest.raises(ValueError, match="reference model 'm7' is not a target of the run"):
        judge_pairs(config("fake/judge", plan="reference", reference="m7"), str(run_dir), say=lambda s: None)
    with pytest.raises(ValueError, match="field 'plan'"):
        pairwise_config(plan="swiss")
    with pytest.raises(ValueError, match="unknown dimension 'kindness'"):
        pairwise_config(dimensions="empathy,kindness")
    with pytest.raises(ValueError, match="needs a reference model"):
        pairwise_config(plan="reference")
    with pytest.raises(Exception, match="nosuchmodel"):
        run_pairwise(config("nosuchmodel"), run_dir)
    with pytest.raises(FileNotFoundError, match="no run folder with dialogues"):
        run_pairwise(config("fake/judge"), tmp_path / "nothing")
    dry = judge_pairs(config("fake/judge", plan="all"), str(run_dir), dry_run=True, say=lambda s: None)
    assert dry["plan"]["pairs"] == 1 and dry["plan"]["judge_calls"] == 2
    assert {p: listing(p) for p in (run_dir, lone, apart)} == before and not (tmp_path / "nothing").exists()


def test_the_cli_prints_the_plan_and_a_dry_run_stops_there(tmp_path):
    run_dir = make_run(tmp_path / "run")
    before = listing(run_dir)
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "pairwise", "-i", str(run_dir), "--judge", "fake/judge",
                           "--plan", "round_robin", "--dimensions", "empathy,overall", "--dry-run"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "6 pairs x 2 dimensions x 2 orders = 24 judge calls" in proc.stderr
    assert json.loads(proc.stdout)["plan"]["judge_calls"] == 24 and listing(run_dir) == before
    bad = subprocess.run([sys.executable, "-m", "esc_eval.cli", "pairwise", "-i", str(run_dir), "--judge", "fake/judge",
                          "--plan", "reference", "--reference", "m9"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert bad.returncode == 2 and lines == ["error: reference model 'm9' is not a target of the run; its targets: m1, m2, m3, m4"]
    assert listing(run_dir) == before


def test_a_pair_over_the_judges_context_is_judged_windowed_and_says_how_much_it_left_out(tmp_path):
    """Two 12-round dialogues: the pair whole is over the fake judge's context (~1,500 tokens); with
    both windowed to the opener, round 1 and the last 5 rounds (6 rounds left out of each) it fits.
    A context no window fits is an error row with the refusal, never a tie."""
    run = RunFolder(tmp_path / "run")
    line = " ".join(["I keep thinking about it and it will not leave me alone"] * 3)
    rows = []
    for t in ("m1", "m2"):
        turns = [{"speaker": "assistant", "text": "Hello, I am here to listen."}]
        for k in range(12):
            turns += [{"speaker": "seeker", "text": f"Round {k}: {line}."}, {"speaker": "assistant", "text": f"{t} {k}: {line}?"}]
        rows.append(dialogue_row(run_id="long", dialogue_id=dialogue_id("c1", t, "role", "default", 0), card_id="c1",
                                 language="en", target_model=t, role_model="role", strategy="default", seed=0,
                                 status="ok", turns=turns))
    run.write_part("dialogues", rows)
    result = run_pairwise(config("fake/fixed?reply=1&context=1500", "generate", name="short"), tmp_path / "run")
    assert result["failed"] == 0
    got = RunFolder(tmp_path / "run", create=False).read("pairwise").to_pylist()
    assert len(got) == 2 and {r["parse_status"] for r in got} == {"ok"}
    assert {r["rounds_left_out"] for r in got} == {6} and {r["verdict"] for r in got} == {"first"}
    run_pairwise(config("fake/fixed?reply=1&context=200", "generate", name="tiny"), tmp_path / "run")
    tiny = [r for r in RunFolder(tmp_path / "run", create=False).read("pairwise").to_pylist() if r["judge"] == "tiny"]
    assert len(tiny) == 2 and all(r["parse_status"] == "error" and r["verdict"] is None and r["preferred"] is None
                                  and "ContextOverflowError" in r["error"] for r in tiny)
