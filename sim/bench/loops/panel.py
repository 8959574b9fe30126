"""`esc-eval bench panel`: what a panel of judges costs the scoring pool against one judge, on a fake
set of 8,500 dialogues (the paper's size) and fake judges with a fixed latency per call: the same
pool, warm, scores the set with one judge and then with a panel of N judges in one pass. The panel
makes N times the calls; what it must not cost is wall time per call (the target: at most 1.2x one
judge's), which is where a panel run as N scoring passes, or one that serialised its judges, would
lose. An orchestration benchmark: with real engines the time per call is the engines'."""
from __future__ import annotations

import datetime as dt
import tempfile
import time
from pathlib import Path
from typing import Any

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.panel import PanelConfig, PanelJudge
from esc_eval.sim.pool.config import DEFAULT_EXECUTOR, ExecutionConfig
from esc_eval.sim.pool.pool import WorkerPool
from esc_eval.sim.runs.records import dialogue_id, dialogue_row
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.bench.loops.scale import PAPER_DIALOGUES

TARGET_WALL_PER_CALL = 1.2  # the bound: a panel's wall time per call over one judge's
# `bench panel`'s defaults (the CLI reads these):
PANEL_JUDGES = 3  # the smallest panel with a majority
PANEL_LATENCY_S = 0.005  # a fake call short enough that the pool's per-call overhead is what is measured
PANEL_WORKERS = 2  # one worker actor per core of the 2-core reference machine


def write_fake_dialogues(path: Path, n: int, targets: int = 14, part_rows: int = 1000) -> RunFolder:
    """A run folder of n completed 5-round dialogues (short scripted turns) over `targets` models."""
    run = RunFolder(path)
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    rows = []
    for i in range(n):
        card, target = f"en-{i // targets:06d}", f"model-{i % targets:02d}"
        turns = [{"index": k, "speaker": "assistant" if k % 2 == 0 else "seeker",
                  "text": f"Turn {k} of dialogue {i}: " + ("I hear you." if k % 2 == 0 else "Work has been hard."),
                  "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0, "finish_reason": "stop"} for k in range(11)]
        rows.append(dialogue_row(run_id="bench-panel", dialogue_id=dialogue_id(card, target, "fake", "official", 0),
                                 card_id=card, language="en", target_model=target, turns=turns, n_turns=11, status="ok",
                                 started_at=at, finished_at=at))
        if len(rows) == part_rows:
            run.write_part("dialogues", rows)
            rows = []
    if rows:
        run.write_part("dialogues", rows)
    return run


def _judge(i: int, latency: float) -> JudgeConfig:
    # distinct query strings: each judge its own model, as a panel's judges are
    return JudgeConfig(model=ModelRef(model=f"fake/judge?latency={latency}&seed={i}"), name=f"judge-{i}")


def bench_panel(dialogues: int = PAPER_DIALOGUES, judges: int = PANEL_JUDGES, latency: float = PANEL_LATENCY_S,
                workers: int = PANEL_WORKERS, concurrency: int = 32, executor: str = DEFAULT_EXECUTOR) -> dict[str, Any]:
    """One judge, then a panel of `judges`, over the same fake dialogues on one warm pool (`executor`
    "local": the pool's code in this process, for tests)."""
    if judges < 2:
        raise ValueError(f"--judges {judges}: a panel has at least 2 judges")
    ex = ExecutionConfig(executor=executor, workers=workers, concurrency=concurrency, chunk_size=max(8, concurrency // 2),
                         num_cpus_per_worker=max(0.1, 2 / workers - 0.1), max_attempts=1, log_to_driver=False,
                         flush_rows=5000, flush_seconds=30)
    one = ScoringConfig(judge=_judge(0, latency), execution=ex)
    panel = ScoringConfig(panel=PanelConfig(judges=[PanelJudge(judge=_judge(i + 1, latency)) for i in range(judges)]),
                          execution=ex)
    with tempfile.TemporaryDirectory(prefix="esc-bench-panel-") as folder, WorkerPool(ex) as pool:
        tmp = Path(folder)
        t0 = time.perf_counter()
        run = write_fake_dialogues(tmp / "run", dialogues)
        built_s = time.perf_counter() - t0
        warm = write_fake_dialogues(tmp / "warm", workers * 4)
        run_scoring(panel, warm.location, pool=pool)  # actors up and every judge model built before the clock
        run_scoring(one, warm.location, pool=pool)
        single = run_scoring(one, run.location, pool=pool)
        several = run_scoring(panel, run.location, pool=pool)
    per_call = {name: r["wall_s"] / max(1, r["model_calls"]) for name, r in (("one", single), ("panel", several))}
    ratio = per_call["panel"] / per_call["one"]
    return {
        "dialogues": dialogues, "judges": judges, "latency_s": latency, "workers": workers,
        "concurrency_per_worker": concurrency, "fake_set_built_s": round(built_s, 2),
        "one_judge": {"calls": single["model_calls"], "wall_s": single["wall_s"], "failed": single["failed"]},
        "panel": {"calls": several["model_calls"], "wall_s": several["wall_s"], "failed": several["failed"],
                  "judges": several["judges"]},
        "calls_ratio": round(several["model_calls"] / max(1, single["model_calls"]), 3),
        "wall_per_call_ratio": round(ratio, 3), "target_wall_per_call_ratio": TARGET_WALL_PER_CALL,
        "meets_target": ratio <= TARGET_WALL_PER_CALL and several["model_calls"] == judges * single["model_calls"],
        "path": f"run_scoring on one warm {executor} worker pool; fake judges in-process (fixed latency per call)",
    }
