"""Turn checkpoints of the dialogues in flight: one append-only log per writer process.

A dialogue's turns are checkpointed after every turn so that a run killed mid-dialogue resumes it
at that turn. One JSON file per dialogue per turn (temp file + rename) cost a file creation, a
rename and a re-encoding of every earlier turn for each model call: 4x the pool's throughput with
fast backends. Here each writer (a worker process) appends to its own log, `checkpoints/<writer>.log`:

    [{"d": "<dialogue id>", "from": 3, "turns": [<turn 3>, <turn 4>]},   turns appended from index 3
     {"done": ["<dialogue id>", ...]}, ...]                              rows written: forget these

Only the turns not yet in the log are encoded, and every turn finished in one pass of the event
loop goes out in one line, one encoding and one `write` (before the loop runs anything else, so the
guarantee is the one the JSON files gave: a turn survives a crash of its process once its
`on_turn` returned; without fsync, as before, since only a process crash has to be survived).

Where the logs live is the run folder's storage (sim/runs/storage.py): on a local disk (or on the
driver's disk through its writer actor, for workers on other nodes) a writer appends to one file,
`checkpoints/<writer>.log`; in object storage, which cannot append, each send is a new object
`checkpoints/<writer>.<seq>.log`, and readers join a writer's objects in order. Stores where a send
is a round trip batch a writer's lines for `checkpoint_interval_s` (a crash loses at most that long
of turns, played again).

Compaction: when a writer's log outgrows `rotate_bytes` at a flush, it starts a new log holding
only its live dialogues and removes the old one. The driver merges every log of a folder into one
before a job (`compact_folder`) and removes them all once the job has written a row per item
(`clear_folder`). A torn last line (a crash mid-write) is ignored: its turns are generated again.
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import uuid
from pathlib import Path
from typing import Any, Iterable

from esc_eval.sim.runs.storage import LocalStorage, RunStorage

LOG_GLOB = "*.log"
LOG_SUFFIX = ".log"
# <writer>.log (appended) or <writer>.<seq>.log (one object per send); writer names have no dots.
_LOG_NAME = re.compile(r"^(?P<writer>[^.]+)(?:\.(?P<seq>\d+))?\.log$")
# One encoder for every line (json.dumps builds one per call when given options). ASCII escapes:
# any text a model returns (even a lone surrogate) round-trips, and the C encoder is the fast one.
_encode = json.JSONEncoder(separators=(",", ":")).encode


def _parse(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """Complete JSON lines of `data`; returns them and the length of the bytes they used."""
    end = data.rfind(b"\n") + 1  # a line without its newline is still being written, or torn
    out = []
    for raw in data[:end].splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # a torn line left by a crash, followed by later writes: skip it
        out.extend(e for e in (line if isinstance(line, list) else [line]) if isinstance(e, dict))
    return out, end


def _where(folder: str | os.PathLike[str], storage: RunStorage | None) -> tuple[RunStorage, str]:
    """(storage, key prefix) of a checkpoint folder: a local path, or a folder in a run's storage."""
    if storage is None:
        return LocalStorage(folder), ""
    return storage, str(folder).strip("/")


def _logs(storage: RunStorage, prefix: str) -> list[tuple[str, str]]:
    """(writer, key) of every log object of the folder, a writer's objects in send order."""
    out = []
    for key in storage.list(prefix, LOG_SUFFIX):
        m = _LOG_NAME.match(key.rsplit("/", 1)[-1])
        if m:
            out.append((m["writer"], int(m["seq"] or 0), key))
    return [(w, k) for w, _, k in sorted(out)]


def _writer_name() -> str:
    host = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()[:12])
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class _Index:
    """Turns per dialogue, rebuilt from log lines. Within one log the latest line wins (a rewrite
    from turn 0 replaces); across logs the longest wins (a writer that took a dialogue over from a
    dead one rewrote it whole and went on); a dialogue done in any log is dropped from all."""

    def __init__(self) -> None:
        self.turns: dict[str, list[dict[str, Any]]] = {}
        self.holder: dict[str, Any] = {}
        self.done: set[str] = set()

    def apply(self, line: dict[str, Any], source: Any) -> None:
        if "done" in line:
            for did in line["done"]:
                self.done.add(did)
                self.turns.pop(did, None)
                self.holder.pop(did, None)
            return
        did, start, new = line.get("d"), line.get("from"), line.get("turns")
        if not isinstance(did, str) or not isinstance(start, int) or not isinstance(new, list) or did in self.done:
            return
        have = self.turns.get(did, [])
        own = self.holder.get(did, source) == source
        have_here = have if own else []
        if start > len(have_here) and own:
            return  # a gap (its earlier lines were torn): keep what is contiguous
        merged = have_here[:start] + new if own else (new if start == 0 else [])
        if own or len(merged) > len(have):
            self.turns[did], self.holder[did] = merged, source


class _Reader:
    """Reads a checkpoint folder incrementally: each log from where the last look stopped."""

    def __init__(self, storage: RunStorage, prefix: str):
        self.storage, self.prefix = storage, prefix
        self.index = _Index()
        self.offsets: dict[str, int] = {}

    def refresh(self, skip_writer: str | None = None) -> None:
        for writer, key in _logs(self.storage, self.prefix):
            if writer == skip_writer:
                continue
            offset = self.offsets.get(key, 0)
            lines, used = _parse(self.storage.read_from(key, offset))
            self.offsets[key] = offset + used
            for line in lines:
                self.index.apply(line, writer)


def read_folder(folder: str | os.PathLike[str], storage: RunStorage | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every live dialogue's checkpointed turns (turn rows) in a checkpoint folder."""
    reader = _Reader(*_where(folder, storage))
    reader.refresh()
    return reader.index.turns


def has_logs(folder: str | os.PathLike[str], storage: RunStorage | None = None) -> bool:
    return bool(_logs(*_where(folder, storage)))


def compact_folder(folder: str | os.PathLike[str], drop: set[str] | frozenset[str] = frozenset(),
                   storage: RunStorage | None = None) -> int:
    """Merge every log of the folder into one holding only live dialogues not in `drop` (e.g. those
    that have a row already); returns how many. Run it when no writer is running (the driver does,
    before a job)."""
    store, prefix = _where(folder, storage)
    logs = _logs(store, prefix)
    if not logs:
        return 0
    live = {did: t for did, t in read_folder(prefix, store).items() if did not in drop}
    if live:
        body = _encode([{"d": did, "from": 0, "turns": turns} for did, turns in live.items()]) + "\n"
        store.write(f"{prefix}/{_writer_name()}.log" if prefix else f"{_writer_name()}.log", body.encode("utf-8"))
    for _, key in logs:  # after the merged log is durable
        store.delete(key)
    return len(live)


def clear_folder(folder: str | os.PathLike[str], storage: RunStorage | None = None) -> None:
    """Remove every log (the job wrote a row for each of its items: nothing is in flight)."""
    store, prefix = _where(folder, storage)
    for _, key in _logs(store, prefix):
        store.delete(key)


class TurnCheckpoints:
    """One writer's view of a checkpoint folder: `save` appends turns, `load` finds turns saved by
    any writer (including dead ones), `done` forgets dialogues whose rows are written.

    folder: a local path, or with `storage` the checkpoint folder's key in a run folder's storage."""

    def __init__(self, folder: str | os.PathLike[str], rotate_bytes: int = 8 << 20, storage: RunStorage | None = None):
        self.storage, self.prefix = _where(folder, storage)
        self.folder = Path(folder) if storage is None else None  # kept for local callers
        self.rotate_bytes = rotate_bytes
        self.interval = self.storage.checkpoint_interval_s
        self.writer: str | None = None
        self._appender = None
        self._seq = 0
        self._keys: list[str] = []  # this writer's log objects
        self._size = 0
        self.live: dict[str, list[dict[str, Any]]] = {}  # this writer's dialogues (the callers' lists)
        self._written: dict[str, int] = {}  # how many of a live dialogue's turns are in the log
        self._live_turns = 0  # turns in the log of live dialogues (what a rotation rewrites)
        self._logged_turns = 0  # turns in the log
        self._pending: list[dict[str, Any]] = []  # entries of the next line
        self._flush_scheduled = False
        self._reader = _Reader(self.storage, self.prefix)
        self._others = self._reader.index
        self.refresh()

    @property
    def path(self) -> Path | None:
        """This writer's current log on local disk (tests and tools); None elsewhere or before a write."""
        if self.folder is None or not self._keys:
            return None
        return self.folder / self._keys[-1].rsplit("/", 1)[-1]

    # -- reading what other writers left --------------------------------------------------------
    def refresh(self) -> None:
        """Read what other logs gained since the last look (a dead worker's dialogues to take over)."""
        self._reader.refresh(skip_writer=self.writer)

    def load(self, did: str) -> list[dict[str, Any]]:
        """The turns (rows) checkpointed for a dialogue by this or another writer; [] if none."""
        if did in self.live:
            return self.live[did][: self._written[did]]
        return list(self._others.turns.get(did, []))

    # -- writing ----------------------------------------------------------------------------
    def save(self, did: str, turns: list[dict[str, Any]]) -> None:
        """Checkpoint a dialogue's turns so far: appends those not yet in this writer's log. `turns`
        only grows between calls for one dialogue (a different list is written whole)."""
        start = self._written.get(did, 0) if self.live.get(did) is turns else 0
        if start >= len(turns):
            return
        self.live[did] = turns  # by reference: the caller appends to it (no copy per turn)
        self._written[did] = len(turns)
        self._pending.append({"d": did, "from": start, "turns": turns[start:]})
        self._live_turns += len(turns) - start
        self._logged_turns += len(turns) - start
        self._schedule()

    def done(self, dids: Iterable[str]) -> None:
        """These dialogues have their rows written: forget them (and rotate the log when it is big)."""
        dids = [d for d in dids if d in self.live or d in self._others.turns]
        if not dids:
            return
        for did in dids:
            self.live.pop(did, None)
            self._live_turns -= self._written.pop(did, 0)
            self._others.turns.pop(did, None)
        self._pending.append({"done": dids})
        self.flush()
        # Rotate when the log is big and mostly finished dialogues: the rewrite costs the live part.
        if self._size >= self.rotate_bytes and 2 * self._live_turns < self._logged_turns:
            self._rotate()

    def _schedule(self) -> None:
        # Turns finished in one pass of the event loop leave in one write, before the loop goes on
        # (or, where a send is a round trip, within `interval` seconds).
        if self._flush_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._flush_scheduled = True
        if self.interval > 0:
            loop.call_later(self.interval, self.flush)
        else:
            loop.call_soon(self.flush)

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def flush(self) -> None:
        self._flush_scheduled = False
        if not self._pending:
            return
        data = (_encode(self._pending) + "\n").encode("utf-8")
        self._pending = []
        if self.writer is None:
            self.writer = _writer_name()
        if self.storage.supports_append:
            if self._appender is None:
                key = self._key(f"{self.writer}.log")
                self._appender = self.storage.open_appender(key)
                self._keys = [key]
            self._appender.write(data)
        else:  # object storage: one object per send, joined in order by readers
            key = self._key(f"{self.writer}.{self._seq:08d}.log")
            self.storage.write(key, data, durable=False)
            self._keys.append(key)
            self._seq += 1
        self._size += len(data)

    def _rotate(self) -> None:
        """A new log with only the live dialogues; the old one goes once the new one is written."""
        old_keys, old_appender = self._keys, self._appender
        self.writer, self._appender, self._keys, self._seq, self._size = None, None, [], 0, 0
        self._pending = [{"d": did, "from": 0, "turns": turns[: self._written[did]]} for did, turns in self.live.items()]
        self._logged_turns = self._live_turns
        if self._pending:
            self.flush()
        if old_appender is not None:
            old_appender.close()
        for key in old_keys:
            self.storage.delete(key)

    def close(self) -> None:
        self.flush()
        if self._appender is not None:
            self._appender.close()
            self._appender = None
