"""Per-reply safety after risk emerged, through the real jobs on the fake backends: a target scripted to
answer appropriately from its r-th reply (or never) and a judge rating what it reads are located where
they were planted (first appropriate reply, replies taken, failure patterns, the delusion gap), the job
resumes (a second run asks nothing; an engine dying mid-run leaves rows the same command completes), and
bad input stops in one line before anything is written."""
from __future__ import annotations

import pytest

from esc_eval.analysis.safety.emerging import load_outcomes
from esc_eval.analysis.safety.emerging_checks import measure_latency, measure_patterns
from esc_eval.analysis.safety.emerging_stats import LESS, NO_GAP, summarize_emerging
from esc_eval.serve.chat.interface import RunStopError
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.cards.card import emerging_risk_cards
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.reply_safety import run_reply_safety
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

SAFE, MISS, AGREE = "Are you safe right now? [SAFE]", "Okay, tell me more. [MISS]", "You're right about that. [AGREE]"
MARKS = "[SAFE]:4/0,[MISS]:1/1,[AGREE]:0/3"  # scores 4, 1, 0; patterns none, missed_risk, validates
LOCAL = ExecutionConfig(executor="local")


def target(name: str, r: int | None, bad: str = MISS) -> ModelRef:
    """A target whose replies fail (`bad`) until its r-th, appropriate from there (r None: never)."""
    replies = [bad] * 5 if r is None else [bad] * (r - 1) + [SAFE]
    return ModelRef(model="fake/fixed", name=name, options={"replies": replies})


def simulate(out, targets, card_ids=None, rounds=5, kinds=None):
    ids = card_ids or [c.id for c in emerging_risk_cards() if kinds is None or c.risk_emergence.kind in kinds]
    return run_simulation(SimulationConfig(cards="emerging_risk", card_ids=ids, rounds=rounds,
                                           role=ModelRef(model="fake/seeker"), targets=targets, execution=LOCAL), out)


def judge(**options) -> ScoringConfig:
    return ScoringConfig(judge=JudgeConfig(model=ModelRef(model=f"fake/judge?marks={MARKS}", options=options),
                                           name="planted"), execution=LOCAL)


def test_a_target_is_located_where_it_was_planted(tmp_path):
    """From reply 3, from reply 1 and never, on one card of each kind and language (8 x 3 dialogues)."""
    cards = [next(c.id for c in emerging_risk_cards() if c.language == lang and c.risk_emergence.kind == k)
             for lang in ("en", "zh") for k in ("ideation", "delusion", "boundaries", "harm_to_others")]
    planted = {"from3": 3, "from1": 1, "never": None}
    simulate(tmp_path / "run", [target(n, r, bad=AGREE if n == "never" else MISS) for n, r in planted.items()], cards)
    result = run_reply_safety(judge(), tmp_path / "run")
    assert result["failed"] == 0 and result["outcome"]["unscored_rows"] == 0
    rows = list(RunFolder(tmp_path / "run", create=False).iter_rows("reply_safety"))
    onsets = {c.id: c.risk_emergence.onset.round for c in emerging_risk_cards()}
    # two questions for every reply from the onset to the fifth: nothing before the disclosure is asked
    assert len(rows) == 3 * sum(2 * (5 - onsets[c] + 1) for c in cards)
    outcomes = load_outcomes(tmp_path / "run")
    assert len(outcomes) == 24 and not outcomes["unknown"].any()
    assert measure_latency(outcomes, planted) == {"dialogues": 24, "located": 1.0, "taken": 1.0, "wrong": 0}
    summary = summarize_emerging(outcomes, n_boot=100).set_index("model")
    assert summary.loc["never", "responded"] == 0 and summary.loc["never", "median_replies"] == float("inf")
    assert summary.loc["from1", "responded"] == 1 and summary.loc["from1", "first_reply"] == 1
    assert summary.loc["from1", "median_replies"] == 1 and summary.loc["from1", "responded_hi"] == 1
    assert 0.5 < summary.loc["from1", "responded_lo"] < 1  # eight cards: an interval, never [100%, 100%]
    # the failure pattern planted on the failing replies is named, and only it; none on a target that never failed
    check = measure_patterns(summary.reset_index(), {"never": {"validates"}, "from3": {"missed_risk"}, "from1": set()})
    assert check == {"detected": 1.0, "false": 0.0}
    # every disclosure later than the onset was met: the escalation counted where the target answered after it
    assert summary.loc["from1", "escalation"] == 1 and summary.loc["never", "escalation"] == 0
    assert summary.loc["from1", "n_escalation"] == 8


def test_the_delusion_gap_is_flagged_where_planted_and_not_without(tmp_path):
    """One target named T, scripted to respond at once except in the delusion scenarios where it never
    does (two run folders, read together), against a T that responds everywhere: the verdict and no verdict."""
    simulate(tmp_path / "others", [target("T", 1)], kinds={"ideation", "boundaries", "harm_to_others"}, rounds=4)
    simulate(tmp_path / "deluded", [target("T", None)], kinds={"delusion"}, rounds=4)
    simulate(tmp_path / "same", [target("T", 1)], kinds={"delusion"}, rounds=4)
    for run in ("others", "deluded", "same"):
        run_reply_safety(judge(), tmp_path / run)
    gap = summarize_emerging(load_outcomes([tmp_path / "others", tmp_path / "deluded"]), n_boot=200).iloc[0]
    assert gap["delusion_gap"] == 1 and gap["delusion_verdict"] == LESS and gap["n_delusion"] == 12
    none = summarize_emerging(load_outcomes([tmp_path / "others", tmp_path / "same"]), n_boot=200).iloc[0]
    assert none["delusion_gap"] == 0 and none["delusion_verdict"] == NO_GAP and none["responded"] == 1


def test_the_job_resumes_after_its_engine_died(tmp_path):
    simulate(tmp_path / "run", [target("T", 2)], card_ids=["risk-en-ideation-01", "risk-zh-harm-01"])
    with pytest.raises(RunStopError):
        run_reply_safety(judge(dies_after=5), tmp_path / "run")
    written = {(r["dialogue_id"], r["reply"], r["question"]) for r in
               RunFolder(tmp_path / "run", create=False).iter_rows("reply_safety")}
    assert len(written) < 2 * (5 + 4)  # stopped part way (onsets 1 and 2: 5 and 4 replies to rate)
    again = run_reply_safety(judge(), tmp_path / "run")
    rows = list(RunFolder(tmp_path / "run", create=False).iter_rows("reply_safety"))
    assert len(rows) == 2 * (5 + 4) and again["skipped_done"] == 0
    assert run_reply_safety(judge(), tmp_path / "run")["items"] == 0  # everything rated: nothing asked again


def test_bad_input_stops_in_one_line_before_anything_is_written(tmp_path):
    run_simulation(SimulationConfig(cards="sample", limit=1, rounds=2, role=ModelRef(model="fake/seeker"),
                                    targets=[ModelRef(model="fake/echo")], execution=LOCAL), tmp_path / "plain")
    with pytest.raises(ValueError, match="no completed dialogue discloses risk at a set round"):
        run_reply_safety(judge(), tmp_path / "plain")
    assert not RunFolder(tmp_path / "plain", create=False).parts("reply_safety")
    # a run folder written before dialogue rows had a schedule reads it as none
    import pyarrow as pa
    import pyarrow.parquet as pq

    from esc_eval.sim.runs.records import DIALOGUE_SCHEMA

    old = pa.schema([f for f in DIALOGUE_SCHEMA if not f.name.startswith("risk_")])
    rows = [{k: v for k, v in r.items() if k in old.names}
            for r in RunFolder(tmp_path / "plain", create=False).iter_rows("dialogues")]
    (tmp_path / "older" / "dialogues").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=old), tmp_path / "older" / "dialogues" / "part-0-old.parquet")
    with pytest.raises(ValueError, match="no completed dialogue discloses risk at a set round"):
        run_reply_safety(judge(), tmp_path / "older")
    with pytest.raises(ValueError, match="discloses at round 4, but the run has 3 round"):
        simulate(tmp_path / "short", [target("T", 1)], rounds=3)
    assert not (tmp_path / "short").exists()
