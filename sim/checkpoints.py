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

Compaction: when a writer's log outgrows `rotate_bytes` at a flush, it starts a new log holding
only its live dialogues and removes the old one. The driver merges every log of a folder into one
before a job (`compact_folder`) and removes them all once the job has written a row per item
(`clear_folder`). A torn last line (a crash mid-write) is ignored: its turns are generated again.
"""
from __future__ import annotations

import asyncio
import json
import os
import socket
import uuid
from pathlib import Path
from typing import Any, Iterable

from esc_eval.sim.runfolder import atomic_write_bytes

LOG_GLOB = "*.log"
# One encoder for every line (json.dumps builds one per call when given options). ASCII escapes:
# any text a model returns (even a lone surrogate) round-trips, and the C encoder is the fast one.
_encode = json.JSONEncoder(separators=(",", ":")).encode


def _lines(path: Path, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Complete JSON lines of `path` from byte `offset`; returns them and the offset after the last one."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1  # a line without its newline is still being written, or torn
    out = []
    for raw in data[:end].splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue  # a torn line left by a crash, followed by later writes: skip it
        out.extend(e for e in (line if isinstance(line, list) else [line]) if isinstance(e, dict))
    return out, offset + end


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


def read_folder(folder: str | os.PathLike[str]) -> dict[str, list[dict[str, Any]]]:
    """Every live dialogue's checkpointed turns (turn rows) in a checkpoint folder."""
    index = _Index()
    folder = Path(folder)
    for path in sorted(folder.glob(LOG_GLOB)) if folder.is_dir() else []:
        for line in _lines(path)[0]:
            index.apply(line, path)
    return index.turns


def has_logs(folder: str | os.PathLike[str]) -> bool:
    folder = Path(folder)
    return folder.is_dir() and any(folder.glob(LOG_GLOB))


def compact_folder(folder: str | os.PathLike[str], drop: set[str] | frozenset[str] = frozenset()) -> int:
    """Merge every log of the folder into one holding only live dialogues not in `drop` (e.g. those
    that have a row already); returns how many. Run it when no writer is running (the driver does,
    before a job)."""
    folder = Path(folder)
    logs = sorted(folder.glob(LOG_GLOB)) if folder.is_dir() else []
    if not logs:
        return 0
    live = {did: t for did, t in read_folder(folder).items() if did not in drop}
    if live:
        body = _encode([{"d": did, "from": 0, "turns": turns} for did, turns in live.items()]) + "\n"
        atomic_write_bytes(folder / f"{_writer_name()}.log", body.encode("utf-8"))
    for p in logs:  # after the merged log is durable
        p.unlink(missing_ok=True)
    return len(live)


def clear_folder(folder: str | os.PathLike[str]) -> None:
    """Remove every log (the job wrote a row for each of its items: nothing is in flight)."""
    folder = Path(folder)
    for p in folder.glob(LOG_GLOB) if folder.is_dir() else []:
        p.unlink(missing_ok=True)


def _writer_name() -> str:
    return f"{socket.gethostname()[:12]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class TurnCheckpoints:
    """One writer's view of a checkpoint folder: `save` appends turns, `load` finds turns saved by
    any writer (including dead ones), `done` forgets dialogues whose rows are written."""

    def __init__(self, folder: str | os.PathLike[str], rotate_bytes: int = 8 << 20):
        self.folder = Path(folder)
        self.rotate_bytes = rotate_bytes
        self.path: Path | None = None
        self._fd: int | None = None
        self._size = 0
        self.live: dict[str, list[dict[str, Any]]] = {}  # this writer's dialogues (the callers' lists)
        self._written: dict[str, int] = {}  # how many of a live dialogue's turns are in the log
        self._live_turns = 0  # turns in the log of live dialogues (what a rotation rewrites)
        self._logged_turns = 0  # turns in the log
        self._pending: list[dict[str, Any]] = []  # entries of the next line
        self._flush_scheduled = False
        self._others = _Index()
        self._offsets: dict[Path, int] = {}
        self.refresh()

    # -- reading what other writers left --------------------------------------------------------
    def refresh(self) -> None:
        """Read what other logs gained since the last look (a dead worker's dialogues to take over)."""
        if not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob(LOG_GLOB)):
            if path == self.path:
                continue
            lines, self._offsets[path] = _lines(path, self._offsets.get(path, 0))
            for line in lines:
                self._others.apply(line, path)

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
        # Turns finished in one pass of the event loop leave in one write, before the loop goes on.
        if self._flush_scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._flush_scheduled = True
        loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flush_scheduled = False
        if not self._pending:
            return
        data = (_encode(self._pending) + "\n").encode("utf-8")
        self._pending = []
        if self._fd is None:
            self._open()
        written = 0
        while written < len(data):
            written += os.write(self._fd, data[written:])
        self._size += len(data)

    def _open(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / f"{_writer_name()}.log"
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = 0

    def _rotate(self) -> None:
        """A new log with only the live dialogues; the old one goes once the new one is written."""
        old_path, old_fd = self.path, self._fd
        self._fd = None
        self._pending = [{"d": did, "from": 0, "turns": turns[: self._written[did]]} for did, turns in self.live.items()]
        self._logged_turns = self._live_turns
        if self._pending:
            self.flush()
        if old_fd is not None:
            os.close(old_fd)
        if old_path is not None:
            old_path.unlink(missing_ok=True)

    def close(self) -> None:
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
