"""`esc-eval bench rubric`, the scoring half: the same dialogues scored by one judge in both rubric modes,
the paper's one call per dimension and one call per dialogue (sim/judging/one_call), each through the
service's scoring path (run_scoring, one in-process engine shared by both), into one run folder where
the two are two judges' rows side by side. analysis/bench/rubric.py then reads their agreement per
dimension and the prompt tokens each spent per dialogue.

Each mode's wall time is its own job's (the engine is started before the first and kept for the second,
so neither pays the start); the per-dimension mode goes first, as a user would have scored before."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from esc_eval.serve.registry.ref import DEFAULT_MODEL, ModelRef
from esc_eval.sim.bench.dialogues import load_bench_dialogues
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

MODES = ("per_dimension", "one_call")
RUBRIC_DIALOGUES = 12  # `bench rubric`'s dialogues: enough for a kappa per dimension, minutes on a CPU


def bench_rubric_scoring(dialogues: int = RUBRIC_DIALOGUES, sources: list[Path] | None = None, model: str = DEFAULT_MODEL,
                         folder: Path | None = None, concurrency: int = 8) -> dict[str, Any]:
    """Score up to `dialogues` dialogues (from each source in turn: run folders or official JSON; default the
    official samples) in both rubric modes with `model`; returns the run folder, both judge ids, each mode's
    wall time and where the dialogues came from."""
    rows: list[dict[str, Any]] = []
    origins = []
    for src in sources or [None]:
        got, origin = load_bench_dialogues(dialogues - len(rows), src)
        rows += got
        origins.append(origin)
        if len(rows) >= dialogues:
            break
    path = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="bench-rubric-"))
    run = RunFolder(path)
    if not run.parts("dialogues"):
        run.write_part("dialogues", [{k: v for k, v in r.items() if k != "run_dir"} for r in rows])
    out: dict[str, Any] = {"run_dir": str(path), "model": model, "dialogues": len(rows), "sources": origins,
                           "judges": {}, "wall_s": {}, "engine_start_s": None}
    started = time.perf_counter()
    held = _start(model)
    out["engine_start_s"] = round(time.perf_counter() - started, 1)
    try:
        for mode in MODES:
            judge = JudgeConfig(model=ModelRef(model=model), rubric_mode=mode)
            cfg = ScoringConfig(judge=judge, execution=ExecutionConfig(executor="local", concurrency=concurrency))
            result = run_scoring(cfg, str(path))
            out["judges"][mode] = result["judge"]
            out["wall_s"][mode] = result["wall_s"]
    finally:
        held.release()
    return out


def _start(model: str):
    """The judge's engine started before the timed jobs and held through both (an in-process engine is shared
    by every model built with its settings)."""
    from esc_eval.serve.chat.interface import get_chat_model
    from esc_eval.serve.registry.registry import resolve

    spec, implied = resolve(model)
    held = get_chat_model(spec, **implied)
    held.start()
    return held
