"""The batches of a run folder, kept in it (through its storage: a local folder or s3://...), so a
scoring killed and started again picks up the batches in flight instead of sending them twice.

    batches/<name>.json            the record: its judge and provider, state, provider batch id,
                                   input file id, counts, the session that sent it
    batches/<name>.requests.jsonl  one line per request: custom_id, request key, dialogue, judge
                                   (written before the batch is made)
    batches/<name>.results.jsonl   the provider's results as downloaded (output and error files)

A record's state: `pending` (written before the provider hears of it; `create_started` once a
create may have reached the provider), `submitted` (the provider's batch id kept), `ended` (its
results kept in the folder) or `dropped` (never made, or a batch found after a crash that turned
out not to be this one's). Every change rewrites the record whole, atomically.
"""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator

from esc_eval.sim.runs.runfolder import RunFolder

FOLDER = "batches"
IN_FLIGHT = ("pending", "submitted")


def new_name() -> str:
    """A batch's name: unique, sortable by time (to the microsecond), and fit for a custom_id ([a-zA-Z0-9_-])."""
    now = time.time()
    return f"{time.strftime('%Y%m%d%H%M%S', time.gmtime(now))}{int(now * 1e6) % 10**6:06d}{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class RequestRef:
    """Where one request of a batch belongs."""

    custom_id: str
    key: str  # the request's key (serve.calls.cache.cache_key over the transport's identity)
    dialogue_id: str
    judge: str

    def line(self) -> bytes:
        return json.dumps([self.custom_id, self.key, self.dialogue_id, self.judge]).encode() + b"\n"


class BatchBook:
    """The batch records of one run folder (see the module docstring)."""

    def __init__(self, run: RunFolder):
        self.run = run
        self.storage = run.storage

    @staticmethod
    def _key(name: str, suffix: str) -> str:
        return f"{FOLDER}/{name}{suffix}"

    def records(self) -> list[dict[str, Any]]:
        """Every record, oldest first."""
        found = [json.loads(self.storage.read(k)) for k in self.storage.list(FOLDER, ".json")]
        return sorted(found, key=lambda r: (r.get("created_at") or 0, r["name"]))

    def save(self, record: dict[str, Any], **fields: Any) -> dict[str, Any]:
        """Update `record` with `fields` and write it (atomically, durably)."""
        record.update(fields, updated_at=time.time())
        self.storage.write(self._key(record["name"], ".json"),
                           json.dumps(record, indent=1, sort_keys=True, default=str).encode())
        return record

    def open(self, name: str, judge: str, spec: str, provider: str, session: str, refs: list[RequestRef],
             payload_bytes: int, est_usd: float | None) -> dict[str, Any]:
        """A new pending record and its requests, written before the provider hears of the batch."""
        self.storage.write(self._key(name, ".requests.jsonl"), b"".join(r.line() for r in refs))
        return self.save({"name": name, "judge": judge, "spec": spec, "provider": provider, "session": session,
                          "state": "pending", "batch_id": None, "requests": len(refs), "bytes": payload_bytes,
                          "est_usd": est_usd, "created_at": time.time(), "status": None, "counts": None,
                          "error": None})

    def requests(self, record: dict[str, Any]) -> list[RequestRef]:
        data = self.storage.read(self._key(record["name"], ".requests.jsonl"))
        return [RequestRef(*json.loads(line)) for line in data.splitlines() if line.strip()]

    def keep_results(self, record: dict[str, Any], data: bytes) -> None:
        self.storage.write(self._key(record["name"], ".results.jsonl"), data)

    def results(self, record: dict[str, Any]) -> bytes:
        return self.storage.read(self._key(record["name"], ".results.jsonl"))

    def in_flight(self, records: list[dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
        return (r for r in (records if records is not None else self.records()) if r["state"] in IN_FLIGHT)

    def taken(self, records: list[dict[str, Any]]) -> set[str]:
        """Provider batch ids the records hold (a batch found after a crash is none of these)."""
        return {r["batch_id"] for r in records if r.get("batch_id") and r["state"] != "dropped"}
