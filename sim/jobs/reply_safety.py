"""Per-reply safety after risk emerged (beyond the paper): a judge job on the pool, like scoring.

For every completed dialogue whose card disclosed risk at a set round (the row's `risk_disclosures`:
sim/cards/emergence.py), each reply of the target from the first disclosure's round to the end is
judged in its context (in a course of sessions, each session's dialogue from its own first disclosure;
a session without one is not rated): the judge reads the dialogue up to that reply and answers two questions about
it (sim/emerging/reply_prompts.py): its safety on the per-reply rubric (0-4; 3 or more is an
appropriate response) and the failure pattern it shows (one of a fixed set). Each answer is a row of
the run folder's `reply_safety` parts (sim/runs/records.py REPLY_SAFETY_SCHEMA), keyed by (dialogue,
reply, question, judge), so a re-run asks only what is missing, the call cache answers what was asked
before, and a failed call is a row with its reason (asked again on the next run), never a silent zero.
A context too long for the judge is windowed as the whole-dialogue judge windows a dialogue
(sim/judging/window.py: the opener, round 1 and the last rounds before the reply; the reply is always
shown), and the row counts the rounds left out.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from esc_eval.serve.chat.interface import ChatMessage, RunStopError
from esc_eval.sim.driver.calls import CallSettings, PlannedModel, check_calls, prepare_calls
from esc_eval.sim.driver.outcome import JobOutcome, run_stopped
from esc_eval.sim.cards.emergence import onset_round
from esc_eval.sim.emerging.patterns import PATTERN, QUESTIONS, SAFETY
from esc_eval.sim.emerging.reply_prompts import pattern_messages, pattern_params, read_pattern, reply_safety_messages
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring_judges import prepared_judges
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.judge_plan import JudgePlan, ask_judge, read_answer
from esc_eval.sim.judging.judges import select_adapter
from esc_eval.sim.judging.window import ask_within_context, dialogue_rounds, windowed
from esc_eval.sim.pool.capacity import Demand, estimate_tokens
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.job import Job
from esc_eval.sim.pool.participants import ModelPool
from esc_eval.sim.pool.pool import WorkerPool, run_pool
from esc_eval.sim.pool.stats import PoolStats
from esc_eval.sim.runs.records import reply_safety_row
from esc_eval.sim.runs.runfolder import RunFolder, now_utc
from esc_eval.sim.runs.usage import record_usage

KIND = "reply_safety"  # the run folder's part kind (sim/runs/runfolder.py)
NO_EMERGING = ("{run}: no completed dialogue discloses risk at a set round: simulate with cards that do "
               "(`cards: emerging_risk`, or cards with `risk_emergence`), then rate their replies")
Turn = tuple[str, str]


def replies_after_onset(turns: list[Turn], disclosures: Any, session: int = 1) -> list[int]:
    """The target's replies (k, from 1) from the first disclosure's round in `session` (the dialogue's
    session of a course; 1 otherwise) on that the dialogue holds; none when it has no disclosure in it."""
    onset = onset_round(disclosures, session)
    if onset is None:
        return []
    n = sum(1 for speaker, _ in turns[1:] if speaker == "assistant")  # the opener (turn 0) is no reply
    return list(range(onset, n + 1))


def split_at_reply(turns: list[Turn], k: int) -> tuple[list[Turn], Turn]:
    """(the turns before the target's k-th reply, that reply): the opener, then a seeker turn and a reply a round."""
    return list(turns[:2 * k]), turns[2 * k]


def messages_for(question: str, context: list[Turn], reply: str, language: str, judge: JudgeConfig) -> list[ChatMessage]:
    """The messages of one question about a reply (a registry judge's system message first, as scoring does)."""
    build = reply_safety_messages if question == SAFETY else pattern_messages
    messages = build(context, reply, language, rendering=judge.rendering)
    if judge.system_prompt and messages[0].role != "system":
        messages = [ChatMessage(role="system", content=judge.system_prompt), *messages]
    return messages


async def rate_reply(turns: list[Turn], k: int, question: str, language: str, judge: JudgeConfig, model,
                     plan: JudgePlan) -> dict[str, Any] | None:
    """Partial row fields of one question about the target's k-th reply; None when the spend cap refused
    the call (a resume asks it)."""
    context, (_, reply) = split_at_reply(turns, k)
    adapter = select_adapter(judge, SAFETY, language)  # as whole-dialogue safety is asked (a registry judge's default)
    params = (plan.params or judge.model.params) if question == SAFETY else (
        pattern_params(plan.method) if plan.reads_logprobs else judge.model.params)

    def read(result):
        fields = read_answer(result, plan, judge.parser) if question == SAFETY else read_pattern(result, plan.reads_logprobs)
        return {**fields, "completion_tokens": result.completion_tokens}  # the manifest's usage counts them

    async def ask(keep_late: int | None, raise_overflow: bool) -> dict[str, Any] | None:
        shown, left_out = (context, 0) if keep_late is None else windowed(context, keep_late, language)
        row = {"reply": k, "question": question, "score": None, "label": None, "probs": None, "expected": None,
               "raw": None, "parse_status": "error", "method": plan.method, "parser": judge.parser, "error": None,
               "prompt_tokens": None, "latency_s": None, "rounds_left_out": left_out, "probs_status": None}
        return await ask_judge(model, messages_for(question, shown, reply, language, judge), params, plan, judge.parser,
                               row, adapter=adapter, raise_overflow=raise_overflow, read=read)

    return await ask_within_context(len(dialogue_rounds(context)[1]), ask)


class ReplySafetyJob(Job):
    """Rates the replies after risk emerged, by every judge of the config (a panel's each apart)."""

    kind = KIND
    default_concurrency = 8
    unit = "dialogue rated"

    def __init__(self, judges: list[JudgeConfig], plans: dict[str, JudgePlan], execution: ExecutionConfig,
                 calls: CallSettings | None = None, excused: set | None = None,
                 demands: list[tuple[Any, Demand]] | None = None):
        self.judges = {j.judge_id: j for j in judges}
        self.execution = execution
        self.plans, self.calls, self.judge_demands = plans, calls, demands or []
        self.excused = excused if excused is not None else set()

    async def setup(self, models: ModelPool) -> None:
        refs = [j.model for j in self.judges.values()]
        models.retain(refs)
        self.models = {jid: models.get(j.model, self.execution, self.calls) for jid, j in self.judges.items()}
        for ref in refs:
            await asyncio.to_thread(models.start, ref)  # one that cannot start stops the job here

    def demands(self) -> list[tuple[Any, Demand]]:
        return list(self.judge_demands)

    def item_keys(self, item: dict[str, Any]) -> list[tuple]:
        return [(item["dialogue_id"], k, q, jid) for jid, todo in item["todo"].items() for k, q in todo]

    def present_keys(self, run: RunFolder) -> set[tuple]:
        return done_keys(run, set(self.judges), redo_errors=False) | self.excused

    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        turns = [(t["speaker"], t["text"] or "") for t in item["turns"]]

        async def one(jid: str, k: int, q: str) -> dict[str, Any] | None:
            partial = await rate_reply(turns, k, q, item["language"], self.judges[jid], self.models[jid], self.plans[jid])
            if partial is None:
                return None
            return reply_safety_row({"run_id": item["run_id"], "dialogue_id": item["dialogue_id"],
                                     "target_model": item["target_model"], "language": item["language"], "judge": jid,
                                     "scored_at": now_utc(), **partial})

        asked = [(jid, k, q) for jid, todo in item["todo"].items() for k, q in todo]
        rows = [r for r in await asyncio.gather(*(one(*a) for a in asked)) if r is not None]
        errors = [r["error"] for r in rows if r["parse_status"] == "error"]
        summary = {"ok": all(r["parse_status"] == "ok" for r in rows), "calls": len(rows), "rows": len(rows),
                   "tokens": sum(r["prompt_tokens"] or 0 for r in rows), "errors": len(errors),
                   "unscored": sum(r["parse_status"] != "ok" for r in rows), "error": errors[0] if errors else None}
        if len(rows) < len(asked):  # the spend cap refused a call: a resume asks it
            got = {(r["judge"], r["reply"], r["question"]) for r in rows}
            summary["budget_stopped"] = True
            summary["stopped_keys"] = [(item["dialogue_id"], k, q, jid) for jid, k, q in asked if (jid, k, q) not in got]
        return rows, summary


def done_keys(run: RunFolder, judges: set[str], redo_errors: bool = True) -> set[tuple]:
    """(dialogue, reply, question, judge) these judges have answered (errors count as not answered when redo_errors)."""
    t = run.read(KIND, columns=["dialogue_id", "reply", "question", "judge", "parse_status"])
    cols = [t.column(c).to_pylist() for c in ("dialogue_id", "reply", "question", "judge", "parse_status")]
    return {(d, k, q, j) for d, k, q, j, status in zip(*cols)
            if j in judges and not (redo_errors and status == "error")}


def replies_of(item: dict[str, Any]) -> set[int]:
    return {k for todo in item["todo"].values() for k, _ in todo}


def reply_items(run: RunFolder, judges: list[JudgeConfig], done: set[tuple]) -> Iterator[dict[str, Any]]:
    """One item per completed dialogue with risk disclosed whose replies after it some judge still owes:
    its turns and `todo`, judge id -> [(reply, question), ...]."""
    # read (not iter_rows) for the schedule: parts written before the column read it as null
    head = run.read("dialogues", columns=["dialogue_id", "status", "risk_disclosures", "session"]).to_pylist()
    # a course's session k is rated from its own first disclosure (none in it: not rated)
    schedule = {d["dialogue_id"]: (d["risk_disclosures"], d["session"] or 1) for d in head
                if d["status"] == "ok" and d["risk_disclosures"]}
    if not schedule:
        return
    for d in run.iter_rows("dialogues", columns=["run_id", "dialogue_id", "target_model", "language", "turns", "status"]):
        if d["status"] != "ok" or d["dialogue_id"] not in schedule:
            continue
        turns = [(t["speaker"], t["text"] or "") for t in d["turns"]]
        replies = replies_after_onset(turns, *schedule[d["dialogue_id"]])
        todo = {j.judge_id: missing for j in judges
                if (missing := [(k, q) for k in replies for q in QUESTIONS
                                if (d["dialogue_id"], k, q, j.judge_id) not in done])}
        if todo:
            yield {k: d[k] for k in ("run_id", "dialogue_id", "target_model", "language", "turns")} | {"todo": todo}


def run_reply_safety(cfg: ScoringConfig, input_path: str | Path,
                     on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
                     on_start: Callable[[int, int], None] | None = None, pool: WorkerPool | None = None) -> dict[str, Any]:
    """Rate the replies after risk emerged in the run folder `input_path` with the config's judge (or
    each of its panel), into its `reply_safety` parts; resumable (see the module docstring). Bad input
    (no such run, no dialogue with risk that emerges, a judge that cannot run) stops in one line first."""
    cfg, plans, methods = prepared_judges(cfg)
    judges = cfg.judges
    run = RunFolder(str(input_path), create=False)
    first = next(reply_items(run, judges, set()), None)
    if first is None:
        raise ValueError(NO_EMERGING.format(run=run))
    turns = [(t["speaker"], t["text"] or "") for t in first["turns"]]
    k = next(iter(first["todo"].values()))[0][0]
    context, (_, reply) = split_at_reply(turns, k)
    planned = []
    for j in judges:
        first_messages = messages_for(PATTERN, context, reply, first["language"], j)
        planned.append(PlannedModel(j.model, plans[j.judge_id].params or j.model.params, first_messages))
    check_calls(planned, cfg.execution, cfg.prices)  # keys, providers, limits: before anything is written
    run = RunFolder(str(input_path), create=True)
    ids = {j.judge_id for j in judges}
    n_dialogues = sum(1 for _ in reply_items(run, judges, set()))
    todo = sum(1 for _ in reply_items(run, judges, done_keys(run, ids)))
    outcome, stats, started = JobOutcome(on_summary), PoolStats(), time.time()
    with prepare_calls(planned, cfg.execution, cfg.prices, run.location) as calls:
        run.update_manifest(reply_safety={"config": cfg.model_dump(mode="json"), "judges": sorted(ids),
                                          "judge_methods": methods,
                                          "judge_models": {j.judge_id: j.model.model for j in judges}})
        if on_start:
            on_start(n_dialogues, todo)
        run.append_event("reply_safety_start", todo=todo)
        if todo:
            # a dialogue's calls in flight on a judge's engine: both questions of each reply rated, each its prompt
            demands = [(p.ref, Demand(p.ref.model, len(QUESTIONS) * len(replies_of(first)),
                                      sum(estimate_tokens(m.content) for m in p.first_messages) + 8)) for p in planned]
            job = ReplySafetyJob(judges, plans, cfg.execution, calls, excused=outcome.stopped_keys, demands=demands)
            try:
                stats = run_pool(job, outcome.feed(reply_items(run, judges, done_keys(run, ids))), run.location,
                                 cfg.execution, on_summary=outcome.on_summary, pool=pool)
            except RunStopError as e:  # the rows written stay: the same command rates the rest
                raise run_stopped(run, KIND, e, outcome.items_done, "dialogue") from e
    result = {**stats.as_dict(), "dialogues": n_dialogues, "skipped_done": n_dialogues - todo,
              "wall_s": round(time.time() - started, 3), "run_dir": str(run), "judge": judges[0].judge_id,
              "judges": sorted(ids), "judge_method": methods[judges[0].judge_id]["used"],
              "outcome": outcome.as_dict("scores"), "api_calls": calls.totals}
    run.append_event("reply_safety_end", **result)
    run.update_manifest(reply_safety={"last": result})
    record_usage(run, cfg.prices)  # the judge's calls and tokens beside the other jobs' (stage reply_safety)
    return result


def reply_parse_failures(run_dir: str | Path, judge: str) -> list[dict[str, Any]]:
    """Per (target model, question) of one judge: answers that did not become a score or a label, worst first
    (only those with some), in the layout `esc-eval score` shows (dimension = reply_<question>)."""
    t = RunFolder(str(run_dir), create=False).read(KIND, columns=["target_model", "question", "judge", "parse_status"])
    counts: dict[tuple[str, str], list[int]] = {}
    for model, q, j, status in zip(*(t.column(c).to_pylist() for c in ("target_model", "question", "judge", "parse_status"))):
        if j == judge:
            c = counts.setdefault((model, q), [0, 0, 0])
            c[0] += 1
            c[1] += status == "parse_failure"
            c[2] += status == "error"
    rows = [{"judge": judge, "target_model": m, "dimension": f"reply_{q}", "n_scores": n, "parse_failures": p,
             "errors": e, "failure_rate": (p + e) / n} for (m, q), (n, p, e) in counts.items() if p + e]
    return sorted(rows, key=lambda r: -r["failure_rate"])


__all__ = ["KIND", "ReplySafetyJob", "done_keys", "rate_reply", "replies_after_onset", "reply_items",
           "reply_parse_failures", "run_reply_safety", "split_at_reply"]
