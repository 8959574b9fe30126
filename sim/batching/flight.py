"""The batches of one scoring in flight: sent, followed, and their results read into the answers.

`BatchFlight` works the run folder's BatchBook with each judge's transport: it loads what ended
batches answered (`load`), settles the records a crash left pending (`settle`: the batch an earlier
attempt made is found and followed, else the record is dropped and its requests go out again), sends
new batches (`send`), looks at the ones in flight and keeps the results of those that ended
(`follow`). A request is in flight while a pending or submitted record holds it: no pass sends it
again.
"""
from __future__ import annotations

import logging
from typing import Any

from esc_eval.serve.batches.transport import BatchTransport, BatchView, line_error
from esc_eval.sim.batching.answers import AnswerIndex
from esc_eval.sim.batching.book import BatchBook
from esc_eval.sim.batching.packing import PlannedBatch
from esc_eval.sim.batching.progress import BatchCounts

log = logging.getLogger("esc_eval.batching")


class BatchFlight:
    """See the module docstring. transports: judge id -> its batch API; specs: judge id -> model spec."""

    def __init__(self, book: BatchBook, transports: dict[str, BatchTransport], specs: dict[str, str], session: str,
                 counts: BatchCounts):
        self.book, self.transports, self.specs, self.session = book, transports, specs, session
        self.counts = counts
        self.index = AnswerIndex()
        self.records: list[dict[str, Any]] = []
        self.in_flight: set[str] = set()  # request keys in pending or submitted records
        self.shown: set[str] = set()  # records this scoring counts in its progress
        self.summary = {"sent": 0, "found_after_restart": 0, "dropped": 0, "ended": 0, "not_ours": 0}

    # -- start -----------------------------------------------------------------------------------
    def load(self) -> None:
        """Read every record; what ended batches answered goes into the index."""
        # another judge's batches (this folder scored by it before) are none of this scoring's business
        self.records = [r for r in self.book.records() if r["judge"] in self.transports]
        for rec in self.records:
            if rec["state"] == "ended":
                self._fold(rec, count=False)
            elif rec["state"] in ("pending", "submitted"):
                self._hold(rec)

    def _hold(self, rec: dict[str, Any]) -> None:
        self.in_flight.update(r.key for r in self.book.requests(rec))
        if rec["name"] not in self.shown:
            self.shown.add(rec["name"])
            self.counts.sent += rec["requests"]
            self.counts.states[rec.get("status") or rec["state"]] += 1

    def settle(self) -> None:
        """Records a crash left pending: the batch found (submitted), or the record dropped."""
        for rec in [r for r in self.records if r["state"] == "pending"]:
            transport = self._transport(rec)
            batch_id = None
            if rec.get("create_started") or rec.get("create_started_at"):
                batch_id = transport.submit(rec["name"], None, rec["requests"], rec, self._saver(rec),
                                            self.book.taken(self.records))
            self._move(rec, rec.get("status") or "pending", None)
            if batch_id is None:
                self.book.save(rec, state="dropped", error="never made at the provider (the scoring stopped first)")
                self._release(rec)
                self.counts.sent -= rec["requests"]
                self.summary["dropped"] += 1
                continue
            self.book.save(rec, state="submitted", batch_id=batch_id, status="submitted")
            self._move(rec, None, "submitted")
            self.summary["found_after_restart"] += 1

    # -- sending ---------------------------------------------------------------------------------
    def send(self, planned: PlannedBatch) -> dict[str, Any]:
        """Write the record, then make the batch at the provider (each step kept as it goes)."""
        transport = self.transports[planned.judge]
        rec = self.book.open(planned.name, planned.judge, self.specs[planned.judge], transport.provider, self.session,
                             planned.refs, planned.bytes, planned.est_usd)
        self.records.append(rec)
        self._hold(rec)
        payload = transport.payload(planned.lines)
        batch_id = transport.submit(rec["name"], payload, len(planned.refs), rec, self._saver(rec),
                                    self.book.taken(self.records))
        self.book.save(rec, state="submitted", batch_id=batch_id, status="submitted")
        self._move(rec, "pending", "submitted")
        self.summary["sent"] += 1
        log.info("batch %s sent to %s as %s: %d requests, %d bytes", rec["name"], transport.provider, batch_id,
                 len(planned.refs), planned.bytes)
        return rec

    def _saver(self, rec: dict[str, Any]):
        return lambda **fields: self.book.save(rec, **fields)

    # -- following -------------------------------------------------------------------------------
    def follow(self) -> int:
        """Look at every batch in flight; keep the results of those that ended. Returns how many ended."""
        ended = 0
        for rec in [r for r in self.records if r["state"] == "submitted"]:
            view = self._transport(rec).retrieve(rec["batch_id"])
            counts = {"total": view.total, "succeeded": view.succeeded, "failed": view.failed}
            if view.status != rec.get("status") or counts != rec.get("counts"):
                self._move(rec, rec.get("status"), view.status)
                self.book.save(rec, status=view.status, counts=counts)
            if view.ended:
                self._end(rec, view)
                ended += 1
        return ended

    def _end(self, rec: dict[str, Any], view: BatchView) -> None:
        data = self._transport(rec).results(view) if view.results else b""
        self.book.keep_results(rec, data)
        self.book.save(rec, state="ended", error=view.error)
        self.summary["ended"] += 1
        self._fold(rec, count=True, batch_error=view.error)
        self._release(rec)

    def _fold(self, rec: dict[str, Any], count: bool, batch_error: str | None = None) -> None:
        """Its results into the index: every request an answer or an error (a request the results do
        not name failed with the batch). Results naming a custom_id that is not the record's: a batch
        found after a crash was someone else's; the record is dropped and its requests go out again."""
        refs = {r.custom_id: r for r in self.book.requests(rec)}
        outcomes = list(self._transport(rec).read_results(self.book.results(rec)))
        if any(o.custom_id not in refs for o in outcomes):
            log.warning("batch %s (%s): its results are not this record's requests; sending them again",
                        rec["name"], rec.get("batch_id"))
            self.book.save(rec, state="dropped", error="the batch found after a restart was not this one")
            self.summary["not_ours"] += 1
            return
        seen = set()
        for o in outcomes:
            seen.add(o.custom_id)
            self.index.add(refs[o.custom_id].key, rec["session"], o.result, o.error)
            if count:
                self.counts.answered += o.result is not None
                self.counts.failed += o.result is None
        missing = [r for cid, r in refs.items() if cid not in seen]
        for r in missing:
            why = f"the batch {rec.get('status')}" + (f": {batch_error}" if batch_error else " without answering it")
            self.index.add(r.key, rec["session"], None, line_error(None, why, "batch_failed"))
        if count:
            self.counts.failed += len(missing)

    # -- bookkeeping -----------------------------------------------------------------------------
    def _transport(self, rec: dict[str, Any]) -> BatchTransport:
        return self.transports[rec["judge"]]

    def _release(self, rec: dict[str, Any]) -> None:
        self.in_flight.difference_update(r.key for r in self.book.requests(rec))

    def _move(self, rec: dict[str, Any], old: str | None, new: str | None) -> None:
        if rec["name"] not in self.shown:
            return
        if old and self.counts.states[old] > 0:
            self.counts.states[old] -= 1
            if not self.counts.states[old]:
                del self.counts.states[old]
        if new:
            self.counts.states[new] += 1
