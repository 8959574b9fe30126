"""A run is a folder: manifest.json, dialogues/part-*.parquet, scores/part-*.parquet, report/.

Part files are written atomically (temp file + fsync + rename): a reader never sees a
half-written part, and a crash loses at most the rows not yet flushed.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import socket
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from esc_eval.sim.records import DIALOGUE_SCHEMA, SCORE_SCHEMA

SCHEMAS = {"dialogues": DIALOGUE_SCHEMA, "scores": SCORE_SCHEMA}


class RunFolderError(ValueError):
    pass


def atomic_write_bytes(path: Path, data: bytes, fsync: bool = True) -> None:
    """Write via a temp file + rename: readers never see half a file. fsync=False keeps that
    guarantee against a process crash (not a power loss) at a fraction of the cost."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class RunFolder:
    """Reads and writes one run folder. Safe to use from many processes: part names are unique."""

    def __init__(self, path: str | os.PathLike[str], create: bool = True):
        self.path = Path(path)
        if create:
            try:
                self.path.mkdir(parents=True, exist_ok=True)
                probe = self.path / f".write-test-{uuid.uuid4().hex}"
                probe.write_bytes(b"")
                probe.unlink()
            except OSError as e:
                raise RunFolderError(f"output folder {self.path} is not writable: {e.strerror or e}") from e
        elif not self.path.is_dir():
            raise RunFolderError(f"run folder {self.path} does not exist")

    # -- manifest ---------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def read_manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            return {}
        try:
            return json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise RunFolderError(f"{self.manifest_path}: not valid JSON ({e})") from e

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        """Merge fields into manifest.json (dicts merge one level deep), atomically."""
        manifest = self.read_manifest()
        for key, value in fields.items():
            if isinstance(value, dict) and isinstance(manifest.get(key), dict):
                manifest[key] = {**manifest[key], **value}
            else:
                manifest[key] = value
        manifest.setdefault("created_at", now_utc().isoformat())
        manifest["updated_at"] = now_utc().isoformat()
        atomic_write_bytes(
            self.manifest_path, json.dumps(manifest, indent=2, ensure_ascii=False, default=str).encode("utf-8")
        )
        return manifest

    def append_event(self, kind: str, **fields: Any) -> None:
        """Append a timing/progress event to manifest['events'] (throughput over time)."""
        manifest = self.read_manifest()
        events = manifest.get("events", [])
        events.append({"kind": kind, "at": now_utc().isoformat(), **fields})
        self.update_manifest(events=events)

    # -- parts ------------------------------------------------------------------------------
    def part_dir(self, kind: str) -> Path:
        if kind not in SCHEMAS:
            raise ValueError(f"unknown part kind {kind!r}")
        return self.path / kind

    def write_part(self, kind: str, rows: list[dict[str, Any]]) -> Path | None:
        """Write rows as one new Parquet part, atomically. Returns its path (None if no rows)."""
        if not rows:
            return None
        table = pa.Table.from_pylist(rows, schema=SCHEMAS[kind])
        stamp = now_utc().strftime("%Y%m%dT%H%M%S%f")
        name = f"part-{stamp}-{socket.gethostname()[:12]}-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet"
        target = self.part_dir(kind) / name
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        atomic_write_bytes(target, sink.getvalue().to_pybytes())
        return target

    def parts(self, kind: str) -> list[Path]:
        d = self.part_dir(kind)
        return sorted(d.glob("part-*.parquet")) if d.is_dir() else []

    def read(self, kind: str, columns: list[str] | None = None) -> pa.Table:
        """All rows of a kind, deduplicated to the latest row per key (re-runs may rewrite)."""
        tables = [pq.read_table(p, columns=columns, schema=SCHEMAS[kind]) if columns is None
                  else pq.read_table(p, columns=columns) for p in self.parts(kind)]
        if not tables:
            schema = SCHEMAS[kind]
            if columns:
                schema = pa.schema([schema.field(c) for c in columns])
            return schema.empty_table()
        return pa.concat_tables(tables, promote_options="default")

    def iter_rows(self, kind: str, columns: list[str] | None = None) -> Iterable[dict[str, Any]]:
        for p in self.parts(kind):
            yield from pq.read_table(p, columns=columns).to_pylist()

    def done_dialogue_ids(self, include_failed: bool = False) -> set[str]:
        """Ids of dialogues with a final row. Failed rows count as done only if asked."""
        t = self.read("dialogues", columns=["dialogue_id", "status"])
        ids = t.column("dialogue_id").to_pylist()
        status = t.column("status").to_pylist()
        return {i for i, s in zip(ids, status) if include_failed or s == "ok"}
