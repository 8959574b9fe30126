"""Scoring: the judge answers each of the seven rubric prompts per dialogue.

Two methods, per judge config:
- logprob (default for local judges): one forward pass per (dialogue, dimension), the answer
  constrained to "0".."4" and the five label log-probabilities read at the answer position:
  the 5-way distribution, its argmax (= the greedy constrained answer) and the expected score.
- generate (API judges): a free answer parsed strictly (or with the official compat rule).
A call that still fails after retries, or an answer that does not parse, is a row with a null
score and its reason — never a silent zero. All seven prompts of a dialogue go out at once so
the engine batches them; with prompt_order="dialogue_first" one goes first and the rest reuse its
cached dialogue prefix.
"""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from esc_eval.serve.chat.interface import ChatMessage, ContextOverflowError, RunStopError, backend_capabilities
from esc_eval.serve.devices.cpu import execution_runtime
from esc_eval.serve.registry.entry import default_adapter
from esc_eval.serve.registry.registry import default_registry, is_spec, resolve
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.judge_plan import JudgePlan, ask_judge, default_plan, plan_judge
from esc_eval.sim.judging.judges import select_adapter
from esc_eval.sim.judging.prompts import judge_messages
from esc_eval.sim.judging.window import dialogue_rounds, late_rounds_to_try, windowed
from esc_eval.sim.pool.calls import CallSettings, PlannedModel, check_calls, prepare_calls
from esc_eval.sim.pool.capacity import Demand, estimate_tokens
from esc_eval.sim.pool.job import Job
from esc_eval.sim.pool.outcome import JobOutcome, run_stopped
from esc_eval.sim.pool.participants import ModelPool
from esc_eval.sim.pool.pool import WorkerPool, run_pool
from esc_eval.sim.pool.stats import PoolStats
from esc_eval.sim.runs.official import official_dialogue_files, read_official_dialogues
from esc_eval.sim.runs.open import open_storage
from esc_eval.sim.runs.records import score_row
from esc_eval.sim.runs.runfolder import RunFolder, now_utc
from esc_eval.sim.runs.storage import is_uri, redact_uri
from esc_eval.sim.runs.usage import record_usage

log = logging.getLogger("esc_eval.scoring")
JUDGE_DIALOGUE_TOKENS = 2048  # a dialogue's rendering when none can be read before the run (sizing only)


def judge_call_messages(dim: str, turns: list[tuple[str, str]], language: str, judge_cfg: JudgeConfig) -> list[ChatMessage]:
    """The messages of one judge call (a dimension of a dialogue), as score_dialogue sends them."""
    messages = judge_messages(dim, turns, language, rubric=judge_cfg.rubric, rendering=judge_cfg.rendering,
                              order=judge_cfg.prompt_order)
    if judge_cfg.system_prompt and messages[0].role != "system":
        messages = [ChatMessage(role="system", content=judge_cfg.system_prompt), *messages]
    return messages


async def score_dialogue(turns: list[tuple[str, str]], language: str, judge_cfg: JudgeConfig, model,
                         dimensions: list[str] | None = None, plan: JudgePlan | None = None) -> list[dict[str, Any]]:
    """Score one dialogue on the given dimensions; returns partial score rows (no ids).

    plan: how the calls are made on this backend (sim/judging/judge_plan.py; default: the configured
    method as it always ran). A dimension whose call the spend cap refused gets no row (it is not
    a failure: a resume scores it)."""
    dims = dimensions or judge_cfg.dimensions
    plan = plan or default_plan(judge_cfg)

    n_rounds = len(dialogue_rounds(turns)[1])

    async def one(dim: str) -> dict[str, Any] | None:
        adapter = select_adapter(judge_cfg, dim, language)
        # the whole dialogue; on a refusal for the judge's context, windowed (sim/judging/window.py)
        tries = [n_rounds - 1, *late_rounds_to_try(n_rounds)]
        for i, keep_late in enumerate(tries):
            shown, left_out = windowed(turns, keep_late, language) if i else (turns, 0)
            row: dict[str, Any] = {"dimension": dim, "score": None, "probs": None, "expected": None, "raw": None,
                                   "parse_status": "error", "method": plan.method, "parser": judge_cfg.parser,
                                   "error": None, "prompt_tokens": None, "latency_s": None, "adapter": adapter,
                                   "probs_status": None, "rounds_left_out": left_out}
            try:
                return await ask_judge(model, judge_call_messages(dim, shown, language, judge_cfg),
                                       plan.params or judge_cfg.model.params, plan, judge_cfg.parser, row,
                                       adapter=adapter, raise_overflow=i < len(tries) - 1)
            except ContextOverflowError:
                continue
        return None  # not reached: the last try records its refusal as the row's error

    if judge_cfg.prompt_order != "dialogue_first" or len(dims) < 2:
        return [r for r in await asyncio.gather(*(one(d) for d in dims)) if r is not None]
    # Dialogue first: the prompts of one adapter share the dialogue as a prefix (a LoRA's KV is its
    # own, so only prompts on the same adapter share). Sent together they would all compute it in
    # the same engine step; the first one alone fills the prefix cache, then the rest reuse it.
    groups: dict[str | None, list[str]] = {}
    for d in dims:
        groups.setdefault(select_adapter(judge_cfg, d, language), []).append(d)

    async def staggered(group: list[str]) -> list[dict[str, Any]]:
        first = await one(group[0])
        return [first, *await asyncio.gather(*(one(d) for d in group[1:]))]

    by_dim = {r["dimension"]: r for rs in await asyncio.gather(*(staggered(g) for g in groups.values())) for r in rs
              if r is not None}
    return [by_dim[d] for d in dims if d in by_dim]


class ScoringJob(Job):
    kind = "scores"
    default_concurrency = 8  # dialogues scored at once per worker without GPU engines, as measured on CPUs
    unit = "dialogue scored"

    def __init__(self, cfg: ScoringConfig, plan: JudgePlan | None = None, calls: CallSettings | None = None,
                 excused: set[tuple[str, str]] | None = None, demand: Demand | None = None):
        self.demand = demand  # what a dialogue's judge calls hold in the judge's engine (sim/pool/capacity.py)
        self.calls_per_item = len(cfg.judge.dimensions)  # one judge call per dimension
        self.cfg = cfg
        self.plan = plan  # how the judge's calls are made (None: the configured method as it always ran)
        self.calls = calls  # cache, limits, spend cap (sim/pool/calls.py)
        self.excused = excused if excused is not None else set()  # the driver's: stopped by the cap, owe no row

    async def setup(self, models: ModelPool) -> None:
        models.retain([self.cfg.judge.model])  # the simulation's engines go, unless the judge shares one
        self.judge_model = models.get(self.cfg.judge.model, self.cfg.execution, self.calls)
        await asyncio.to_thread(models.start, self.cfg.judge.model)  # one that cannot start stops the job here

    def demands(self) -> list[tuple[Any, Demand]]:
        return [(self.cfg.judge.model, self.demand)] if self.demand is not None else []

    def after_flush(self, items) -> None:
        pass

    # -- the driver's check that every (dialogue, dimension) sent has its score row -----------
    def item_keys(self, item: dict[str, Any]) -> list[tuple[str, str]]:
        return [(item["dialogue_id"], dim) for dim in item["dimensions"]]

    def present_keys(self, run: RunFolder) -> set[tuple[str, str]]:
        t = run.read("scores", columns=["dialogue_id", "dimension", "judge"])
        judge = self.cfg.judge.judge_id
        return {(d, dim) for d, dim, j in zip(*(t.column(c).to_pylist() for c in ("dialogue_id", "dimension", "judge")))
                if j == judge} | self.excused

    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        judge = self.cfg.judge
        turns = [(t["speaker"], t["text"]) for t in item["turns"]]
        partial = await score_dialogue(turns, item["language"], judge, self.judge_model, item["dimensions"], self.plan)
        rows = [score_row({"run_id": item["run_id"], "dialogue_id": item["dialogue_id"], "target_model": item["target_model"],
                           "language": item["language"], "judge": judge.judge_id, "scored_at": now_utc(), **r})
                for r in partial]
        ok = all(r["parse_status"] == "ok" for r in rows)
        errors = [r["error"] for r in rows if r["parse_status"] == "error"]
        summary = {"ok": ok, "calls": len(rows), "tokens": sum(r["prompt_tokens"] or 0 for r in rows),
                   "rows": len(rows), "unscored": sum(r["score"] is None for r in rows), "errors": len(errors),
                   "error": errors[0] if errors else None}
        if len(rows) < len(item["dimensions"]):  # the spend cap refused a call: the missing dimensions wait for a resume
            scored = {r["dimension"] for r in rows}
            summary["budget_stopped"] = True
            summary["stopped_keys"] = [(item["dialogue_id"], d) for d in item["dimensions"] if d not in scored]
        return rows, summary



def is_run_folder(path: str | Path) -> bool:
    if is_uri(path):
        storage = open_storage(path)
        return storage.exists("manifest.json") or bool(storage.list("dialogues", ".parquet"))
    path = Path(path)
    return (path / "manifest.json").exists() or (path / "dialogues").is_dir()


def prepare_input(input_path: str | Path, out_dir: str | Path | None) -> RunFolder:
    """A run folder to score: the input itself, or (official JSON) a new one holding its dialogues."""
    if is_uri(input_path):  # a run folder in object storage, scored in place
        if out_dir not in (None, input_path):
            raise ValueError(f"{redact_uri(input_path)} is a run folder: score it in place (omit --out)")
        if not is_run_folder(input_path):
            raise FileNotFoundError(f"{redact_uri(input_path)}: no run folder there (no manifest.json or dialogues/)")
        return RunFolder(str(input_path), create=True)
    src = Path(input_path)
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such run folder or official result folder")
    if is_run_folder(src) and out_dir in (None, src):
        return RunFolder(src, create=True)
    run = RunFolder(out_dir or src.with_name(src.name + "-scored"))
    if is_run_folder(src):
        raise ValueError(f"{src} is a run folder: score it in place (omit --out)")
    if not run.parts("dialogues"):
        rows: list[dict[str, Any]] = []
        for f in official_dialogue_files(src):
            rows.extend(read_official_dialogues(f))
        run.write_part("dialogues", rows)
        run.update_manifest(run_id=f"official:{src.name}", source={"official_results": str(src)})
    return run


def iter_scoring_items(run: RunFolder, judge: JudgeConfig, redo_errors: bool = True) -> Iterator[dict[str, Any]]:
    """One item per dialogue (status ok) that still misses some dimension for this judge."""
    done: dict[str, set[str]] = {}
    for r in run.iter_rows("scores", columns=["dialogue_id", "dimension", "judge", "parse_status"]):
        if r["judge"] == judge.judge_id and (r["parse_status"] != "error" or not redo_errors):
            done.setdefault(r["dialogue_id"], set()).add(r["dimension"])
    seen: set[str] = set()
    for d in run.iter_rows("dialogues", columns=["run_id", "dialogue_id", "target_model", "language", "turns", "status"]):
        if d["status"] != "ok" or d["dialogue_id"] in seen:
            continue
        seen.add(d["dialogue_id"])
        missing = [dim for dim in judge.dimensions if dim not in done.get(d["dialogue_id"], set())]
        if missing:
            yield {**d, "dimensions": missing}


def with_registry_adapters(judge: JudgeConfig) -> JudgeConfig:
    """A registry judge as the release ran it, without the config naming anything: its adapters
    (one used on every call; several, as ESC-RANK's, one LoRA per dimension via
    sim.judging.judges.judge_from_registry), its system message (ESC-RANK: InternLM2's meta instruction)
    and its generation defaults for free answers. What the config sets is left as it is."""
    if is_spec(judge.model.model):
        return judge
    entry = default_registry().get(judge.model.model)
    update: dict[str, Any] = {}
    if judge.system_prompt is None and entry.judge_system_prompt:
        update["system_prompt"] = entry.judge_system_prompt
    if not judge.model.params.model_fields_set:
        update["model"] = judge.model.model_copy(update={"params": entry.generation})
    if entry.adapters and not judge.adapters:
        single = default_adapter(entry)
        if single is not None:
            if not judge.model.adapter:
                update["model"] = update.get("model", judge.model).model_copy(update={"adapter": single})
        else:
            from esc_eval.sim.judging.judges import judge_from_registry

            built = judge_from_registry(entry.name, method=judge.method, rubric=judge.rubric, dimensions=judge.dimensions)
            model = built.model.model_copy(update={"params": update.get("model", judge.model).params})
            # keep the id the caller knows this judge by (score rows, --official-out, parse-failure report)
            return built.model_copy(update={**update, "model": model, "parser": judge.parser, "name": judge.judge_id})
    return judge.model_copy(update=update) if update else judge


def judge_plan_for(judge: JudgeConfig) -> JudgePlan:
    """The judge's plan on its backend (without building the model), the fallback logged."""
    spec, implied = resolve(judge.model.model)
    plan = plan_judge(judge, backend_capabilities(spec, **{**implied, **judge.model.options}))
    if plan.note:
        log.warning("%s", plan.note)
    return plan


def expected_seq_tokens(cfg: ScoringConfig, input_path: str | Path | None) -> dict[str, int]:
    """The judge's expected sequence length by the plan's ref key (what a Serve replica of it is
    sized by): its prompt for the input's first completed dialogue plus its answer cap; without a
    run folder to read, the rubric and a dialogue of JUDGE_DIALOGUE_TOKENS."""
    from esc_eval.serve.plan.planner import ref_key

    judge = cfg.judge
    turns, language = [], "en"
    if input_path is not None and is_run_folder(input_path):
        first = next((d for d in RunFolder(str(input_path), create=False).iter_rows(
            "dialogues", columns=["turns", "language", "status"]) if d["status"] == "ok"), None)
        if first is not None:
            turns, language = [(t["speaker"], t["text"]) for t in first["turns"]], first["language"]
    prompt = sum(estimate_tokens(m.content) for m in judge_messages(judge.dimensions[0], turns, language,
                                                                     rubric=judge.rubric, rendering=judge.rendering,
                                                                     order=judge.prompt_order))
    extra = 0 if turns else JUDGE_DIALOGUE_TOKENS
    answer = 1 if judge.method == "logprob" else judge.model.params.max_tokens
    return {ref_key(judge.model.model, judge.model.options): prompt + extra + answer}


def run_scoring(cfg: ScoringConfig, input_path: str | Path, out_dir: str | Path | None = None,
                on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
                on_start: Callable[[int, int], None] | None = None, pool: WorkerPool | None = None) -> dict[str, Any]:
    from esc_eval.sim.jobs.preflight import preflight_run

    preflight_run(scoring=cfg)  # the judge would start (its folder, its config as vLLM resolves it): nothing written
    resolve(cfg.judge.model.model)  # fail on an unknown judge or a missing adapter before reading anything
    cfg = cfg.model_copy(update={"judge": with_registry_adapters(cfg.judge)})
    plan = judge_plan_for(cfg.judge)
    configured_method = cfg.judge.method
    if plan.method == "generate" and configured_method != "generate":  # the fallback: rows and judge id say so
        cfg = cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"method": "generate"})})
    check_calls([PlannedModel(cfg.judge.model, plan.params or cfg.judge.model.params)], cfg.execution, cfg.prices)
    run = prepare_input(input_path, out_dir)
    n_dialogues = sum(1 for d in run.iter_rows("dialogues", columns=["status"]) if d["status"] == "ok")
    if n_dialogues == 0:
        raise ValueError(f"{run}: no completed dialogues to score")
    todo = sum(1 for _ in iter_scoring_items(run, cfg.judge))
    ex = cfg.execution
    outcome = JobOutcome(on_summary)
    first = next(iter_scoring_items(run, cfg.judge), None)
    first_messages = judge_messages(cfg.judge.dimensions[0], [(t["speaker"], t["text"]) for t in first["turns"]],
                                    first["language"], rubric=cfg.judge.rubric, rendering=cfg.judge.rendering,
                                    order=cfg.judge.prompt_order) if first else None
    planned = [PlannedModel(cfg.judge.model, plan.params or cfg.judge.model.params, first_messages)]
    with prepare_calls(planned, ex, cfg.prices, run.location) as calls:  # bad input stops here, before any call
        run.update_manifest(scoring={"config": cfg.model_dump(mode="json"), "judge": cfg.judge.judge_id,
                                     "judge_method": {"configured": configured_method, "used": plan.method,
                                                      "note": plan.note},
                                     "runtime": execution_runtime(ex.dtype, gpu=ex.num_gpus_per_worker > 0)})
        if on_start:
            on_start(n_dialogues, todo)
        started = time.time()
        run.append_event("scoring_start", todo=todo)
        stats = PoolStats()
        if todo:
            params = plan.params or cfg.judge.model.params
            demand = judge_demand(cfg.judge.model.model, sum(estimate_tokens(m.content) for m in first_messages),
                                  1 if plan.reads_logprobs and params.choices else params.max_tokens,
                                  len(first["dimensions"]))
            try:
                stats = run_pool(ScoringJob(cfg, plan, calls, excused=outcome.stopped_keys, demand=demand),
                                 outcome.feed(iter_scoring_items(run, cfg.judge)), run.location, cfg.execution,
                                 on_summary=outcome.on_summary, pool=pool)
            except RunStopError as e:  # the score rows written stay: the same command scores the rest
                raise run_stopped(run, "scoring", e, outcome.items_done, "dialogue") from e
    result = {**stats.as_dict(), "dialogues": n_dialogues, "skipped_done": n_dialogues - todo,
              "wall_s": round(time.time() - started, 3), "run_dir": str(run), "judge": cfg.judge.judge_id,
              "judge_method": plan.method, "outcome": outcome.as_dict("scores"), "api_calls": calls.totals}
    run.append_event("scoring_end", **result)
    run.update_manifest(scoring={"last": result})
    record_usage(run, cfg.prices)  # calls, tokens, engine time and dollars per model and stage
    return result


def judge_demand(judge: str, prompt_tokens: int, answer_cap: int, calls_per_item: int) -> Demand:
    """What a dialogue to score holds on the judge's engine: its judge calls (one per dimension) are
    in flight together, each holding its prompt (the rubric and the dialogue, measured on the first
    dialogue to score) plus its answer cap."""
    return Demand(judge, max(1, calls_per_item), prompt_tokens + answer_cap)
