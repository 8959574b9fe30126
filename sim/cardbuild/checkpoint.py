"""Per-stage JSONL checkpoints: one line per finished item, appended as soon as it finishes.

A re-run loads the file and skips every id whose last record is final (anything but status
"error"); a torn last line from a crash is ignored. Whole-file outputs use atomic writes.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from esc_eval.sim.runs.storage import atomic_write_bytes


def atomic_write_text(path: Path, text: str) -> Path:
    """Write text to path atomically (readers never see half a file)."""
    atomic_write_bytes(path, text.encode("utf-8"))
    return path


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    return atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn line from an interrupted run
    return rows


class StageLog:
    """The append-only record of one stage: id -> latest record."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.records: dict[str, dict[str, Any]] = {}
        for row in read_jsonl(self.path):
            if "id" in row:
                self.records[row["id"]] = row
        self._fh = None

    def done(self, item_id: str) -> bool:
        rec = self.records.get(item_id)
        return rec is not None and rec.get("status") != "error"

    def append(self, record: dict[str, Any]) -> None:
        if self._fh is None:
            # a torn last line (no newline) must not swallow the next record
            if self.path.exists() and self.path.stat().st_size:
                with open(self.path, "rb") as f:
                    f.seek(-1, os.SEEK_END)
                    torn = f.read(1) != b"\n"
            else:
                torn = False
            self._fh = open(self.path, "a", encoding="utf-8")
            if torn:
                self._fh.write("\n")
        self._fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._fh.flush()
        self.records[record["id"]] = record

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None
