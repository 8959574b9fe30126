"""`score --batch`: a scoring whose judge calls go to the providers' batch APIs.

    passes:  replay what the batches answered into score rows (replay.py); pack what is still
             needed into batches within the provider's limits (packing.py) and send them (flight.py);
             every `poll_s` look at the batches in flight and keep the results of those that ended;
             again until no batch is in flight and nothing is needed
    then:    with fallback 'online', what failed in a batch is scored with ordinary calls
             (sim/jobs/scoring.py run_scoring, at the online price)

Everything a restart needs is in the run folder (book.py): a scoring killed at any point and started
again follows the batches in flight, collects the ones that ended, and sends only what no batch holds.
The spend cap (execution.budget_usd) stops sending at the batch that would pass it, priced at the
batch price with each answer at its max_tokens.
"""
from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Callable, ContextManager

from esc_eval.serve.batches.config import BatchConfig, batch_price
from esc_eval.serve.batches.providers import batch_transport
from esc_eval.serve.batches.transport import BatchTransport
from esc_eval.sim.batching.answers import ReplayPolicy
from esc_eval.sim.batching.book import BatchBook, new_name
from esc_eval.sim.batching.flight import BatchFlight
from esc_eval.sim.batching.packing import limits_for, pack
from esc_eval.sim.batching.progress import batch_progress
from esc_eval.sim.batching.replay import ReplayPass
from esc_eval.sim.driver.calls import PlannedModel, check_calls, model_price, ref_spec
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring import ScoringJob, earlier_of, iter_scoring_items, prepare_input, run_scoring
from esc_eval.sim.jobs.scoring_record import record_scoring
from esc_eval.sim.jobs.scoring_judges import prepared_judges
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.usage import record_usage

log = logging.getLogger("esc_eval.batching")


def batch_transports(cfg: ScoringConfig) -> dict[str, BatchTransport]:
    """Each judge's batch API by judge id; ValueError in one line for a judge that has none."""
    out = {}
    for j in cfg.judges:
        spec, options = ref_spec(j.model)
        try:
            out[j.judge_id] = batch_transport(spec, options)
        except ValueError as e:
            named = "" if j.model.model == spec else f"judge {j.model.model!r}: "
            raise ValueError(f"--batch: {named}{e}") from None
    return out


def run_batch_scoring(cfg: ScoringConfig, input_path: str, out_dir: str | None = None,
                      progress: Callable[[], ContextManager[Any]] | None = None, plain: bool | None = None,
                      sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """Score the input's dialogues through the judges' batch APIs (see the module docstring); the
    result has run_scoring's keys plus `batch` (what the batches came to). `progress`: the online
    fallback's progress (sim/driver/progress.py job_progress)."""
    from esc_eval.sim.jobs.preflight import preflight_run

    batch_transports(cfg)  # a judge without a batch API: one line, before anything is read or written
    preflight_run(scoring=cfg)
    prepared, plans, methods = prepared_judges(cfg)
    judges = prepared.judges
    transports = batch_transports(prepared)
    check_calls([PlannedModel(j.model, plans[j.judge_id].params or j.model.params) for j in judges],
                prepared.execution, prepared.prices)  # keys, and a price where there is a budget
    run = prepare_input(input_path, out_dir)
    n_dialogues = sum(1 for d in run.iter_rows("dialogues", columns=["status"]) if d["status"] == "ok")
    if n_dialogues == 0:
        raise ValueError(f"{run}: no completed dialogues to score")
    earlier = earlier_of(run, judges)  # a course's later sessions, for continuity (none: one line)
    items = {d["dialogue_id"]: d for d in iter_scoring_items(run, judges, earlier=earlier)}
    todo = len(items)
    expected = {k for it in items.values() for k in ScoringJob(prepared).item_keys(it)}
    bc = prepared.batch
    record_scoring(run, prepared, methods, transport="batch", batch={"config": bc.model_dump(mode="json")})
    run.append_event("scoring_start", todo=todo, transport="batch")
    started, session = time.time(), new_name()
    prices = {j.judge_id: batch_price(model_price(j.model, ref_spec(j.model)[0], prepared.prices), ref_spec(j.model)[0])
              for j in judges}
    budget, spent, stopped = prepared.execution.budget_usd, 0.0, set()
    with batch_progress(plain=plain) as bp:
        flight = BatchFlight(BatchBook(run), transports, {j.judge_id: ref_spec(j.model)[0] for j in judges},
                             session, bp.counts)
        replay = ReplayPass(prepared, plans, flight, ReplayPolicy(session, bc.fallback, bc.max_attempts))
        flight.load()
        flight.settle()
        bp.counts.rows_total = len(expected)
        bp.update(force=True)
        fresh = True
        while True:
            if flight.follow() or fresh:
                bp.counts.rows_done += replay.run(run, items)
                fresh = False
                for judge in transports:
                    needs = [(k, n) for k, n in replay.needs.items() if n.judge == judge]
                    for planned in pack(judge, needs, transports[judge], limits_for(transports[judge], bc.max_requests,
                                                                                     bc.max_bytes), prices[judge]):
                        if budget is not None and planned.est_usd is not None and spent + planned.est_usd > budget:
                            stopped.update(r.dialogue_id for r in planned.refs)
                            continue
                        spent += planned.est_usd or 0.0
                        flight.send(planned)
            bp.update()
            if not flight.in_flight:
                break
            sleep(bc.poll_s)
    outcome = {**replay.outcome, "budget_stopped_items": len(stopped)}
    online = None
    if bc.fallback == "online" and replay.deferred and not stopped:
        online_cfg = cfg.model_copy(update={"batch": BatchConfig()})
        with (progress or contextlib.nullcontext)() as jp:
            online = run_scoring(online_cfg, run.location, None, on_summary=jp.on_summary if jp else None,
                                 on_start=jp.on_start if jp else None)
        for k in ("score_rows", "unscored_rows", "error_rows"):
            outcome[k] += online["outcome"][k]
        outcome["first_error"] = outcome["first_error"] or online["outcome"]["first_error"]
    else:
        check_rows(run, expected, stopped)
    first = judges[0].judge_id
    result = {"items": todo - len(stopped), "dialogues": n_dialogues, "skipped_done": n_dialogues - todo,
              "wall_s": round(time.time() - started, 3), "run_dir": str(run), "judge": first,
              "judges": [j.judge_id for j in judges], "judge_method": methods[first]["used"], "outcome": outcome,
              # online calls (fallback 'online'), else what the spend cap weighed: the batches sent, estimated
              "api_calls": online["api_calls"] if online else {"budget_usd": budget, "spent_usd": round(spent, 6),
                                                               "spent_is": "batches sent, estimated"},
              "batch": {**flight.summary, "session": session, "requests_sent": bp.counts.sent,
                        "requests_answered": bp.counts.answered, "requests_failed": bp.counts.failed,
                        "went_online": len(replay.deferred), "est_usd_sent": round(spent, 6),
                        "budget_usd": budget}}
    run.append_event("scoring_end", **result)
    run.update_manifest(scoring={"last": result, "batch": {"config": bc.model_dump(mode="json"), **result["batch"]}})
    record_usage(run, prepared.prices)  # batched rows at the batch price (sim/runs/usage.py)
    return result


def check_rows(run: RunFolder, expected: set[tuple[str, str, str]], stopped: set[str]) -> None:
    """Every (dialogue, judge, dimension) this scoring owed has its row (the spend cap's aside)."""
    t = run.read("scores", columns=["dialogue_id", "dimension", "judge"])
    present = set(zip(t.column("dialogue_id").to_pylist(), t.column("judge").to_pylist(),
                      t.column("dimension").to_pylist()))
    missing = sorted(k for k in expected - present if k[0] not in stopped)
    if missing:
        raise RuntimeError(f"{len(missing)} score rows owed are not in {run} (e.g. {missing[0]}); run the same "
                           "command again to finish them")
