"""`esc-eval score --reply-safety`: the replies after risk emerged rated in their context (sim/jobs/
reply_safety.py) by the judge placed where it runs, with the judge's unusable answers after it."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager

from esc_eval.sim.jobs.config import ScoringConfig

ONLINE_ONLY = "--reply-safety rates replies online; provider batches (--batch) score whole dialogues"


def score_reply_safety_run(cfg: ScoringConfig, input_path: str, progress: Callable[[], ContextManager[Any]] | None = None,
                           say: Callable[[str], None] = print) -> dict[str, Any]:
    """Rate every reply after a disclosure in the run folder `input_path` (its own `reply_safety` rows);
    `progress` opens what follows the job once the judge is placed (sim/driver/progress.py
    `job_progress`). The result adds `parse_failures` per (judge, target model, question)."""
    from esc_eval.sim.jobs.reply_safety import reply_parse_failures, run_reply_safety
    from esc_eval.sim.launch.placed import placed_scoring
    from esc_eval.sim.runs.runfolder import RunFolder

    if cfg.batch.enabled:
        raise ValueError(ONLINE_ONLY)
    RunFolder(input_path, create=False)  # no such run folder: one line, before a judge is placed
    with placed_scoring(cfg, input_path, say=say) as placed:
        with (progress or contextlib.nullcontext)() as jp:
            result = run_reply_safety(placed, input_path, on_summary=jp.on_summary if jp else None,
                                      on_start=jp.on_start if jp else None)
    result["parse_failures"] = [r for jid in result["judges"] for r in reply_parse_failures(result["run_dir"], jid)]
    return result


__all__ = ["ONLINE_ONLY", "score_reply_safety_run"]
