"""Run one LLM stage over many items: asyncio concurrency, retries, checkpointed results.

`run_stage` calls `work(item)` for every item not yet final in the stage's `StageLog`, at most
`concurrency` at a time, appends each record the moment it is ready, and shows a rich progress
bar. `call_model` turns a model call that failed after the retry policy's attempts
(serve/calls/retry.py) into an error record instead of an exception.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from esc_eval.serve.chat.interface import ChatMessage, ChatModel, ChatModelError, ChatResult, GenerationParams
from esc_eval.sim.cardbuild.checkpoint import StageLog
from esc_eval.sim.cardbuild.config import CONCURRENCY

log = logging.getLogger(__name__)
T = TypeVar("T")


async def call_model(model: ChatModel, messages: list[ChatMessage], params: GenerationParams
                     ) -> tuple[ChatResult | None, str | None, int]:
    """One call of a model wrapped in the retry policy (serve/calls/retry.py): (result, None, attempts)
    or, once it gives up, (None, error text, attempts): a failure is a record, not an exception."""
    try:
        result = await model.chat(messages, params)
        return result, None, result.attempts
    except ChatModelError as e:
        return None, f"{e.kind}: {e}", e.attempts or 1
    except Exception as e:  # noqa: BLE001 - a backend bug must not kill the whole stage
        return None, f"{type(e).__name__}: {e}", 1


async def run_stage(
    name: str,
    items: Sequence[T],
    key: Callable[[T], str],
    work: Callable[[T], Awaitable[dict[str, Any]]],
    stage_log: StageLog,
    *,
    concurrency: int = CONCURRENCY,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Run `work` on the items not yet done; returns timing {done, skipped, seconds, items_per_s}."""
    todo = [it for it in items if not stage_log.done(key(it))]
    skipped = len(items) - len(todo)
    sem = asyncio.Semaphore(concurrency)
    started = time.perf_counter()
    progress = Progress(TextColumn(f"[bold]{name}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        disable=not show_progress or not todo, transient=False)

    async def one(it: T, task_id) -> None:
        async with sem:
            try:
                record = await work(it)
            except Exception as e:  # noqa: BLE001 - a failure is a record, not a crash
                record = {"status": "error", "reason": f"{type(e).__name__}: {e}"}
            record["id"] = key(it)
            stage_log.append(record)
            progress.advance(task_id)

    try:
        with progress:
            task_id = progress.add_task(name, total=len(todo))
            await asyncio.gather(*(one(it, task_id) for it in todo))
    finally:
        stage_log.close()
    seconds = time.perf_counter() - started
    return {"done": len(todo), "skipped": skipped, "seconds": round(seconds, 3),
            "items_per_s": round(len(todo) / seconds, 3) if todo and seconds > 0 else None}
