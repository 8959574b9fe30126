"""The seeker's distress, 0-4, at every seeker turn of real and simulated dialogues (beyond the paper):
a judge job on the pool, like scoring.

Items are dialogues handed in by the caller (human ones from an ESConv-format file, simulated ones
from run folders), not read from the output folder: one item per dialogue that still misses a
rating, with the seeker turns it misses. Each rating is one judge call (sim/judging/distress.py)
read like a scoring call (P(0..4) with method logprob; the answer parsed with generate:
sim/judging/judge_plan.py `read_answer`), and its row is a score row with the dimension
`distress:<k>`. The rows go to their own run folder (`out_dir`), so a re-run with the same judge
rates only what is missing, the call cache answers what was asked before, and a failed call is a
row with its reason (rated again on the next run), never a silent zero.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Literal

from pydantic import Field

from esc_eval.serve.chat.interface import RunStopError
from esc_eval.serve.config import ConfigModel
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import resolve
from esc_eval.sim.jobs.scoring_judges import judge_plan_for
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.distress import DEFAULT_CONTEXT, distress_messages
from esc_eval.sim.judging.distress_turns import distress_dimension, distress_turn, seeker_runs
from esc_eval.sim.judging.judge_plan import JudgePlan, ask_judge
from esc_eval.sim.driver.calls import CallSettings, PlannedModel, check_calls, prepare_calls
from esc_eval.sim.pool.capacity import Demand, estimate_tokens
from esc_eval.sim.pool.job import Job
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.driver.outcome import JobOutcome, run_stopped
from esc_eval.sim.pool.participants import ModelPool
from esc_eval.sim.pool.pool import WorkerPool, run_pool
from esc_eval.sim.pool.stats import PoolStats
from esc_eval.sim.runs.records import score_row
from esc_eval.sim.runs.runfolder import RunFolder, now_utc
from esc_eval.sim.runs.usage import record_usage

RUN_ID = "distress"


class DistressConfig(ConfigModel):
    """The distress judge and how it rates."""

    judge: ModelRef = Field(default_factory=lambda: ModelRef(model="vllm/embedded"), description="The judge model (registry name or spec).")
    method: Literal["logprob", "generate"] = Field("logprob", description="'logprob': one forward pass reading P('0'..'4') (the rating is its expected value); 'generate': a free answer parsed by `parser`.")
    parser: Literal["strict", "compat"] = Field("strict", description="'strict': the answer must be one digit 0-4; 'compat': the first of 0..4 found in it.")
    context: int = Field(DEFAULT_CONTEXT, ge=0, le=50, description="Merged turns shown before the rated seeker turn.")
    name: str | None = Field(None, description="Judge id written into the rows (default '<model>:distress:<method>').")
    execution: ExecutionConfig = Field(default_factory=lambda: ExecutionConfig(chunk_size=4), description="Pool shape and retries.")
    prices: dict[str, TokenPrice] = Field(default_factory=dict, description="Per-token prices by model name or spec (manifest `usage`).")

    @property
    def judge_id(self) -> str:
        return self.name or f"{self.judge.model}:distress:{self.method}"

    def judge_config(self) -> JudgeConfig:
        """The judge as the scoring machinery plans it (its backend's capabilities decide the method)."""
        return JudgeConfig(model=self.judge, method=self.method, parser=self.parser, name=self.judge_id)


async def rate_turns(turns: list[dict[str, Any]], language: str, seeker_turns: list[int], cfg: DistressConfig, model,
                     plan: JudgePlan) -> list[dict[str, Any]]:
    """Partial score rows (dimension distress:<k>) of the given seeker turns; a call the spend cap
    refused gets no row (a resume rates it)."""

    async def one(k: int) -> dict[str, Any] | None:
        row: dict[str, Any] = {"dimension": distress_dimension(k), "score": None, "probs": None, "expected": None,
                               "raw": None, "parse_status": "error", "method": plan.method, "parser": cfg.parser,
                               "error": None, "prompt_tokens": None, "latency_s": None}
        return await ask_judge(model, distress_messages(turns, k, language, cfg.context), plan.params or cfg.judge.params,
                               plan, cfg.parser, row)

    return [r for r in await asyncio.gather(*(one(k) for k in seeker_turns)) if r is not None]


class DistressJob(Job):
    kind = "scores"
    default_concurrency = 8
    unit = "dialogue rated"
    demand: Demand | None  # what one item asks of the judge's engine (its own; demands() gives it to the pool)

    def __init__(self, cfg: DistressConfig, plan: JudgePlan, calls: CallSettings | None = None,
                 excused: set[tuple[str, str]] | None = None, demand: Demand | None = None):
        self.cfg, self.plan, self.calls, self.demand = cfg, plan, calls, demand
        self.excused = excused if excused is not None else set()

    async def setup(self, models: ModelPool) -> None:
        models.retain([self.cfg.judge])
        self.model = models.get(self.cfg.judge, self.cfg.execution, self.calls)
        await asyncio.to_thread(models.start, self.cfg.judge)  # one that cannot start stops the job here

    def demands(self) -> list[tuple[Any, Demand]]:
        return [(self.cfg.judge, self.demand)] if self.demand is not None else []

    def after_flush(self, items) -> None:
        pass

    def item_keys(self, item: dict[str, Any]) -> list[tuple[str, str]]:
        return [(item["dialogue_id"], distress_dimension(k)) for k in item["seeker_turns"]]

    def present_keys(self, run: RunFolder) -> set[tuple[str, str]]:
        return done_keys(run, self.cfg.judge_id, redo_errors=False) | self.excused

    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        partial = await rate_turns(item["turns"], item["language"], item["seeker_turns"], self.cfg, self.model, self.plan)
        rows = [score_row({"run_id": RUN_ID, "dialogue_id": item["dialogue_id"], "target_model": item["role_model"],
                           "language": item["language"], "judge": self.cfg.judge_id, "scored_at": now_utc(), **r})
                for r in partial]
        errors = [r["error"] for r in rows if r["parse_status"] == "error"]
        summary = {"ok": all(r["parse_status"] == "ok" for r in rows), "calls": len(rows), "rows": len(rows),
                   "tokens": sum(r["prompt_tokens"] or 0 for r in rows), "errors": len(errors),
                   "unscored": sum(r["score"] is None for r in rows), "error": errors[0] if errors else None}
        if len(rows) < len(item["seeker_turns"]):  # the spend cap refused a call: a resume rates it
            rated = {r["dimension"] for r in rows}
            summary["budget_stopped"] = True
            summary["stopped_keys"] = [k for k in self.item_keys(item) if k[1] not in rated]
        return rows, summary


def done_keys(run: RunFolder, judge_id: str, redo_errors: bool = True) -> set[tuple[str, str]]:
    """(dialogue_id, distress:k) this judge has rated (errors count as not rated when redo_errors)."""
    t = run.read("scores", columns=["dialogue_id", "dimension", "judge", "parse_status"])
    cols = (t.column(c).to_pylist() for c in ("dialogue_id", "dimension", "judge", "parse_status"))
    return {(d, dim) for d, dim, j, status in zip(*cols)
            if j == judge_id and distress_turn(dim) is not None and not (redo_errors and status == "error")}


def distress_items(dialogues: Iterable[dict[str, Any]], done: set[tuple[str, str]]) -> Iterator[dict[str, Any]]:
    """One item per dialogue with a seeker turn not yet rated: dialogue_id, language, role_model,
    turns ({speaker, text}), seeker_turns (from 1)."""
    seen: set[str] = set()
    for d in dialogues:
        if d["dialogue_id"] in seen:
            continue
        seen.add(d["dialogue_id"])
        turns = [{"speaker": t["speaker"], "text": t["text"] or ""} for t in d["turns"]]
        missing = [k for k in range(1, len(seeker_runs(turns)) + 1) if (d["dialogue_id"], distress_dimension(k)) not in done]
        if missing:
            yield {"dialogue_id": d["dialogue_id"], "language": d.get("language") or "en",
                   "role_model": d.get("role_model") or "unknown", "turns": turns, "seeker_turns": missing}


def distress_ratings(run_dir: str | Path, judge_id: str) -> list[dict[str, Any]]:
    """The judge's ratings in a distress folder: dialogue_id, seeker_turn, rating (the expected value
    where the judge gave P(0..4), else its label; None when no usable answer), score, parse_status."""
    run = RunFolder(str(run_dir), create=False)
    out = []
    for r in run.iter_rows("scores", columns=["dialogue_id", "dimension", "judge", "score", "expected", "parse_status"]):
        k = distress_turn(r["dimension"])
        if r["judge"] != judge_id or k is None:
            continue
        rating = r["expected"] if r["expected"] is not None else r["score"]
        out.append({"dialogue_id": r["dialogue_id"], "seeker_turn": k, "rating": None if rating is None else float(rating),
                    "score": r["score"], "parse_status": r["parse_status"]})
    return out


def run_distress(cfg: DistressConfig, dialogues: list[dict[str, Any]], out_dir: str | Path,
                 on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
                 on_start: Callable[[int, int], None] | None = None, pool: WorkerPool | None = None) -> dict[str, Any]:
    """Rate every seeker turn of `dialogues` (dicts with dialogue_id, language, role_model, turns)
    into the run folder `out_dir`; resumable (see the module docstring)."""
    resolve(cfg.judge.model)  # an unknown judge fails before anything is read or written
    if not dialogues:
        raise ValueError("no dialogue to rate")
    judge = cfg.judge_config()
    plan = judge_plan_for(judge)
    configured = cfg.method
    if plan.method == "generate" and cfg.method != "generate":  # the backend's fallback: rows and id say so
        cfg = cfg.model_copy(update={"method": "generate"})
    params = plan.params or cfg.judge.params
    first = next(distress_items(dialogues, set()), None)
    if first is None:
        raise ValueError("no seeker turn to rate in the dialogues given")
    first_messages = distress_messages(first["turns"], 1, first["language"], cfg.context)
    planned = [PlannedModel(cfg.judge, params, first_messages)]
    check_calls(planned, cfg.execution, cfg.prices)  # bad input stops here, before anything is written
    run = RunFolder(str(out_dir), create=True)
    n_turns = sum(len(seeker_runs(d["turns"])) for d in dialogues)
    todo = sum(1 for _ in distress_items(dialogues, done_keys(run, cfg.judge_id)))
    outcome = JobOutcome(on_summary)
    stats, started = PoolStats(), time.time()
    with prepare_calls(planned, cfg.execution, cfg.prices, run.location) as calls:
        run.update_manifest(run_id=RUN_ID, distress={"config": cfg.model_dump(mode="json"), "judge": cfg.judge_id,
                                                     "judge_method": {"configured": configured, "used": plan.method,
                                                                      "note": plan.note}})
        if on_start:
            on_start(len(dialogues), todo)
        run.append_event("distress_start", todo=todo)
        if todo:
            demand = Demand(cfg.judge.model, 4, sum(estimate_tokens(m.content) for m in first_messages)
                            + (1 if plan.reads_logprobs and params.choices else params.max_tokens))
            items = distress_items(dialogues, done_keys(run, cfg.judge_id))
            try:
                stats = run_pool(DistressJob(cfg, plan, calls, excused=outcome.stopped_keys, demand=demand),
                                 outcome.feed(items), run.location, cfg.execution, on_summary=outcome.on_summary, pool=pool)
            except RunStopError as e:  # the rows written stay: the same command rates the rest
                raise run_stopped(run, "distress", e, outcome.items_done, "dialogue") from e
    result = {**stats.as_dict(), "dialogues": len(dialogues), "seeker_turns": n_turns,
              "skipped_done": len(dialogues) - todo, "wall_s": round(time.time() - started, 3), "run_dir": str(run),
              "judge": cfg.judge_id, "judge_method": plan.method, "outcome": outcome.as_dict("scores"),
              "api_calls": calls.totals}
    run.append_event("distress_end", **result)
    run.update_manifest(distress={"last": result})
    record_usage(run, cfg.prices)
    return result


def distress_rater(cfg: DistressConfig, target: str):
    """The distress job over the dialogues it is given, with progress on the terminal, into the run
    folder `target`: what analysis' fidelity_of_runs calls as its `rate` (its ratings and the judge's id)."""
    def rate(items: list[dict]):
        import pandas as pd

        from esc_eval.sim.driver.progress import job_progress

        with job_progress("distress", unit="dialogues") as jp:
            run_distress(cfg, items, target, on_summary=jp.on_summary, on_start=jp.on_start)
        return pd.DataFrame(distress_ratings(target, cfg.judge_id), columns=["dialogue_id", "seeker_turn", "rating"]), cfg.judge_id

    return rate
