"""A run is a folder: manifest.json, dialogues/part-*.parquet, scores/part-*.parquet, report/ (and, where
their jobs ran, pairwise/, reply_safety/ and seeker_ratings/ parts).

Part files are written atomically (temp file + fsync + rename): a reader never sees a
half-written part, and a crash loses at most the rows not yet flushed.

Exactly once: a row's key is its dialogue id (dialogues) or (dialogue id, dimension, judge)
(scores), (pair id, dimension, order, judge) (pairwise), (dialogue id, reply, question, judge)
(reply_safety), (dialogue id, item, rater) (seeker ratings). The same key can be written twice on the way (a chunk re-run after a worker died, a
failed dialogue retried on resume, a judge call that errored and was scored again), so readers
(`read`, `iter_rows`, `done_dialogue_ids`) keep one row per key: a successful row (status ok /
parse_status not error) beats an unsuccessful one, and among equals the latest wins (finished_at
/ scored_at, then the later part, then the later row). When a job finishes, `compact` rewrites
the parts of its kind as one part holding only those rows (atomically: the new part is in place
before the old ones are removed, and a crash in between only leaves duplicates the readers drop).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from esc_eval.sim.runs.open import open_storage
from esc_eval.sim.runs.records import (DIALOGUE_SCHEMA, PAIRWISE_SCHEMA, REPLY_SAFETY_SCHEMA, SCORE_SCHEMA,
                                       SEEKER_RATING_SCHEMA)
from esc_eval.sim.runs.storage import RunFolderError, RunStorage, location_name, redact_uri

SCHEMAS = {"dialogues": DIALOGUE_SCHEMA, "scores": SCORE_SCHEMA, "pairwise": PAIRWISE_SCHEMA,
           "reply_safety": REPLY_SAFETY_SCHEMA, "seeker_ratings": SEEKER_RATING_SCHEMA}
# The key of a row, and how to rank two rows of one key: (success column, value meaning success or
# None = "anything but error", timestamp column).
KEYS = {"dialogues": ("dialogue_id",), "scores": ("dialogue_id", "dimension", "judge"),
        "pairwise": ("pair_id", "dimension", "order", "judge"), "reply_safety": ("dialogue_id", "reply", "question", "judge"),
        "seeker_ratings": ("dialogue_id", "item", "rater")}
_RANK = {"dialogues": ("status", "ok", "finished_at"), "scores": ("parse_status", None, "scored_at"),
         "pairwise": ("parse_status", None, "judged_at"), "reply_safety": ("parse_status", None, "scored_at"),
         "seeker_ratings": ("parse_status", None, "rated_at")}
# Environment variable names whose values must never reach a manifest.
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
REDACTED = "***redacted***"


def redact_env(value: Any) -> Any:
    """A copy of `value` where every dict under a key named "env" has the values of its secret-looking
    names (…KEY, …TOKEN, …SECRET, …PASSWORD) replaced by a marker (manifests are shared and committed)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "env" and isinstance(v, dict):
                out[k] = {name: (REDACTED if any(w in str(name).upper() for w in _SECRET_WORDS) else val)
                          for name, val in v.items()}
            else:
                out[k] = redact_env(v)
        return out
    if isinstance(value, list):
        return [redact_env(v) for v in value]
    return value


def now_utc() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def part_name(tag: str) -> str:
    """A new part's file name: its UTC write time first (names sort in write order), then who wrote it."""
    stamp = now_utc().strftime("%Y%m%dT%H%M%S%f")
    return f"part-{stamp}-{tag}-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet"


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


class RunFolder:
    """Reads and writes one run folder: a local path or a storage URI (s3://bucket/prefix, ...).
    Safe to use from many processes and nodes: part names are unique."""

    def __init__(self, path: str | os.PathLike[str], create: bool = True, storage: RunStorage | None = None):
        self.storage = storage or open_storage(path)
        self.location = str(path) if storage is None else storage.location
        if storage is not None:
            return  # a worker's view, opened by the pool (the driver checked the folder)
        if create:
            self.storage.check_writable()
        elif not self.storage.is_folder():
            raise RunFolderError(f"run folder {redact_uri(self.location)} does not exist")

    @property
    def path(self) -> Path:
        """The folder on this machine's disk (local run folders only; use `location` for any)."""
        root = self.storage.local_root
        if root is None:
            raise RunFolderError(f"{redact_uri(self.location)} is not on this machine's disk")
        return root

    def __str__(self) -> str:
        return redact_uri(self.location)

    # -- manifest ---------------------------------------------------------------------------
    def read_manifest(self) -> dict[str, Any]:
        try:
            data = self.storage.read("manifest.json")
        except FileNotFoundError:
            return {}
        try:
            return json.loads(data.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise RunFolderError(f"{self}/manifest.json: not valid JSON ({e})") from e

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        """Merge fields into manifest.json (dicts merge one level deep), atomically."""
        manifest = self.read_manifest()
        for key, value in redact_env(fields).items():
            if isinstance(value, dict) and isinstance(manifest.get(key), dict):
                manifest[key] = {**manifest[key], **value}
            else:
                manifest[key] = value
        manifest.setdefault("created_at", now_utc().isoformat())
        manifest["updated_at"] = now_utc().isoformat()
        self.storage.write("manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False, default=str).encode("utf-8"))
        return manifest

    def append_event(self, kind: str, **fields: Any) -> None:
        """Append a timing/progress event to manifest['events'] (throughput over time)."""
        manifest = self.read_manifest()
        events = manifest.get("events", [])
        events.append({"kind": kind, "at": now_utc().isoformat(), **fields})
        self.update_manifest(events=events)

    # -- parts ------------------------------------------------------------------------------
    @staticmethod
    def _check_kind(kind: str) -> str:
        if kind not in SCHEMAS:
            raise ValueError(f"unknown part kind {kind!r}")
        return kind

    def write_part(self, kind: str, rows: list[dict[str, Any]]) -> str | None:
        """Write rows as one new Parquet part, atomically. Returns its key (None if no rows)."""
        if not rows:
            return None
        table = pa.Table.from_pylist(rows, schema=SCHEMAS[self._check_kind(kind)])
        key = f"{kind}/{part_name(socket.gethostname()[:12])}"
        self.storage.write(key, _parquet_bytes(table))
        return key

    def parts(self, kind: str) -> list[str]:
        """Keys of the parts of a kind, in write order ("dialogues/part-....parquet")."""
        return self.storage.list(self._check_kind(kind), ".parquet")

    def open_part(self, key: str) -> pq.ParquetFile:
        return pq.ParquetFile(self.storage.source(key))

    def dataset(self, keys: list[str]):
        """A pyarrow dataset over some parts (streamed scans and filters)."""
        return self.storage.dataset(keys)

    @property
    def name(self) -> str:
        """The folder's last path component (a label for reports and the viewer)."""
        return location_name(self.location)

    def _read_part(self, key: str, kind: str, columns: list[str] | None) -> pa.Table:
        if columns is not None:
            # ParquetFile.read: no dataset discovery, about half the cost of pq.read_table per small part.
            part = self.open_part(key)
            have = set(part.schema_arrow.names)
            if all(c in have for c in columns):
                return part.read(columns=columns)
            # a column added after this part was written reads as null
            table, schema = part.read(columns=[c for c in columns if c in have]), SCHEMAS[kind]
            return pa.Table.from_arrays([table.column(c) if c in have else pa.nulls(table.num_rows, schema.field(c).type)
                                         for c in columns], names=columns)
        # Every column, conformed to the current schema (a part written before a column existed reads it as null).
        table, schema = self.open_part(key).read(), SCHEMAS[kind]
        if table.schema.equals(schema, check_metadata=False):
            return table
        return pa.Table.from_arrays(
            [table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
             for f in schema], schema=schema)

    def _read_ranked(self, kind: str, columns: list[str] | None) -> tuple[list[str], list[pa.Table], np.ndarray]:
        """Every part of a kind read once (the asked columns plus the ranking ones) and the global
        positions (in part, then row order) of the rows that win their key."""
        ok_col, _, ts_col = _RANK[kind]
        need = None if columns is None else list(dict.fromkeys([*columns, *KEYS[kind], ok_col, ts_col]))
        parts, tables = self._read_parts(kind, lambda parts: [self._read_part(p, kind, need) for p in parts])
        return parts, tables, _winning_rows(kind, tables)

    def _read_parts(self, kind: str, read: Any) -> tuple[list[str], Any]:
        """(the parts of a kind, read(parts)), listing again when a part vanished under a concurrent
        compaction (its rows are in the new part)."""
        for attempt in range(5):
            parts = self.parts(kind)
            try:
                return parts, read(parts)
            except FileNotFoundError:
                if attempt == 4:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def _winners(self, kind: str, parts: list[str]) -> list[list[int]]:
        """For each part, the indices of its rows that win their key (see the module docstring)."""
        ok_col, _, ts_col = _RANK[kind]
        tables = [self.open_part(p).read(columns=[*KEYS[kind], ok_col, ts_col]) for p in parts]
        return _split_by_part(_winning_rows(kind, tables), [t.num_rows for t in tables])

    def _snapshot(self, kind: str) -> tuple[list[str], list[list[int]]]:
        return self._read_parts(kind, lambda parts: self._winners(kind, parts))

    def read(self, kind: str, columns: list[str] | None = None) -> pa.Table:
        """All rows of a kind, deduplicated to one row per key (see the module docstring).

        Each part is read once; the winners are picked with vectorised sorts (a 60K-row scores
        folder of 850 parts reads in about a second, not tens of seconds)."""
        _, tables, winners = self._read_ranked(kind, columns)
        if not tables or not len(winners):
            schema = SCHEMAS[kind]
            if columns:
                schema = pa.schema([schema.field(c) for c in columns])
            return schema.empty_table()
        table = pa.concat_tables(tables, promote_options="default")
        table = table.take(pa.array(winners))
        return table.select(columns) if columns is not None else table

    def iter_rows(self, kind: str, columns: list[str] | None = None) -> Iterable[dict[str, Any]]:
        """Rows one part at a time, deduplicated like `read` (memory: one part, plus the keys)."""
        parts, kept = self._snapshot(kind)
        for p, idx in zip(parts, kept):
            if idx:
                yield from self._read_part(p, kind, columns).take(idx).to_pylist()

    def compact(self, kind: str) -> tuple[int, int]:
        """If some key has several rows, rewrite the parts of `kind` as one part with one row per key.
        Returns (rows before, after); a folder without duplicates is left as it is (no rewrite cost).

        Call it when no job writes this kind into the folder (the pool does, when a job finishes). A
        part written meanwhile by someone else is left alone (only the parts read are removed)."""
        parts, kept = self._snapshot(kind)
        before = sum(self.open_part(p).metadata.num_rows for p in parts)
        after = sum(len(k) for k in kept)
        if before == after:
            return before, after
        table = pa.concat_tables([self._read_part(p, kind, None).take(idx)
                                  for p, idx in zip(parts, kept) if idx]) if after else None
        if table is not None:
            self.storage.write(f"{kind}/{part_name('compact')}", _parquet_bytes(table))
        for p in parts:  # only after the merged part is durable
            self.storage.delete(p)
        return before, after

    def keys(self, kind: str) -> pa.Table:
        """The key columns of the rows of a kind (one row per key)."""
        return self.read(kind, columns=list(KEYS[kind]))

    def done_dialogue_ids(self, include_failed: bool = False) -> set[str]:
        """Ids of dialogues with a final row. Failed rows count as done only if asked."""
        t = self.read("dialogues", columns=["dialogue_id", "status"])
        ids = t.column("dialogue_id").to_pylist()
        status = t.column("status").to_pylist()
        return {i for i, s in zip(ids, status) if include_failed or s == "ok"}


def _codes(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Integer codes of a key column, equal values (nulls included) sharing a code."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return pc.dictionary_encode(column, null_encoding="encode").indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _winning_rows(kind: str, tables: list[pa.Table]) -> np.ndarray:
    """Global positions (sorted) of the rows that win their key: per key the largest
    (ok, timestamp, part, row); a null timestamp ranks lowest."""
    n = sum(t.num_rows for t in tables)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    ok_col, ok_value, ts_col = _RANK[kind]
    cols = [*KEYS[kind], ok_col, ts_col]
    table = pa.concat_tables([t.select(cols) for t in tables], promote_options="default")
    status = table.column(ok_col)
    if ok_value is not None:
        ok = pc.fill_null(pc.equal(status, ok_value), False)
    else:
        ok = pc.fill_null(pc.not_equal(status, "error"), True)
    ok = ok.to_numpy(zero_copy_only=False).astype(np.int8)
    ts = table.column(ts_col)
    ts = pc.fill_null(ts.cast(pa.int64()) if pa.types.is_timestamp(ts.type) else ts,
                      np.iinfo(np.int64).min).to_numpy(zero_copy_only=False).astype(np.int64)
    position = np.arange(n, dtype=np.int64)  # part order then row order: the last tie-breakers
    keys = [_codes(table.column(k)) for k in KEYS[kind]]
    # np.lexsort: the last key is the primary one.
    order = np.lexsort((position, ts, ok, *reversed(keys)))
    last = np.ones(n, dtype=bool)
    if n > 1:
        same = np.ones(n - 1, dtype=bool)
        for k in keys:
            sk = k[order]
            same &= sk[1:] == sk[:-1]
        last[:-1] = ~same
    return np.sort(order[last])


def _split_by_part(winners: np.ndarray, sizes: list[int]) -> list[list[int]]:
    bounds = np.cumsum([0, *sizes])
    cut = np.searchsorted(winners, bounds)
    return [(winners[cut[i]:cut[i + 1]] - bounds[i]).tolist() for i in range(len(sizes))]
