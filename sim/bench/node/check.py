"""`esc-eval check`: what a lab runs on a new node, and what we run the moment a GPU is at hand. Six
steps in order, each in its own process with its own deadline (sim/bench/node/steps.py holds them):

  machine     GPUs, driver, CUDA, torch, vLLM and Ray found and checked against each other
  plan        the config planned as `esc-eval plan` plans it
  engines     every engine of the config started in the default mode and answering once
  workload    `bench gpu` small: scoring in both prompt orders, the simulation (role and target on one
              GPU), ours through the default path next to the references, on distinct inputs
  bad_engine  a judge folder naming an architecture vLLM lacks: stopped, its cause named, no rows
  demo        `esc-eval demo` on the embedded model (CUDA in bf16 on a GPU node)

Budget (`budget_min`): the machine and plan steps get a fixed share (FIXED_S), the rest is split by
WEIGHTS; a step's deadline is where its share ends on the check's clock, so a step that ends early
leaves its time to the next and the whole check ends within the budget. A step past its deadline is
killed with its process group (engines, Ray workers it started) and recorded as stopped, with what
it had noted; a step whose input failed (engines without a plan) is skipped, the others still run.
Bad input stops before anything starts, one line, nothing written: a machine that contradicts itself
(the machine step's refusal) and a budget whose engines share cannot hold the engines it starts, or
whose workload or demo share not the first (engine_starts, each estimated by engine_start_s from the
model's size and the device). A share that holds only some of a step's engine-starting parts is said
in the budget's notes, with the budget that holds them all.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Literal, Optional

from pydantic import BaseModel, Field

from esc_eval.serve.registry.ref import DEFAULT_MODEL

StepName = Literal["machine", "plan", "engines", "workload", "bad_engine", "demo"]
TITLES: dict[str, str] = {
    "machine": "GPUs, driver, CUDA, torch, vLLM, Ray checked against each other",
    "plan": "the config planned (esc-eval plan)",
    "engines": "every engine started in the default mode, answering",
    "workload": "scoring (both orders) and simulation, ours vs the references",
    "bad_engine": "an engine that cannot start: cause named, no rows",
    "demo": "the embedded model's demo",
}
STEPS: tuple[str, ...] = tuple(TITLES)
FIXED_S = {"machine": 30.0, "plan": 30.0}
# engines first: its share must hold its starts (on one GPU the random-weight 13B role and 7B target one after
# the other, then the 7B judge: ~170 s of a 9-minute check's 240); the workload keeps what its share measured
WEIGHTS = {"engines": 0.50, "workload": 0.31, "bad_engine": 0.04, "demo": 0.15}
NEEDS = {"plan": "machine", "engines": "plan", "workload": "engines", "bad_engine": "machine", "demo": "machine"}
# What the small workload is on each device: a GPU measures in seconds; the CPU proves the path.
SIZES = {"gpu": {"dialogues": 64, "sim_dialogues": 16, "max_tokens": 64, "dimensions": None, "demo_cards": 2},
         "cpu": {"dialogues": 2, "sim_dialogues": 2, "max_tokens": 8, "dimensions": ["Fluency", "Empathy"], "demo_cards": 1}}
KILL_GRACE_S = 10.0
STEP_MODULE = "esc_eval.sim.bench.node.steps"  # what each step's process runs (`python -m`)
MIN_STEP_S = 5.0  # a step with less of its share left is skipped, not started to be killed
CHECK_BUDGET_MIN = 9.0  # minutes for the whole check: sized for one H100/H200 with the random-weight 7B judge/target and 13B role


class CheckInputError(ValueError):
    """Bad input to `esc-eval check` (one line; nothing started, nothing written)."""


class NodeCheckConfig(BaseModel):
    """What `esc-eval check` runs."""

    judge: str = Field(DEFAULT_MODEL, description="Judge of the scoring steps (registry name or vllm/ spec).")
    role: str = Field(DEFAULT_MODEL, description="Role-play model of the simulation steps.")
    target: str = Field(DEFAULT_MODEL, description="Model under test of the simulation steps.")
    budget_min: float = Field(CHECK_BUDGET_MIN, gt=0, description="Minutes the whole check may take; each step gets its share "
                              "(sim/bench/node/check.py) and is killed past it.")
    steps: list[StepName] = Field(default_factory=lambda: list(STEPS), min_length=1,
                                  description="Steps to run (the machine step always runs first).")
    source: Optional[str] = Field(None, description="Dialogues the scoring steps use: run folder or official JSON "
                                  "(default: ../shared's samples, else runs/demo, else made-up dialogues).")
    cards: Optional[str] = Field(None, description="Role cards the simulation steps use (default: ../shared's, else "
                                 "the shipped samples).")
    max_tokens: Optional[int] = Field(None, ge=1, description="Max new tokens per turn in the simulation steps "
                                      "(default: 64 on a GPU, 8 on the CPU; random weights always reach it).")


def engine_start_s(params: float | None, device: str) -> float:
    """A rough time for one engine start (load, profile, KV cache, compile and CUDA graphs on a GPU):
    the floor the budget must leave the engines step. Fitted to the one GPU start timed alone (a 13.1B,
    26.2 GB in bf16, in 67 s on an H100, ../shared/notes/gpu-h100.md) and this CPU (the 135M embedded
    model in 23-45 s, eager)."""
    gb = 2 * (params or 1e9) / 1e9  # bf16 weights
    return 30.0 + 1.4 * gb if device == "gpu" else 30.0 + 20.0 * gb


def planned_ends(budget_s: float, steps: list[str]) -> dict[str, float]:
    """Seconds on the check's clock by which each step must end: fixed shares first, the rest by weight
    among the steps asked for (the last ends at the budget)."""
    fixed = sum(FIXED_S[s] for s in steps if s in FIXED_S)
    weights = {s: WEIGHTS[s] for s in steps if s in WEIGHTS}
    rest, total_w = max(0.0, budget_s - fixed), sum(weights.values()) or 1.0
    ends, clock = {}, 0.0
    for s in steps:
        clock += FIXED_S[s] if s in FIXED_S else rest * weights[s] / total_w
        ends[s] = min(clock, budget_s)
    return ends


def engine_starts(models: dict[str, str]) -> dict[str, list[tuple[str, list[str]]]]:
    """The engines each step starts, in the order it starts them: (part, distinct models started for
    it). engines: the simulation's role and target, then the judge; workload (`bench gpu`): ours'
    simulation, ours' judge once per prompt order (as `score` deploys it), the references' simulation
    engines and their offline judge; demo: the embedded model; bad_engine stops before its engine.
    Every start is counted one after another: on one GPU the replicas sharing it take turns
    (serve/app/gpu_share.py), and on a CPU the engines share its cores."""
    sim = sorted({models["role"], models["target"]})
    judge = [models["judge"]]
    return {"engines": [("simulation", sim), ("scoring", judge)],
            "workload": [("simulation.ours", sim), ("scoring.rubric_first.ours", judge),
                         ("scoring.dialogue_first.ours", judge), ("simulation.reference", sim),
                         ("scoring.reference", judge)],
            "demo": [("demo", ["vllm/embedded"])]}


def _min_budget(step: str, need: float, steps: list[str]) -> float:
    """The budget (s) whose share for `step` holds `need` seconds."""
    fixed = sum(FIXED_S[s] for s in steps if s in FIXED_S)
    return fixed + need * sum(WEIGHTS[x] for x in steps if x in WEIGHTS) / WEIGHTS[step]


def check_budget(budget_s: float, steps: list[str], models: dict[str, str], device: str) -> dict[str, Any]:
    """The budget's plan: each step's share, the engine starts it makes (engine_starts, each estimated by
    engine_start_s) and how many of its parts the share holds. CheckInputError when the engines step
    cannot hold its starts, or the workload or demo step not even its first part: that line says which
    step needs what, and the budget that holds every step's starts."""
    from esc_eval.sim.bench.gpu.hardware import model_params

    starts = {s: parts for s, parts in engine_starts(models).items() if s in steps}
    sizes = {m: model_params(m) for parts in starts.values() for _, ms in parts for m in ms}
    est = {m: round(engine_start_s(sizes[m], device)) for m in sizes}
    ends = planned_ends(budget_s, steps)
    shares, before = {}, 0.0
    for s in steps:
        shares[s], before = round(ends[s] - before), ends[s]
    plan: dict[str, Any] = {}
    must: dict[str, int] = {}  # parts a step's share must hold: the engines step all, the others their first
    for s, parts in starts.items():
        needs = [sum(est[m] for m in ms) for _, ms in parts]
        held = next((i for i in range(len(needs)) if sum(needs[:i + 1]) > shares[s]), len(needs))
        plan[s] = {"parts": [{"part": p, "models": ms, "start_s": n} for (p, ms), n in zip(parts, needs)],
                   "start_s": sum(needs), "share_s": shares[s], "parts_held": held}
        must[s] = len(parts) if s == "engines" else 1
    every = max((_min_budget(s, p["start_s"], steps) for s, p in plan.items()), default=budget_s)
    short = {s: plan[s]["parts"][:must[s]] for s in plan if plan[s]["parts_held"] < must[s]}
    if short:
        lines = []
        for s, parts in short.items():
            what = ", ".join(f"{x['part']} ~{x['start_s']} s" for x in parts)
            lines.append(f"the {s} step needs ~{sum(x['start_s'] for x in parts)} s of engine starts on the {device} "
                         f"({what}) and would get {plan[s]['share_s']} s")
        least = max(_min_budget(s, sum(x["start_s"] for x in parts), steps) for s, parts in short.items())
        raise CheckInputError(f"--budget-min {budget_s / 60:g}: too small: {'; '.join(lines)}; give at least "
                              f"--budget-min {least / 60:.1f} (every step's engine starts: {every / 60:.1f})")
    notes = [f"the {s} step's {p['share_s']} s hold {p['parts_held']} of its {len(p['parts'])} engine-starting parts "
             f"(~{p['start_s']} s of starts); the rest is cut at its deadline" for s, p in plan.items()
             if p["parts_held"] < len(p["parts"])]
    if notes:
        notes.append(f"--budget-min {every / 60:.1f} holds every step's engine starts")
    return {"minutes": budget_s / 60, "seconds": budget_s, "engine_start_estimate_s": est, "step_seconds": shares,
            "engine_starts": plan, "notes": notes}


def _run_step(name: str, ctx: dict[str, Any], folder: Path, deadline_s: float) -> dict[str, Any]:
    """One step in its own process group, killed at its deadline; its result file as it was left."""
    step_dir = folder / name
    step_dir.mkdir(parents=True, exist_ok=True)
    ctx_path, out_path, log_path = step_dir / "context.json", step_dir / "result.json", step_dir / "step.log"
    ctx_path.write_text(json.dumps({**ctx, "work": str(step_dir)}))
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", STEP_MODULE, name, str(ctx_path), str(out_path)],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=max(1.0, deadline_s))
            stopped = False
        except subprocess.TimeoutExpired:
            stopped = True
            _kill_group(proc)
        except BaseException:  # Ctrl-C: the step's own session would outlive us
            _kill_group(proc)
            raise
    seconds = round(time.monotonic() - t0, 1)
    try:
        result = json.loads(out_path.read_text())
    except (OSError, ValueError):
        result = {}
    status, why = result.pop("status", None), result.pop("why", None)
    if stopped:
        status, why = "stopped", f"past its deadline of {deadline_s:.0f} s: killed (what it noted is kept)"
        cause = _log_cause(log_path)
        if cause:  # an engine that failed and was retried until the deadline: the failure, not the wait
            why += f"; the last error in its log: {cause}"
    elif status in (None, "running"):
        status, why = "failed", f"exited {proc.returncode} without a result: {_last_line(log_path)}"
    return {"name": name, "title": TITLES[name], "status": status, "why": why, "seconds": seconds,
            "deadline_s": round(deadline_s, 1), "log": str(log_path), "result": result}


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the step's process group (engines and Ray it started), SIGKILL what is left after a grace."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _log_cause(path: Path, tail_bytes: int = 4 << 20) -> str | None:
    """The exception of the last traceback in a step's log (the end of it), else None."""
    from esc_eval.serve.engines.output import root_cause

    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - tail_bytes))
            return root_cause(f.read().decode(errors="replace").splitlines())
    except OSError:
        return None


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "no output"


def run_node_check(cfg: NodeCheckConfig, say: Callable[[dict[str, Any]], None] = lambda step: None,
                   keep: Optional[Path] = None) -> dict[str, Any]:
    """Every step asked for, in order; the check's JSON. `say` gets each step's record as it ends;
    `keep`: a folder the steps' logs and run folders are copied to. Raises CheckInputError (nothing
    written) on a refused machine or a budget too small."""
    budget_s = cfg.budget_min * 60
    steps = ["machine"] + [s for s in STEPS if s in cfg.steps and s != "machine"]
    models = {"judge": cfg.judge, "role": cfg.role, "target": cfg.target}
    from esc_eval.serve.registry.registry import resolve

    for m in models.values():
        resolve(m)  # an unknown model: one line before anything starts
    started = time.monotonic()
    ends = planned_ends(budget_s, steps)
    ctx: dict[str, Any] = {"models": models, "source": cfg.source, "cards": cfg.cards}
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="esc-eval-check-") as tmp:
        folder = Path(tmp)
        first = _run_step("machine", ctx, folder, ends["machine"])
        if first["status"] == "refused":
            raise CheckInputError(first["why"])
        device = first["result"].get("device") or "cpu"
        budget = check_budget(budget_s, steps, models, device)
        sizes = SIZES[device]
        ctx.update(device=device, sizes=sizes, max_tokens=cfg.max_tokens or sizes["max_tokens"])
        records.append(first)
        say(first)
        for name in steps[1:]:
            need = NEEDS.get(name)
            dep = next((r for r in records if r["name"] == need), None)
            left = ends[name] - (time.monotonic() - started)
            if dep is not None and dep["status"] != "ok":
                rec = _skipped(name, f"needs the {need} step, which {dep['status']}")
            elif left < MIN_STEP_S:
                rec = _skipped(name, f"the budget is spent ({left:.0f} s left of its share)")
            else:
                rec = _run_step(name, ctx, folder, left)
            records.append(rec)
            say(rec)
        if keep is not None:
            shutil.copytree(folder, keep, symlinks=True, dirs_exist_ok=True)  # model folders link weights
            for r in records:
                r["log"] = str(keep / Path(r["log"]).relative_to(folder)) if r.get("log") else None
    stopped = next((r for r in records if r["status"] not in ("ok", "skipped")), None)
    return {"check": "node", "ok": all(r["status"] == "ok" for r in records), "seconds": round(time.monotonic() - started, 1),
            "device": device, "models": models, "budget": budget, "sizes": sizes,
            "stopped_at": {"step": stopped["name"], "status": stopped["status"], "why": stopped["why"]} if stopped else None,
            "steps": records}


def _skipped(name: str, why: str) -> dict[str, Any]:
    return {"name": name, "title": TITLES[name], "status": "skipped", "why": why, "seconds": 0.0, "deadline_s": None,
            "log": None, "result": {}}


def summary_rows(out: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(step, status, seconds of its deadline, why) per step: the printed table."""
    rows = []
    for r in out["steps"]:
        limit = f"{r['seconds']:.0f} / {r['deadline_s']:.0f}" if r.get("deadline_s") else f"{r['seconds']:.0f}"
        rows.append((r["name"], r["status"], limit, str(r.get("why") or "")))
    return rows


__all__ = ["CheckInputError", "FIXED_S", "NodeCheckConfig", "SIZES", "STEPS", "TITLES", "WEIGHTS", "check_budget",
           "engine_start_s", "engine_starts", "planned_ends", "run_node_check", "summary_rows"]
