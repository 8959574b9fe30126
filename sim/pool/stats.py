"""The pool's counters: items done and failed, model calls and tokens, live progress of items in flight."""
from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator


@dataclass
class PoolStats:
    done: int = 0
    failed: int = 0
    tokens: int = 0
    calls: int = 0
    started: float = field(default_factory=time.monotonic)
    # Model calls and tokens answered so far in the job, items in flight included (polled from the
    # workers every few seconds): progress between two finished items, which can be minutes apart.
    live_calls: int = 0
    live_tokens: int = 0
    calls_per_item: float | None = None  # model calls one item makes (the job's `calls_per_item`), for an ETA
    rows_checked: int = 0  # row keys of the items sent, all found in the run folder at the end
    # Each worker's setup: where it runs, the items in flight chosen and why, its engines' capacities
    workers: list[dict[str, Any]] = field(default_factory=list)

    def add(self, summary: dict[str, Any]) -> None:
        self.done += 1
        self.failed += 0 if summary.get("ok", True) else 1
        self.tokens += int(summary.get("tokens", 0))
        self.calls += int(summary.get("calls", 0))

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def as_dict(self) -> dict[str, Any]:
        el = max(self.elapsed, 1e-9)
        return {"items": self.done, "failed": self.failed, "tokens": self.tokens, "model_calls": self.calls,
                "elapsed_s": round(el, 3), "items_per_s": self.done / el, "tokens_per_s": self.tokens / el,
                "calls_per_s": self.calls / el, "rows_checked": self.rows_checked, "workers": self.workers}


# How often the driver asks the workers for live progress (calls and tokens of items in flight).
LIVE_PROGRESS_S = float(os.environ.get("ESC_EVAL_LIVE_PROGRESS_S") or 5.0)
LIVE = {"live": True}  # the summary passed to on_summary for a live update (no item finished)
SETUP = {"live": True, "setup": True}  # ... once the workers set up (PoolStats.workers says how)


def add_live(stats: PoolStats, kind: str, parts: Iterable[dict[str, int]]) -> None:
    """Sum the workers' progress into `stats` (completion tokens for dialogues, prompt tokens for
    scores: the tokens the finished items' summaries count)."""
    parts = list(parts)
    stats.live_calls = sum(p["calls"] for p in parts)
    key = "completion_tokens" if kind == "dialogues" else "prompt_tokens"
    stats.live_tokens = sum(p[key] for p in parts)


def chunked(items: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk
