"""Pairwise judging (beyond the paper): for every card two targets both talked to, a judge says
which supporter did better on each dimension, or a tie, each pair asked in both orders.

The pairs come from the run's completed dialogues by a plan (pairwise_plan.py: all, round_robin,
reference), counted before anything runs. One pool item per pair carries both dialogues' turns;
its calls (every dimension, both orders) go out together so the engine batches them. Each call is
one row of the run folder's `pairwise` parts (sim/runs/records.py PAIRWISE_SCHEMA): the verdict by
position (first | second | tie), `preferred` in the pair's canonical terms (a | b | tie), and with
method logprob P(first, second, tie) (sim/judging/pairwise_prompts.py). A failed call or an answer
that does not parse is a row with a null verdict and its reason, never a silent tie. A pair over
the judge's context is asked again with both dialogues windowed by scoring's rule (sim/judging/
window.py: the opener, round 1 and the last rounds, halved on each refusal), `rounds_left_out` in
the row; one still refused at a single late round is an error row. A re-run asks only the (pair, dimension, order) this judge has no usable row for, and the
call cache answers what was asked before.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterable, Iterator

from esc_eval.serve.chat.interface import ChatMessage, GenerationParams, RunStopError
from esc_eval.serve.registry.registry import resolve
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.pairwise.config import PairwiseConfig
from esc_eval.sim.pairwise.plan import ORDERS, Pair, PairsPlan, plan_pairs
from esc_eval.sim.jobs.scoring_judges import judge_plan_for
from esc_eval.sim.judging.judge_plan import JudgePlan, ask_judge
from esc_eval.sim.judging.pairwise_prompts import pairwise_messages, pairwise_params, preferred, read_verdict
from esc_eval.sim.judging.window import ask_within_context, dialogue_rounds, windowed
from esc_eval.sim.driver.calls import CallSettings, PlannedModel, check_calls, prepare_calls
from esc_eval.sim.pool.capacity import Demand, estimate_tokens
from esc_eval.sim.pool.job import Job
from esc_eval.sim.driver.outcome import JobOutcome, run_stopped
from esc_eval.sim.pool.participants import ModelPool
from esc_eval.sim.pool.pool import WorkerPool, run_pool
from esc_eval.sim.pool.stats import PoolStats
from esc_eval.sim.runs.records import pairwise_row
from esc_eval.sim.runs.runfolder import RunFolder, now_utc
from esc_eval.sim.runs.storage import is_uri
from esc_eval.sim.runs.usage import record_usage

Turns = list[tuple[str, str]]
DIALOGUE_COLUMNS = ["run_id", "dialogue_id", "card_id", "language", "target_model", "role_model", "strategy", "seed",
                    "status"]


def call_messages(cfg: PairwiseConfig, dimension: str, order: str, turns_a: Turns, turns_b: Turns,
                  language: str) -> list[ChatMessage]:
    """The messages of one call: dialogue a shown first in order "ab", dialogue b first in "ba"."""
    first, second = (turns_a, turns_b) if order == "ab" else (turns_b, turns_a)
    return pairwise_messages(dimension, first, second, language, rendering=cfg.judge.rendering,
                             system_prompt=cfg.judge.system_prompt)


async def ask_pairwise(model: Any, messages: list[ChatMessage], params: GenerationParams, plan: JudgePlan,
                       row: dict[str, Any], adapter: str | None = None,
                       raise_overflow: bool = False) -> dict[str, Any] | None:
    """One pairwise call recorded into `row` by judge_plan.ask_judge, the answer read as a verdict
    and P(first, second, tie) (sim/judging/pairwise_prompts.py read_verdict) instead of a 0-4 label:
    the answer's fields, or the error as data. None when the spend cap refused the call; the run's
    failure propagates, and with raise_overflow a prompt over the judge's context (the caller windows)."""
    return await ask_judge(model, messages, params, plan, "strict", row, adapter=adapter,
                           raise_overflow=raise_overflow, read=lambda result: read_verdict(result, plan))


async def judge_pair(item: dict[str, Any], cfg: PairwiseConfig, model: Any, plan: JudgePlan,
                     params: GenerationParams) -> list[dict[str, Any]]:
    """Partial rows (dimension, order, verdict, preferred, ...) of an item's (dimension, order) tasks,
    asked together; a call the spend cap refused has no row. Both dialogues whole, else windowed
    alike (the same late rounds kept of each) until the judge's context takes them."""
    language = item["language"]
    n_rounds = max(len(dialogue_rounds(item["turns_a"])[1]), len(dialogue_rounds(item["turns_b"])[1]))

    async def one(dimension: str, order: str) -> dict[str, Any] | None:
        async def ask(keep_late: int | None, raise_overflow: bool) -> dict[str, Any] | None:
            (a, left_a), (b, left_b) = (((item[k], 0) if keep_late is None else windowed(item[k], keep_late, language))
                                        for k in ("turns_a", "turns_b"))
            row: dict[str, Any] = {"dimension": dimension, "order": order, "verdict": None, "probs": None, "raw": None,
                                   "parse_status": "error", "method": plan.method, "error": None, "prompt_tokens": None,
                                   "latency_s": None, "rounds_left_out": max(left_a, left_b)}
            return await ask_pairwise(model, call_messages(cfg, dimension, order, a, b, language), params, plan,
                                      row, adapter=cfg.judge.model.adapter, raise_overflow=raise_overflow)

        return await ask_within_context(n_rounds, ask)

    done = await asyncio.gather(*(one(d, o) for d, o in item["tasks"]))
    return [{**r, "preferred": preferred(r["verdict"], r["order"])} for r in done if r is not None]


class PairwiseJob(Job):
    kind = "pairwise"
    default_concurrency = 8  # pairs judged at once per worker without GPU engines, as scoring's dialogues
    unit = "pair judged"
    demand: Demand | None  # what one pair asks of the judge's engine (its own; demands() gives it to the pool)

    def __init__(self, cfg: PairwiseConfig, plan: JudgePlan, params: GenerationParams, calls: CallSettings | None = None,
                 excused: set[tuple[str, str, str]] | None = None, demand: Demand | None = None):
        self.cfg, self.plan, self.params, self.calls, self.demand = cfg, plan, params, calls, demand
        self.calls_per_item = len(cfg.dimensions) * len(ORDERS)
        self.excused = excused if excused is not None else set()  # the driver's: stopped by the cap, owe no row

    async def setup(self, models: ModelPool) -> None:
        models.retain([self.cfg.judge.model])
        self.model = models.get(self.cfg.judge.model, self.cfg.execution, self.calls)
        await asyncio.to_thread(models.start, self.cfg.judge.model)  # one that cannot start stops the job here

    def demands(self) -> list[tuple[Any, Demand]]:
        return [(self.cfg.judge.model, self.demand)] if self.demand is not None else []

    def item_keys(self, item: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [(item["pair_id"], d, o) for d, o in item["tasks"]]

    def present_keys(self, run: RunFolder) -> set[tuple[str, str, str]]:
        return done_keys(run, self.cfg.judge_id, redo_errors=False) | self.excused

    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        partial = await judge_pair(item, self.cfg, self.model, self.plan, self.params)
        fixed = {k: item[k] for k in ("run_id", "pair_id", "card_id", "language", "strategy", "seed", "dialogue_a",
                                      "dialogue_b", "model_a", "model_b")}
        rows = [pairwise_row({**fixed, **r, "judge": self.cfg.judge_id, "judged_at": now_utc()}) for r in partial]
        errors = [r["error"] for r in rows if r["parse_status"] == "error"]
        summary = {"ok": all(r["parse_status"] == "ok" for r in rows), "calls": len(rows), "rows": len(rows),
                   "tokens": sum(r["prompt_tokens"] or 0 for r in rows), "errors": len(errors),
                   "unscored": sum(r["verdict"] is None for r in rows), "error": errors[0] if errors else None}
        if len(rows) < len(item["tasks"]):  # the spend cap refused a call: the rest wait for a resume
            asked = {(r["dimension"], r["order"]) for r in rows}
            summary["budget_stopped"] = True
            summary["stopped_keys"] = [k for k in self.item_keys(item) if (k[1], k[2]) not in asked]
        return rows, summary


def done_keys(run: RunFolder, judge_id: str, redo_errors: bool = True) -> set[tuple[str, str, str]]:
    """(pair_id, dimension, order) this judge has a row for (a failed call counts as not asked when
    redo_errors: a re-run asks it again; an answer that did not parse stays, as in scoring)."""
    t = run.read("pairwise", columns=["pair_id", "dimension", "order", "judge", "parse_status"])
    cols = (t.column(c).to_pylist() for c in ("pair_id", "dimension", "order", "judge", "parse_status"))
    return {(p, d, o) for p, d, o, j, s in zip(*cols) if j == judge_id and not (redo_errors and s == "error")}


def read_plan(run: RunFolder, cfg: PairwiseConfig) -> PairsPlan:
    """The run's pairs under the config's plan (bad input: one ValueError line, nothing written)."""
    rows = run.iter_rows("dialogues", columns=DIALOGUE_COLUMNS)
    return plan_pairs(rows, cfg.plan, cfg.reference, len(cfg.dimensions))


def pairwise_items(run: RunFolder, pairs: Iterable[Pair], dimensions: list[str],
                   done: set[tuple[str, str, str]]) -> Iterator[dict[str, Any]]:
    """One item per pair with a (dimension, order) not yet asked: the pair's fields, run_id, both
    dialogues' turns as (speaker, text), and its tasks [(dimension, order), ...]."""
    todo = []
    for p in pairs:
        tasks = [(d, o) for d in dimensions for o in ORDERS if (p.pair_id, d, o) not in done]
        if tasks:
            todo.append((p, tasks))
    wanted = {i for p, _ in todo for i in (p.dialogue_a, p.dialogue_b)}
    dialogues: dict[str, dict[str, Any]] = {}
    for d in run.iter_rows("dialogues", columns=["run_id", "dialogue_id", "turns", "status"]):
        if d["dialogue_id"] in wanted and d["status"] == "ok":
            dialogues[d["dialogue_id"]] = d
    for p, tasks in todo:
        a, b = dialogues[p.dialogue_a], dialogues[p.dialogue_b]
        yield {"run_id": a["run_id"] or "unknown", "pair_id": p.pair_id, "card_id": p.card_id, "language": p.language,
               "strategy": p.strategy, "seed": p.seed, "dialogue_a": p.dialogue_a, "dialogue_b": p.dialogue_b,
               "model_a": p.model_a, "model_b": p.model_b, "tasks": tasks,
               "turns_a": [(t["speaker"], t["text"] or "") for t in a["turns"]],
               "turns_b": [(t["speaker"], t["text"] or "") for t in b["turns"]]}


def pairwise_run_folder(run_dir: str | Path) -> RunFolder:
    """The run folder to judge in place: one with dialogues, else one line."""
    run = RunFolder(str(run_dir), create=False) if is_uri(run_dir) or Path(run_dir).is_dir() else None
    if run is None or not run.parts("dialogues"):
        raise FileNotFoundError(f"{run_dir}: no run folder with dialogues there")
    return run


def judge_plan_and_params(cfg: PairwiseConfig) -> tuple[PairwiseConfig, JudgePlan, GenerationParams]:
    """The judge's plan on its backend (a backend without log-probabilities falls back to generate:
    the rows and the judge id say so) and the params of every call."""
    resolve(cfg.judge.model.model)  # an unknown judge fails before anything is read or written
    plan = judge_plan_for(cfg.judge)
    if plan.method == "generate" and cfg.judge.method != "generate":
        cfg = cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"method": "generate"})})
    return cfg, plan, pairwise_params(plan, cfg.judge.model.params)


def run_pairwise(cfg: PairwiseConfig, run_dir: str | Path, on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
                 on_start: Callable[[int, int], None] | None = None, pool: WorkerPool | None = None,
                 pairs: PairsPlan | None = None) -> dict[str, Any]:
    """Judge the run's pairs (`pairs`, else read_plan) into its `pairwise` parts; resumable."""
    run = pairwise_run_folder(run_dir)
    pairs = pairs or read_plan(run, cfg)
    configured = cfg.judge.method
    cfg, plan, params = judge_plan_and_params(cfg)
    done = done_keys(run, cfg.judge_id)
    first = next(pairwise_items(run, pairs.pairs[:1], cfg.dimensions[:1], set()))
    first_messages = call_messages(cfg, cfg.dimensions[0], "ab", first["turns_a"], first["turns_b"], first["language"])
    planned = [PlannedModel(cfg.judge.model, params, first_messages)]
    check_calls(planned, cfg.execution, cfg.prices)  # bad input stops here, before anything is written
    todo_pairs = sum(1 for p in pairs.pairs if any((p.pair_id, d, o) not in done for d in cfg.dimensions for o in ORDERS))
    outcome, stats, started = JobOutcome(on_summary), PoolStats(), time.time()
    with prepare_calls(planned, cfg.execution, cfg.prices, run.location) as calls:
        run.update_manifest(pairwise={"config": cfg.model_dump(mode="json"), "judge": cfg.judge_id,
                                      "plan": pairs.summary(), "calls": {"planned": pairs.calls},
                                      "judge_method": {"configured": configured, "used": plan.method, "note": plan.note}})
        if on_start:
            on_start(len(pairs.pairs), todo_pairs)
        run.append_event("pairwise_start", todo=todo_pairs)
        if todo_pairs:
            prompt = sum(estimate_tokens(m.content) for m in first_messages)
            demand = Demand(cfg.judge.model.model, len(cfg.dimensions) * len(ORDERS),
                            prompt + (1 if params.choices else params.max_tokens))
            job = PairwiseJob(cfg, plan, params, calls, excused=outcome.stopped_keys, demand=demand)
            try:
                stats = run_pool(job, outcome.feed(pairwise_items(run, pairs.pairs, cfg.dimensions, done)), run.location,
                                 cfg.execution, on_summary=outcome.on_summary, pool=pool)
            except RunStopError as e:  # the rows written stay: the same command judges the rest
                raise run_stopped(run, "pairwise", e, outcome.items_done, "pair") from e
    result = {**stats.as_dict(), "plan": pairs.summary(), "pairs": len(pairs.pairs),
              "skipped_done": len(pairs.pairs) - todo_pairs, "wall_s": round(time.time() - started, 3),
              "run_dir": str(run), "judge": cfg.judge_id, "judge_method": plan.method,
              "outcome": outcome.as_dict("scores"), "api_calls": calls.totals}
    run.append_event("pairwise_end", **result)
    run.update_manifest(pairwise={"last": result})
    record_usage(run, cfg.prices)
    return result


def pairwise_seq_tokens(cfg: PairwiseConfig, run: RunFolder, pairs: PairsPlan) -> dict[str, int]:
    """The judge's expected sequence length (what a GPU Serve replica of it is sized by): the first
    pair's prompt plus the answer cap."""
    from esc_eval.serve.plan.planner import ref_key

    first = next(pairwise_items(run, pairs.pairs[:1], cfg.dimensions[:1], set()))
    prompt = sum(estimate_tokens(m.content) for m in call_messages(cfg, cfg.dimensions[0], "ab", first["turns_a"],
                                                                    first["turns_b"], first["language"]))
    answer = 1 if cfg.judge.method == "logprob" else cfg.judge.model.params.max_tokens
    return {ref_key(cfg.judge.model.model, cfg.judge.model.options): prompt + answer}


def judge_pairs(cfg: PairwiseConfig, run_dir: str, dry_run: bool = False,
                progress: Callable[[], ContextManager[Any]] | None = None,
                say: Callable[[str], None] = print) -> dict[str, Any]:
    """What `esc-eval pairwise` runs: the plan said first (cards, targets, pairs, judge calls); with
    dry_run only that; else the judge placed where it runs (as scoring's: sim/driver/placement.py)
    and run_pairwise. `progress` opens what follows the job (sim/driver/progress.py job_progress)."""
    from esc_eval.sim.jobs.preflight import model_uses, preflight_run
    from esc_eval.sim.driver.placement import placed

    run = pairwise_run_folder(run_dir)
    pairs = read_plan(run, cfg)
    s = pairs.summary()
    say(f"pairwise plan {s['plan']}: {s['cards']} cards ({s['card_groups']} card groups), {len(s['targets'])} targets, "
        f"{s['pairs']} pairs x {s['dimensions']} dimensions x 2 orders = {s['judge_calls']} judge calls")
    if dry_run:
        return {"dry_run": True, "run_dir": str(run), "judge": cfg.judge_id, "plan": s}
    as_scoring = ScoringConfig(judge=cfg.judge, execution=cfg.execution, prices=cfg.prices)  # the judge's use, as scoring's
    preflight_run(scoring=as_scoring)
    with placed(cfg.execution, model_uses(scoring=as_scoring), run_dir=run_dir, job="pairwise", say=say,
                seq_tokens=lambda: pairwise_seq_tokens(cfg, run, pairs)) as (ex, _plan), \
            (progress or contextlib.nullcontext)() as jp:
        return run_pairwise(cfg.model_copy(update={"execution": ex}), run_dir, on_summary=jp.on_summary if jp else None,
                            on_start=jp.on_start if jp else None, pairs=pairs)


def pairwise_command(run_dir: str, judge: str | None = None, plan: str | None = None, reference: str | None = None,
                     dimensions: str | None = None, method: str | None = None, dry_run: bool = False,
                     config: Path | None = None, address: str | None = None,
                     verbose: bool = False) -> tuple[dict[str, Any], tuple[int, str] | None]:
    """`esc-eval pairwise` once its options are parsed: the config from them (config.py), the driver's
    engine environment passed on, judge_pairs with progress on the terminal; the result and the verdict
    its exit status comes from (sim/driver/outcome.py; None for a dry run)."""
    from esc_eval.sim.driver.environment import pass_driver_env
    from esc_eval.sim.driver.outcome import outcome_line
    from esc_eval.sim.driver.progress import console, job_progress
    from esc_eval.sim.pairwise.config import pairwise_config

    cfg = pairwise_config(config, judge, plan, reference, dimensions, method, address)
    pass_driver_env(cfg.execution, verbose)
    result = judge_pairs(cfg, run_dir, dry_run=dry_run, progress=lambda: job_progress("pairwise", unit="pairs"),
                         say=console.print)
    return result, None if dry_run else outcome_line(result, "scores", cfg.execution.max_failure_rate)
