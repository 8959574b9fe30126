"""What a job came to, for its exit status: failures past the threshold, a stop by the spend cap,
or a stop of the run (`run_stopped`: a model that cannot start, an engine that died for good).

`JobOutcome` sees every item's summary as the pool reports it (simulation: one dialogue, `ok` or
not; scoring: one dialogue's score rows, how many calls failed and how many answers did not parse) and stops the item feed
once the spend cap refused a call (the items in flight finish or stop at their next call; nothing
new is sent). `outcome_line` turns the job's result into the one line a command exits non-zero
with, or None when the job is fine. The rows stay either way, for a resume.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from esc_eval.serve.chat.interface import RunStopError

EXIT_FAILURES = 1  # more than execution.max_failure_rate of the items failed, or all of them
EXIT_BUDGET = 3  # stopped by budget_usd before finishing: resumable


class JobOutcome:
    """Counters over item summaries, and the switch that stops feeding items."""

    def __init__(self, on_summary: Callable[[dict[str, Any], Any], None] | None = None):
        self.forward = on_summary
        self.items_done = self.items_failed = 0
        self.rows = self.rows_unscored = self.rows_error = 0
        self.budget_stopped = 0
        self.stopped_keys: set = set()  # row keys the cap stopped (the pool's end-of-job check excuses them)
        self.first_error: str | None = None

    def on_summary(self, summary: dict[str, Any], stats: Any) -> None:
        if not summary.get("live"):
            if summary.get("budget_stopped"):
                self.budget_stopped += 1
                self.stopped_keys.update(tuple(k) if isinstance(k, list) else k for k in summary.get("stopped_keys") or ())
            else:
                self.items_done += 1
                self.items_failed += 0 if summary.get("ok", True) else 1
            self.rows += int(summary.get("rows", 0))
            self.rows_unscored += int(summary.get("unscored", 0))
            self.rows_error += int(summary.get("errors", 0))
            if self.first_error is None and summary.get("error"):
                self.first_error = str(summary["error"]).splitlines()[0][:300]
        if self.forward:
            self.forward(summary, stats)

    def feed(self, items: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """`items` until the spend cap stopped an item (the pool pulls lazily, so this is the brake)."""
        for item in items:
            if self.budget_stopped:
                return
            yield item

    def as_dict(self, kind: str) -> dict[str, Any]:
        out: dict[str, Any] = {"budget_stopped_items": self.budget_stopped, "first_error": self.first_error}
        if kind == "scores":
            out.update(score_rows=self.rows, unscored_rows=self.rows_unscored, error_rows=self.rows_error)
        else:
            out.update(finished_items=self.items_done, failed_items=self.items_failed)
        return out


def outcome_line(result: dict[str, Any], kind: str, max_failure_rate: float) -> tuple[int, str] | None:
    """(exit status, one line) when the job must exit non-zero, else None."""
    o = result.get("outcome") or {}
    where = result.get("run_dir", "the run folder")
    calls = result.get("api_calls") or {}
    if o.get("budget_stopped_items"):
        spent = calls.get("spent_usd")
        return EXIT_BUDGET, (
            f"stopped by budget_usd={calls.get('budget_usd')}: ${spent} spent; {o['budget_stopped_items']} "
            f"{'dialogues' if kind == 'dialogues' else 'dialogues to score'} stopped before a call that could pass it "
            f"(any others not started); what finished is in {where}: run the same command again to resume")
    if kind == "scores":
        # calls that failed; an answer that did not parse is the parse-failure report's business
        n, bad = o.get("score_rows", 0), o.get("error_rows", 0)
        what = f"{bad} of {n} judge calls failed ({o.get('unscored_rows', 0) - bad} more answers did not parse)"
    else:
        n, bad = o.get("finished_items", 0), o.get("failed_items", 0)
        what = f"{bad} of {n} dialogues failed"
    if n and (bad == n or bad / n > max_failure_rate):
        first = f"; first error: {o['first_error']}" if o.get("first_error") else ""
        return EXIT_FAILURES, (f"{what}, more than execution.max_failure_rate={max_failure_rate:g}{first}; the rows stay in "
                               f"{where} for a resume")
    return None


def run_stopped(run: Any, phase: str, error: RunStopError, finished: int, unit: str) -> RunStopError:
    """Record a stop of the run in its manifest (event `<phase>_stopped`: the cause and the engine's
    last lines) and return the one line the command exits 1 with: the cause, what stays, how to resume."""
    # the engine's tail, its last traceback whole (serve/engines/output.py ChildOutput.tail: at most 120 lines)
    run.append_event(f"{phase}_stopped", error=str(error), model=error.model, detail=error.detail[-120:],
                     finished=finished)
    if finished:
        after = (f"{phase} stopped after {finished} {unit}{'s' if finished != 1 else ''} (their rows are in {run}); "
                 f"run the same command again to resume")
    else:
        after = f"no {unit} was run; run the same command again once that is fixed"
    return type(error)(f"{error}; {after}", model=error.model, detail=error.detail)
