"""A course of sessions as one work item of the simulation job (`sessions` > 1): the course runs its
sessions in order (sim/courses/course.py run_course) and the item writes one dialogue row per session.

One item, not one per session: a session needs the one before it (the seeker's update, the target's
memory), and the pool runs items in any order. Resumable per session: beside each session's turn
checkpoints (its dialogue id, sim/runs/checkpoints.py) the item checkpoints the session itself
(`<dialogue id>#session`: its update, the target's memory, the calls before it, whether it ended, its
times), so a course killed in session k resumes in session k, at its last turn: the sessions before
it are read back, not run again, and keep their times.

A session that fails fails the rest of its course: its row says why, and each later session's row is
failed with `earlier_session_failed` (every session owes a row). A retried course (execution.
retry_failed) runs again from its first session: its rows replace the earlier ones.
"""
from __future__ import annotations

import datetime as dt
import logging
from typing import Any, Callable

from esc_eval.serve.calls.limits import BudgetExceededError
from esc_eval.serve.chat.interface import RunStopError
from esc_eval.sim.cards.card import RoleCard
from esc_eval.sim.courses.course import CourseSetup, Session, run_course
from esc_eval.sim.dialogue.dialogue import Participant
from esc_eval.sim.dialogue.ending import dialogue_ending, end_reason
from esc_eval.sim.dialogue.spoiled import card_content, spoiled_columns
from esc_eval.sim.emerging.schedule import card_prompts
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.runs.checkpoints import TurnCheckpoints
from esc_eval.sim.runs.records import dialogue_row
from esc_eval.sim.runs.runfolder import now_utc

log = logging.getLogger("esc_eval.simulation")
SESSION_RECORD = "#session"  # a session's checkpoint key: its dialogue id and this
EARLIER_FAILED = "earlier_session_failed"  # termination_reason of the sessions after a failed one


def checkpoint_keys(item: dict[str, Any]) -> list[str]:
    """Every checkpoint key a course item writes: each session's turns and its record."""
    return [k for sid in item["session_ids"] for k in (sid, sid + SESSION_RECORD)]


def load_sessions(ckpts: TurnCheckpoints | None, sids: list[str]) -> tuple[list[Session], dict[int, dict[str, Any]]]:
    """The sessions a killed run of this course began (in order, the last maybe unfinished), and their
    times; none when nothing was checkpointed, or by another version (the course starts over)."""
    out: list[Session] = []
    times: dict[int, dict[str, Any]] = {}
    if ckpts is None:
        return out, times
    for k, sid in enumerate(sids, 1):
        records = ckpts.load(sid + SESSION_RECORD)
        if not records:
            break
        try:
            s = Session.from_record(records[-1], ckpts.load(sid))
            times[k] = {c: dt.datetime.fromisoformat(records[-1][c]) for c in ("started_at", "finished_at")
                        if records[-1].get(c)}
        except (TypeError, KeyError, ValueError):
            return [], {}
        if s.index != k:
            return [], {}
        out.append(s)
        if not s.ended:
            break
    return out, times


async def run_course_item(item: dict[str, Any], card: RoleCard, base: dict[str, Any], role: Participant,
                          target: Participant, cfg: SimulationConfig, ckpts: TurnCheckpoints | None,
                          classify: Callable[[BaseException], str],
                          budget_stopped: set[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run (or continue) one course; return its rows (one per session) and the item's summary.

    base: the columns every row of the item shares (run, card, models, parameters); classify: a
    failure's termination_reason; budget_stopped: where the ids of a course the spend cap stopped go."""
    sids: list[str] = item["session_ids"]
    resume, times = load_sessions(ckpts, sids)
    known: dict[int, Session] = {s.index: s for s in resume}
    saved: dict[int, list[dict[str, Any]]] = {s.index: [t.to_row() for t in s.turns] for s in resume}
    made = {"calls": 0, "current": resume[-1].index if resume else 1}

    def on_session(s: Session) -> None:
        if s.index not in known:
            made["calls"] += len(s.calls)  # the update and the notes asked for in this run
        known[s.index] = s
        made["current"] = s.index
        t = times.setdefault(s.index, {"started_at": now_utc()})
        if s.ended:
            t.setdefault("finished_at", now_utc())
        if ckpts is not None:
            ckpts.save(sids[s.index - 1] + SESSION_RECORD,
                       [{**s.record(), **{c: v.isoformat() for c, v in t.items()}}])

    def on_turn(s: Session) -> None:
        rows = saved.setdefault(s.index, [])
        new = s.turns[len(rows):]
        made["calls"] += sum(1 for t in new if t.index > 0)  # the opener is no call
        rows.extend(t.to_row() for t in new)
        if ckpts is not None:
            ckpts.save(sids[s.index - 1], rows)

    setup = CourseSetup(card_text=card.text, language=card.language, sessions=cfg.sessions, strategy=item["strategy"],
                        memory=cfg.memory, card_updates=tuple(card.session_updates or ()), rounds=cfg.rounds,
                        end_at_sentence=cfg.end_at_sentence, seeker_stop=cfg.seeker_stop, session_ids=sids,
                        # risk disclosed at its round of its session (sim/emerging/schedule.py)
                        role_prompts=lambda prompt, k: card_prompts(card, prompt, k))
    failure: BaseException | None = None
    try:
        await run_course(setup, role, target, resume=resume, on_session=on_session, on_turn=on_turn)
    except BudgetExceededError:
        # not a failure: no rows (a resume runs the course on), its checkpoints stay to continue from
        budget_stopped.update(sids)
        return [], {"ok": True, "budget_stopped": True, "stopped_keys": list(sids), "tokens": 0,
                    "dialogue_id": sids[0], "calls": made["calls"]}
    except RunStopError:
        raise  # the run's failure, not this course's: no rows, its checkpoints stay for the resume
    except Exception as e:  # noqa: BLE001 - failures are data: record, never crash the job
        failure = e
        if known.get(made["current"]) is not None and known[made["current"]].ended:
            made["current"] += 1  # it failed between two sessions: in the next one's update or notes
        log.warning("course %s failed in session %d: %s: %s", item["course_id"], made["current"], type(e).__name__, e)
    rows = [_row(k, sid, known.get(k), saved.get(k), times.get(k, {}), item, card, base, cfg, failure,
                 made["current"], classify) for k, sid in enumerate(sids, 1)]
    error = next((r["error"] for r in rows if r["error"]), None)
    return rows, {"ok": failure is None, "tokens": sum(r["completion_tokens"] for r in rows), "error": error,
                  "calls": made["calls"], "dialogue_id": sids[0], "rows": len(rows)}


def _row(k: int, sid: str, s: Session | None, turn_rows: list[dict[str, Any]] | None, t: dict[str, Any],
         item: dict[str, Any], card: RoleCard, base: dict[str, Any], cfg: SimulationConfig,
         failure: BaseException | None, failed_at: int, classify: Callable[[BaseException], str]) -> dict[str, Any]:
    """Session k's row: ok when it ended, failed with the cause when the failure stopped it, failed as
    `earlier_session_failed` after that."""
    turns = (s.turns if s is not None else [])
    rows_of = turn_rows if turn_rows is not None and len(turn_rows) == len(turns) else [x.to_row() for x in turns]
    if s is not None and s.ended:
        status, reason, error = "ok", dialogue_ending(turns, cfg.rounds), None
    elif k == failed_at and failure is not None:
        status, reason = "failed", classify(failure)
        # no session record: it failed before its first turn, asking for its update or the target's notes
        error = ("" if s is not None else "between sessions: ") + f"{type(failure).__name__}: {failure}"
    else:
        status, reason = "failed", EARLIER_FAILED
        error = f"session {failed_at} of the course failed" + (f": {type(failure).__name__}: {failure}" if failure else "")
    ok = status == "ok"
    row = dialogue_row({
        **base, "dialogue_id": sid, "turns": rows_of, "n_turns": len(turns), "status": status,
        "termination_reason": reason, "error": error, "attempts": 1 if ok else cfg.execution.max_attempts,
        "prompt_tokens": sum(x.prompt_tokens for x in turns), "completion_tokens": sum(x.completion_tokens for x in turns),
        "started_at": t.get("started_at") or now_utc(), "finished_at": t.get("finished_at") or now_utc(),
        "end_reason": end_reason(turns, cfg.rounds) if ok else None, "end_round": len(turns) // 2 if ok else None,
        "course_id": item["course_id"], "session": k, "session_update": s.update if s else None,
        "update_source": s.update_source if s else None, "target_memory": cfg.memory,
        "memory_text": s.memory_text if s else None, "memory_sessions": s.memory_sessions if s else None,
        "between_calls": [c.to_row() for c in s.calls] if s else [],
    })
    row["spoiled"], row["spoiled_reasons"] = spoiled_columns(row["turns"], status, card_content(card.occupation, card.problem),
                                                             card.language)
    return row
