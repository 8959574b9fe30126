"""The person's own view as a job on the pool: one item per dialogue that still misses a rating, one
call per missing question (sim/seekerview/prompts.py), rows of their own (the run folder's
`seeker_ratings` parts, sim/runs/records.py) keyed by (dialogue, question, rater).

Two raters, one job:
  the seeker     the run's role model, at the end of each completed dialogue of a simulation, in its
                 role (the item carries its role-play system prompt); rater '<role model>:seeker'
  a reader       any chat model reading dialogues in the seeker's place (people's, for the check
                 against people: sim/launch/seeker_check.py); rater '<model>:as-seeker'
Resumable: a re-run asks only what has no usable row (an error row is asked again; an unparsed
answer is an answer, kept); the call cache answers what was asked before; a call the spend cap
refused leaves no row (a resume asks it).
"""
from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any, Callable, Iterable, Iterator

from esc_eval.serve.chat.interface import RunStopError
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.driver.calls import CallSettings, PlannedModel, check_calls, prepare_calls
from esc_eval.sim.driver.outcome import JobOutcome, run_stopped
from esc_eval.sim.judging.judge_plan import JudgePlan
from esc_eval.sim.pool.capacity import Demand, estimate_tokens
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.job import Job
from esc_eval.sim.pool.participants import ModelPool
from esc_eval.sim.pool.pool import WorkerPool, run_pool
from esc_eval.sim.pool.stats import PoolStats
from esc_eval.sim.prompt_files import PROMPTS, data_file
from esc_eval.sim.runs.records import SEEKER_RATING_ITEMS, seeker_rating_row
from esc_eval.sim.runs.runfolder import RunFolder, now_utc
from esc_eval.sim.runs.usage import record_usage
from esc_eval.sim.seekerview.prompts import PROMPT_FILE, reader_messages, seeker_messages
from esc_eval.sim.seekerview.rating import ask_rating, rating_params, rating_plan

KIND = "seeker_ratings"
PEOPLE = "people"  # the rater of the people's own survey answers


def seeker_rater(role: ModelRef) -> str:
    return f"{role.target_name}:seeker"


def reader_rater(model: ModelRef) -> str:
    return f"{model.target_name}:as-seeker"


def prompt_sha() -> str:
    """The questions' file, as the manifest records it (a changed wording is visible beside the rows)."""
    return hashlib.sha256(data_file(f"{PROMPTS}/{PROMPT_FILE}.yaml").read_bytes()).hexdigest()[:16]


def item_messages(item: dict[str, Any], question: str):
    """The messages of one question of an item: the seeker's view (the item has its role prompt) or a reader's."""
    if item.get("system"):
        return seeker_messages(item["system"], item["turns"], item["language"], question)
    return reader_messages(item["turns"], item["language"], question)


class SeekerRatingJob(Job):
    kind = KIND
    default_concurrency = 8
    unit = "dialogue rated"

    demand: Demand | None  # what one item asks of the rater's engine (its own; demands() gives it to the pool)

    def __init__(self, ref: ModelRef, rater: str, plan: JudgePlan, execution: ExecutionConfig, adapter: str | None = None,
                 calls: CallSettings | None = None, excused: set | None = None, demand: Demand | None = None):
        self.ref, self.rater, self.plan, self.execution, self.adapter = ref, rater, plan, execution, adapter
        self.calls, self.demand = calls, demand
        self.excused = excused if excused is not None else set()
        self.calls_per_item = len(SEEKER_RATING_ITEMS)

    async def setup(self, models: ModelPool) -> None:
        models.retain([self.ref])  # the targets' engines of the dialogues before it are not needed
        self.model = models.get(self.ref, self.execution, self.calls)
        await asyncio.to_thread(models.start, self.ref)  # one that cannot start stops the job here

    def demands(self):
        return [(self.ref, self.demand)] if self.demand is not None else []

    def item_keys(self, item: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [(item["dialogue_id"], q, self.rater) for q in item["items"]]

    def present_keys(self, run: RunFolder) -> set:
        return done_keys(run, self.rater, redo_errors=False) | self.excused

    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async def one(question: str):
            row = {"item": question, "rating": None, "probs": None, "expected": None, "raw": None, "parse_status": "error",
                   "method": self.plan.method, "error": None, "prompt_tokens": None, "latency_s": None}
            return await ask_rating(self.model, item_messages(item, question), self.plan, row, adapter=self.adapter)

        partial = [r for r in await asyncio.gather(*(one(q) for q in item["items"])) if r is not None]
        keep = {k: item.get(k) for k in ("run_id", "dialogue_id", "card_id", "language", "target_model", "role_model",
                                         "strategy")}
        rows = [seeker_rating_row({**keep, "rater": self.rater, "rated_at": now_utc(), **r}) for r in partial]
        errors = [r["error"] for r in rows if r["parse_status"] == "error"]
        summary = {"ok": all(r["parse_status"] == "ok" for r in rows), "calls": len(rows), "rows": len(rows),
                   "tokens": sum(r["prompt_tokens"] or 0 for r in rows), "errors": len(errors),
                   "unscored": sum(r["rating"] is None for r in rows), "error": errors[0] if errors else None}
        if len(rows) < len(item["items"]):  # the spend cap refused a call: a resume asks it
            asked = {r["item"] for r in rows}
            summary["budget_stopped"] = True
            summary["stopped_keys"] = [k for k in self.item_keys(item) if k[1] not in asked]
        return rows, summary


def done_keys(run: RunFolder, rater: str, redo_errors: bool = True) -> set[tuple[str, str, str]]:
    """(dialogue_id, item, rater) this rater has answered (error rows count as not answered when redo_errors)."""
    t = run.read(KIND, columns=["dialogue_id", "item", "rater", "parse_status"])
    cols = (t.column(c).to_pylist() for c in ("dialogue_id", "item", "rater", "parse_status"))
    return {(d, i, r) for d, i, r, status in zip(*cols) if r == rater and not (redo_errors and status == "error")}


def rating_items(dialogues: Iterable[dict[str, Any]], done: set, rater: str,
                 system_for: Callable[[dict[str, Any]], str | None] = lambda d: None) -> Iterator[dict[str, Any]]:
    """One item per completed dialogue with a question this rater has not answered: the dialogue's
    keys, its turns ({speaker, text}), `system` (the seeker's role prompt, None for a reader) and
    `items` (the questions left)."""
    seen: set[str] = set()
    for d in dialogues:
        did = d["dialogue_id"]
        if did in seen or d.get("status", "ok") != "ok" or not d.get("turns"):
            continue
        seen.add(did)
        missing = [q for q in SEEKER_RATING_ITEMS if (did, q, rater) not in done]
        if missing:
            yield {**{k: d.get(k) for k in ("run_id", "dialogue_id", "card_id", "target_model", "role_model", "strategy")},
                   "language": d.get("language") or "en", "system": system_for(d), "items": missing,
                   "turns": [{"speaker": t["speaker"], "text": t["text"] or ""} for t in d["turns"]]}


def run_ratings(ref: ModelRef, rater: str, dialogues: list[dict[str, Any]], run_dir: str, execution: ExecutionConfig,
                prices: dict[str, TokenPrice] | None = None, *, adapter: str | None = None,
                system_for: Callable[[dict[str, Any]], str | None] = lambda d: None, pool: WorkerPool | None = None,
                on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
                on_start: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Ask `ref` every question it has not answered about `dialogues` (dicts of dialogue rows: their
    keys, status and turns) into the run folder `run_dir`, as `rater`; the job's summary. system_for:
    the seeker's role prompt of a dialogue (the seeker's view) or None (a reader's)."""
    prices = prices or {}
    plan = rating_plan(ref)
    run = RunFolder(run_dir, create=True)
    first = next(rating_items(dialogues, set(), rater, system_for), None)
    first_messages = item_messages(first, first["items"][0]) if first else None
    planned = [PlannedModel(ref, rating_params(plan), first_messages)]
    check_calls(planned, execution, prices)  # a key, a limit no call can meet: one line, before anything is asked
    todo = sum(1 for _ in rating_items(dialogues, done_keys(run, rater), rater, system_for))
    outcome, stats, started = JobOutcome(on_summary), PoolStats(), time.time()
    with prepare_calls(planned, execution, prices, run.location) as calls:
        run.update_manifest(seeker_ratings={"rater": rater, "model": ref.model, "method": plan.method,
                                            "note": plan.note, "prompts": prompt_sha()})
        if on_start:
            on_start(len(dialogues), todo)
        run.append_event("seeker_ratings_start", rater=rater, todo=todo)
        if todo:
            demand = Demand(ref.model, len(SEEKER_RATING_ITEMS), sum(estimate_tokens(m.content) for m in first_messages) + 1)
            job = SeekerRatingJob(ref, rater, plan, execution, adapter=adapter, calls=calls, excused=outcome.stopped_keys,
                                  demand=demand)
            try:
                stats = run_pool(job, outcome.feed(rating_items(dialogues, done_keys(run, rater), rater, system_for)),
                                 run.location, execution, on_summary=outcome.on_summary, pool=pool)
            except RunStopError as e:  # the rows written stay: the same command asks the rest
                raise run_stopped(run, "seeker_ratings", e, outcome.items_done, "dialogue") from e
    result = {**stats.as_dict(), "dialogues": len(dialogues), "skipped_done": len(dialogues) - todo,
              "wall_s": round(time.time() - started, 3), "rater": rater, "method": plan.method,
              "outcome": outcome.as_dict("scores"), "api_calls": calls.totals}
    run.append_event("seeker_ratings_end", **result)
    run.update_manifest(seeker_ratings={"last": result})
    record_usage(run, prices)  # the rater's calls and tokens beside the other jobs' (stage seeker_rating)
    return result
