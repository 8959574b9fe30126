"""One pass of a batched scoring over the dialogues it still owes rows: the scoring job's own code
(sim/jobs/scoring.py `ScoringJob.run`) with each judge answered from the batches (answers.py
`ReplayJudge`). What is answered becomes score rows, written at once; what is not yet answered is
collected as the requests the next batches carry; nothing is sent from here.

Each (dialogue, judge, dimension) gets its row once in a scoring: the pass takes it off the dialogue's
`todo` as soon as its row is written (the run folder's exactly-once rules do the rest across restarts:
sim/runs/runfolder.py).
"""
from __future__ import annotations

import asyncio
from typing import Any

from esc_eval.sim.batching.answers import CURRENT_DIALOGUE, Need, ReplayJudge, ReplayPolicy
from esc_eval.sim.batching.flight import BatchFlight
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring import ScoringJob
from esc_eval.sim.judging.judge_plan import JudgePlan
from esc_eval.sim.runs.runfolder import RunFolder

PASS_CONCURRENCY = 256  # dialogues replayed at once (no model call is made: this is parsing)
FLUSH_ROWS = 2000  # score rows per part written


class ReplayPass:
    """See the module docstring. The counts of every row written (`outcome`) last over the passes."""

    def __init__(self, cfg: ScoringConfig, plans: dict[str, JudgePlan], flight: BatchFlight, policy: ReplayPolicy):
        self.job = ScoringJob(cfg, plans)
        self.flight, self.policy = flight, policy
        self.needs: dict[str, Need] = {}
        self.deferred: set[str] = set()  # request keys that go online (fallback 'online')
        # ScoringJob.setup would build and start the judges; here they are the batches' answers
        self.job.judge_models = {
            j.judge_id: ReplayJudge(j.judge_id, flight.transports[j.judge_id].identity(), flight.index,
                                    flight.in_flight, policy, self.needs, self.deferred, j.model.params)
            for j in cfg.judges}
        self.outcome = {"score_rows": 0, "unscored_rows": 0, "error_rows": 0, "first_error": None}

    async def _one(self, item: dict[str, Any]) -> list[dict[str, Any]]:
        CURRENT_DIALOGUE.set(item["dialogue_id"])  # this task's own context: the requests it needs name it
        rows, _summary = await self.job.run(item)
        return rows

    async def _all(self, items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        out: list[list[dict[str, Any]]] = []
        for i in range(0, len(items), PASS_CONCURRENCY):
            out += await asyncio.gather(*(self._one(it) for it in items[i:i + PASS_CONCURRENCY]))
        return out

    def run(self, run: RunFolder, items: dict[str, dict[str, Any]]) -> int:
        """Replay every dialogue of `items` (dialogue id -> a scoring item with its `todo`), write the
        rows that came of it and take them off `items`; the requests still to send are in `needs`.
        Returns the rows written."""
        self.needs.clear()
        listed = list(items.values())
        buffer: list[dict[str, Any]] = []
        written = 0
        for item, rows in zip(listed, asyncio.run(self._all(listed))):
            done: dict[str, set[str]] = {}
            for r in rows:
                r["transport"] = "batch"
                done.setdefault(r["judge"], set()).add(r["dimension"])
                self._count(r)
            todo = {j: [d for d in dims if d not in done.get(j, set())] for j, dims in item["todo"].items()}
            todo = {j: dims for j, dims in todo.items() if dims}
            if todo:
                item["todo"] = todo
            else:
                del items[item["dialogue_id"]]
            buffer += rows
            if len(buffer) >= FLUSH_ROWS:
                written += self._flush(run, buffer)
        return written + self._flush(run, buffer)

    @staticmethod
    def _flush(run: RunFolder, buffer: list[dict[str, Any]]) -> int:
        n = len(buffer)
        if n:
            run.write_part("scores", list(buffer))
            buffer.clear()
        return n

    def _count(self, row: dict[str, Any]) -> None:
        o = self.outcome
        o["score_rows"] += 1
        o["unscored_rows"] += row["score"] is None
        if row["parse_status"] == "error":
            o["error_rows"] += 1
            o["first_error"] = o["first_error"] or (row["error"] or "").splitlines()[0][:300] or None
