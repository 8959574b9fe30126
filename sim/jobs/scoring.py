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

from esc_eval.serve.chat.interface import ChatMessage, RunStopError
from esc_eval.sim.courses.continuity import continuity_messages, earlier_sessions
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.dimensions import CONTINUITY
from esc_eval.sim.jobs.scoring_judges import prepared_judges
from esc_eval.sim.jobs.scoring_record import record_scoring
from esc_eval.sim.judging.judge_plan import JudgePlan, ask_judge, default_plan
from esc_eval.sim.judging.judges import select_adapter
from esc_eval.sim.judging.one_call import one_call_messages, plan_one_call, score_one_call
from esc_eval.sim.judging.prompts import judge_messages, reply_messages
from esc_eval.sim.judging.window import ask_within_context, dialogue_rounds, windowed
from esc_eval.sim.driver.calls import CallSettings, PlannedModel, check_calls, prepare_calls
from esc_eval.sim.pool.capacity import Demand, estimate_tokens
from esc_eval.sim.pool.job import Job
from esc_eval.sim.driver.outcome import JobOutcome, run_stopped
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


def judge_call_messages(dim: str, turns: list[tuple[str, str]], language: str, judge_cfg: JudgeConfig,
                        earlier: list[tuple[str, str]] | None = None) -> list[ChatMessage]:
    """The messages of one judge call (a dimension of a dialogue; with rubric_mode one_call, the call of
    all the judge's dimensions), as score_dialogue sends them; a per-reply judge (reads 'reply') rates
    the last turn in the context of the turns before it; continuity shows the previous session
    (`earlier`) before it (sim/courses/continuity.py)."""
    if judge_cfg.rubric_mode == "one_call":
        return one_call_messages(judge_cfg.dimensions, turns, language, judge_cfg)
    if dim == CONTINUITY:
        messages = continuity_messages(earlier or [], turns, language, rubric=judge_cfg.rubric,
                                       rendering=judge_cfg.rendering, order=judge_cfg.prompt_order)
    elif judge_cfg.reads == "reply" and turns:
        messages = reply_messages(dim, turns[:-1], turns[-1][1], language, rendering=judge_cfg.rendering,
                                  order=judge_cfg.prompt_order)
    else:
        messages = judge_messages(dim, turns, language, rubric=judge_cfg.rubric, rendering=judge_cfg.rendering,
                                  order=judge_cfg.prompt_order)
    if judge_cfg.system_prompt and messages[0].role != "system":
        messages = [ChatMessage(role="system", content=judge_cfg.system_prompt), *messages]
    return messages


async def score_dialogue(turns: list[tuple[str, str]], language: str, judge_cfg: JudgeConfig, model,
                         dimensions: list[str] | None = None, plan: JudgePlan | None = None,
                         earlier: list[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """Score one dialogue on the given dimensions; returns partial score rows (no ids).

    earlier: the previous session of a course's later session, which continuity reads too.

    plan: how the calls are made on this backend (sim/judging/judge_plan.py; default: the configured
    method as it always ran). A dimension whose call the spend cap refused gets no row (it is not
    a failure: a resume scores it)."""
    dims = dimensions or judge_cfg.dimensions
    if judge_cfg.rubric_mode == "one_call":  # every dimension in one call (sim/judging/one_call)
        return await score_one_call(turns, language, judge_cfg, model, dims,
                                    plan or plan_one_call(judge_cfg, model.capabilities))
    plan = plan or default_plan(judge_cfg)

    reply = judge_cfg.reads == "reply"
    # a per-reply judge windows the context before the reply (the reply itself is always shown)
    context, rated = (turns[:-1], turns[-1:]) if reply else (turns, [])
    n_rounds = len(dialogue_rounds(context)[1])

    def blank(dim: str, adapter: str | None, left_out: int) -> dict[str, Any]:
        return {"dimension": dim, "score": None, "probs": None, "expected": None, "raw": None,
                "parse_status": "error", "method": plan.method, "parser": judge_cfg.parser, "error": None,
                "prompt_tokens": None, "latency_s": None, "adapter": adapter, "probs_status": None,
                "rounds_left_out": left_out, "rubric_mode": "per_dimension"}

    async def one(dim: str) -> dict[str, Any] | None:
        adapter = select_adapter(judge_cfg, dim, language)
        if reply and (not rated or rated[0][0] != "assistant"):  # an item's failure is its row, never a crash
            return {**blank(dim, adapter, 0), "error": "no reply to rate: the dialogue does not end with the assistant's turn"}

        async def ask(keep_late: int | None, raise_overflow: bool) -> dict[str, Any] | None:
            # the whole dialogue; on a refusal for the judge's context, windowed (sim/judging/window.py)
            shown, left_out = (context, 0) if keep_late is None else windowed(context, keep_late, language)
            return await ask_judge(model, judge_call_messages(dim, [*shown, *rated], language, judge_cfg, earlier),
                                   plan.params or judge_cfg.model.params, plan, judge_cfg.parser,
                                   blank(dim, adapter, left_out), adapter=adapter, raise_overflow=raise_overflow)

        return await ask_within_context(n_rounds, ask)

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
    """Scores dialogues with the config's judge, or every judge of its panel in the same pass: an item
    is one dialogue and the (judge, dimensions) it still misses; each judge's rows carry its own id."""

    kind = "scores"
    default_concurrency = 8  # dialogues scored at once per worker without GPU engines, as measured on CPUs
    unit = "dialogue scored"

    def __init__(self, cfg: ScoringConfig, plans: dict[str, JudgePlan] | None = None, calls: CallSettings | None = None,
                 excused: set[tuple[str, str, str]] | None = None, demands: list[tuple[Any, Demand]] | None = None):
        self.cfg = cfg
        self.judges = {j.judge_id: j for j in cfg.judges}
        self.plans = plans or {}  # judge id -> how its calls are made (absent: the configured method as it always ran)
        self.judge_demands = demands or []  # (judge ref, what a dialogue's calls hold in its engine: sim/pool/capacity.py)
        self.calls_per_item = sum(calls_per_dialogue(j) for j in cfg.judges)  # per judge: one a dimension, or one
        self.calls = calls  # cache, limits, spend cap (sim/driver/calls.py)
        self.excused = excused if excused is not None else set()  # the driver's: stopped by the cap, owe no row

    async def setup(self, models: ModelPool) -> None:
        refs = [j.model for j in self.judges.values()]
        models.retain(refs)  # the simulation's engines go, unless a judge shares one
        self.judge_models = {jid: models.get(j.model, self.cfg.execution, self.calls) for jid, j in self.judges.items()}
        for ref in refs:
            await asyncio.to_thread(models.start, ref)  # one that cannot start stops the job here

    def demands(self) -> list[tuple[Any, Demand]]:
        return list(self.judge_demands)

    def after_flush(self, items) -> None:
        pass

    # -- the driver's check that every (dialogue, judge, dimension) sent has its score row ----
    def item_keys(self, item: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [(item["dialogue_id"], jid, dim) for jid, dims in item["todo"].items() for dim in dims]

    def present_keys(self, run: RunFolder) -> set[tuple[str, str, str]]:
        t = run.read("scores", columns=["dialogue_id", "dimension", "judge"])
        return {(d, j, dim) for d, dim, j in zip(*(t.column(c).to_pylist() for c in ("dialogue_id", "dimension", "judge")))
                if j in self.judges} | self.excused

    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        turns = [(t["speaker"], t["text"]) for t in item["turns"]]

        async def by(jid: str, dims: list[str]) -> list[dict[str, Any]]:
            partial = await score_dialogue(turns, item["language"], self.judges[jid], self.judge_models[jid], dims,
                                           self.plans.get(jid), item.get("earlier"))
            return [score_row({"run_id": item["run_id"], "dialogue_id": item["dialogue_id"],
                               "target_model": item["target_model"], "language": item["language"], "judge": jid,
                               "scored_at": now_utc(), **r}) for r in partial]

        # a panel's judges score the dialogue at once: each judge's engine batches its own calls
        rows = [r for rs in await asyncio.gather(*(by(j, d) for j, d in item["todo"].items())) for r in rs]
        ok = all(r["parse_status"] == "ok" for r in rows)
        errors = [r["error"] for r in rows if r["parse_status"] == "error"]
        # a one-call's rows (a dimension each) are one call: counted once, with its prompt
        calls = list({(r["judge"], r["dimension"] if r.get("rubric_mode") != "one_call" else None): r
                      for r in rows}.values())
        summary = {"ok": ok, "calls": len(calls), "tokens": sum(r["prompt_tokens"] or 0 for r in calls),
                   "rows": len(rows), "unscored": sum(r["score"] is None for r in rows), "errors": len(errors),
                   "error": errors[0] if errors else None}
        scored = {(r["judge"], r["dimension"]) for r in rows}
        stopped = [(item["dialogue_id"], j, d) for j, dims in item["todo"].items() for d in dims if (j, d) not in scored]
        if stopped:  # the spend cap refused a call: the missing dimensions wait for a resume
            summary["budget_stopped"] = True
            summary["stopped_keys"] = stopped
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


def earlier_of(run: RunFolder, judges: list[JudgeConfig]) -> dict[str, list[tuple[str, str]]]:
    """Each later session of a course -> its previous session's turns (sim/courses/continuity.py); read
    only when a judge scores continuity. ValueError in one line when one does and the run has none."""
    if not any(CONTINUITY in j.dimensions for j in judges):
        return {}
    found = earlier_sessions(run.iter_rows("dialogues", columns=["dialogue_id", "course_id", "session", "status", "turns"]))
    if not found:
        raise ValueError(f"{run}: continuity scores the later sessions of a course, and it has none "
                         "(simulate with sessions > 1)")
    return found


def iter_scoring_items(run: RunFolder, judges: list[JudgeConfig], redo_errors: bool = True,
                       earlier: dict[str, list[tuple[str, str]]] | None = None) -> Iterator[dict[str, Any]]:
    """One item per dialogue (status ok) that still misses some dimension of some judge: its `todo`,
    judge id -> the dimensions that judge still owes it. Continuity is owed by a course's later
    sessions only (`earlier`: earlier_of's, read here when not given), which carry their previous one."""
    earlier = earlier_of(run, judges) if earlier is None else earlier
    done: dict[tuple[str, str], set[str]] = {}
    ids = {j.judge_id for j in judges}
    for r in run.iter_rows("scores", columns=["dialogue_id", "dimension", "judge", "parse_status"]):
        if r["judge"] in ids and (r["parse_status"] != "error" or not redo_errors):
            done.setdefault((r["dialogue_id"], r["judge"]), set()).add(r["dimension"])
    seen: set[str] = set()
    for d in run.iter_rows("dialogues", columns=["run_id", "dialogue_id", "target_model", "language", "turns", "status"]):
        if d["status"] != "ok" or d["dialogue_id"] in seen:
            continue
        seen.add(d["dialogue_id"])
        todo = {j.judge_id: missing for j in judges
                if (missing := [dim for dim in j.dimensions if dim not in done.get((d["dialogue_id"], j.judge_id), set())
                                and (dim != CONTINUITY or d["dialogue_id"] in earlier)])}
        if todo:
            yield {**d, "todo": todo, **({"earlier": earlier[d["dialogue_id"]]} if d["dialogue_id"] in earlier else {})}


def _first_dialogue(input_path: str | Path | None) -> tuple[list[tuple[str, str]], str]:
    """The turns and language of the input's first completed dialogue ([], "en" without one)."""
    if input_path is not None and is_run_folder(input_path):
        first = next((d for d in RunFolder(str(input_path), create=False).iter_rows(
            "dialogues", columns=["turns", "language", "status"]) if d["status"] == "ok"), None)
        if first is not None:
            return [(t["speaker"], t["text"]) for t in first["turns"]], first["language"]
    return [], "en"


def expected_seq_tokens(cfg: ScoringConfig, input_path: str | Path | None) -> dict[str, int]:
    """Each judge's expected sequence length by the plan's ref key (what a Serve replica of it is
    sized by): its prompt for the input's first completed dialogue plus its answer cap; without a
    run folder to read, the rubric and a dialogue of JUDGE_DIALOGUE_TOKENS."""
    from esc_eval.serve.plan.planner import ref_key

    turns, language = _first_dialogue(input_path)
    out: dict[str, int] = {}
    for judge in cfg.judges:
        prompt = sum(estimate_tokens(m.content) for m in judge_call_messages(judge.dimensions[0], turns, language, judge))
        extra = 0 if turns else JUDGE_DIALOGUE_TOKENS
        answer = 1 if judge.method == "logprob" else judge.model.params.max_tokens
        key = ref_key(judge.model.model, judge.model.options)
        out[key] = max(out.get(key, 0), prompt + extra + answer)
    return out


def run_scoring(cfg: ScoringConfig, input_path: str | Path, out_dir: str | Path | None = None,
                on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
                on_start: Callable[[int, int], None] | None = None, pool: WorkerPool | None = None) -> dict[str, Any]:
    """Score the input's dialogues with the judge, or with every judge of the panel in one pass (each
    judge's rows apart under its id, each resumable on its own); returns the job's summary."""
    from esc_eval.sim.jobs.preflight import preflight_run

    if cfg.batch.enabled:  # e.g. a demo config asking for batches: they are `score --batch`'s (sim/batching)
        raise ValueError("scoring.batch.enabled: provider batches are sent by `esc-eval score --batch`; this job "
                         "scores online (set batch.enabled: false here)")
    preflight_run(scoring=cfg)  # every judge would start (its folder, its config as vLLM resolves it): nothing written
    cfg, plans, methods = prepared_judges(cfg)
    judges = cfg.judges
    check_calls([PlannedModel(j.model, plans[j.judge_id].params or j.model.params) for j in judges], cfg.execution,
                cfg.prices)
    run = prepare_input(input_path, out_dir)
    n_dialogues = sum(1 for d in run.iter_rows("dialogues", columns=["status"]) if d["status"] == "ok")
    if n_dialogues == 0:
        raise ValueError(f"{run}: no completed dialogues to score")
    earlier = earlier_of(run, judges)  # continuity without a later session: one line, nothing scored
    todo = sum(1 for _ in iter_scoring_items(run, judges, earlier=earlier))
    ex = cfg.execution
    outcome = JobOutcome(on_summary)
    first = next(iter_scoring_items(run, judges, earlier=earlier), None)
    first_turns = [(t["speaker"], t["text"]) for t in first["turns"]] if first else []
    first_messages = {j.judge_id: judge_call_messages(j.dimensions[0], first_turns, first["language"], j) if first else None
                      for j in judges}
    planned = [PlannedModel(j.model, plans[j.judge_id].params or j.model.params, first_messages[j.judge_id])
               for j in judges]
    first_id = judges[0].judge_id
    with prepare_calls(planned, ex, cfg.prices, run.location) as calls:  # bad input stops here, before any call
        record_scoring(run, cfg, methods)
        if on_start:
            on_start(n_dialogues, todo)
        started = time.time()
        run.append_event("scoring_start", todo=todo)
        stats = PoolStats()
        if todo:
            demands = []
            for j in judges:
                params = plans[j.judge_id].params or j.model.params
                demands.append((j.model, judge_demand(j.model.model, sum(estimate_tokens(m.content)
                                                                         for m in first_messages[j.judge_id]),
                                                      1 if plans[j.judge_id].reads_logprobs and params.choices
                                                      else params.max_tokens, calls_per_dialogue(j))))
            try:
                stats = run_pool(ScoringJob(cfg, plans, calls, excused=outcome.stopped_keys, demands=demands),
                                 outcome.feed(iter_scoring_items(run, judges, earlier=earlier)), run.location, cfg.execution,
                                 on_summary=outcome.on_summary, pool=pool)
            except RunStopError as e:  # the score rows written stay: the same command scores the rest
                raise run_stopped(run, "scoring", e, outcome.items_done, "dialogue") from e
    result = {**stats.as_dict(), "dialogues": n_dialogues, "skipped_done": n_dialogues - todo,
              "wall_s": round(time.time() - started, 3), "run_dir": str(run), "judge": first_id,
              "judges": [j.judge_id for j in judges], "judge_method": methods[first_id]["used"],
              "outcome": outcome.as_dict("scores"), "api_calls": calls.totals}
    run.append_event("scoring_end", **result)
    run.update_manifest(scoring={"last": result})
    record_usage(run, cfg.prices)  # calls, tokens, engine time and dollars per model and stage
    return result


def calls_per_dialogue(judge: JudgeConfig) -> int:
    """A judge's calls per dialogue: one per dimension (the paper's), or one (rubric_mode one_call)."""
    return 1 if judge.rubric_mode == "one_call" else len(judge.dimensions)


def judge_demand(judge: str, prompt_tokens: int, answer_cap: int, calls_per_item: int) -> Demand:
    """What a dialogue to score holds on a judge's engine: its judge calls (one per dimension) are
    in flight together, each holding its prompt (the rubric and the dialogue, measured on the first
    dialogue to score) plus its answer cap."""
    return Demand(judge, max(1, calls_per_item), prompt_tokens + answer_cap)
