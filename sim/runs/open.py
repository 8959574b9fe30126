"""Opening a run folder's storage (runs/storage.py: the interface and local disk): a location names a
store (`open_storage`: a URI -> runs/storage_objects.py, a path -> local disk), and a worker reopens
the driver's run folder from a `StorageSpec` (directly, or through the writer actor on the driver's
node: runs/storage_server.py). The factory lives here, above the three implementations, so none of
them imports another's module."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from esc_eval.sim.runs.storage import LocalStorage, RunFolderError, RunStorage, is_uri, join_location, local_path, redact_uri
from esc_eval.sim.runs.storage_objects import ArrowStorage
from esc_eval.sim.runs.storage_server import ShippedStorage


class StorageSpec:
    """How a worker reaches the run folder: pickled into the job's chunks.

    location: the folder's path or URI. For a local path, marker is a private file the driver
    wrote there for this job: a worker that sees it shares the driver's disk (same node, or a
    shared file system) and writes directly; one that does not goes through `server`, a writer
    actor on the driver's node. mode 'direct' refuses the server (a shared file system is
    required); 'via_driver' always uses it."""

    def __init__(self, location: str, marker: str | None = None, server: Any = None, mode: str = "auto"):
        self.location, self.marker, self.server, self.mode = location, marker, server, mode

    def open(self) -> RunStorage:
        if is_uri(self.location):
            return ArrowStorage(self.location)
        local = LocalStorage(self.location)
        sees = self.marker is None or local.exists(self.marker)
        if self.mode != "via_driver" and sees:
            return local
        if self.server is None or self.mode == "direct":
            import socket

            raise RunFolderError(
                f"{self.location}: this worker's node ({socket.gethostname()}) cannot see the driver's run folder"
                + (" (execution.worker_writes: direct needs a file system shared by every node)" if self.mode == "direct" else ""))
        return ShippedStorage(self.server, self.location)

    def __repr__(self) -> str:
        return f"StorageSpec({redact_uri(self.location)!r}, mode={self.mode!r})"


def open_storage(location: str | os.PathLike[str]) -> RunStorage:
    """The storage a location names: a URI -> ArrowStorage, anything else -> LocalStorage."""
    text = str(location)
    if is_uri(text):
        return ArrowStorage(text)
    return LocalStorage(text)


class OutputFolder:
    """Where a command writes its files (a report, a leaderboard): a local folder as it is, or, for a
    URI, a temporary local folder uploaded there when the block ends without an error.

        with OutputFolder(out) as folder:      # folder: a local Path to write into
            paths = write_things(folder)
            return folder.finals(paths)         # the files' final locations (paths or URIs)
    """

    def __init__(self, location: str | os.PathLike[str]):
        self.location = str(location)
        self._tmp: tempfile.TemporaryDirectory | None = None
        self.path = local_path(self.location)

    def __enter__(self) -> "OutputFolder":
        if is_uri(self.location):
            self._tmp = tempfile.TemporaryDirectory(prefix="esc-eval-out-")
            self.path = Path(self._tmp.name)
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, exc_type, *exc: Any) -> None:
        if self._tmp is None:
            return
        try:
            if exc_type is None:
                store = open_storage(self.location)
                for f in sorted(p for p in self.path.rglob("*") if p.is_file()):
                    store.write(f.relative_to(self.path).as_posix(), f.read_bytes())
        finally:
            self._tmp.cleanup()

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def final(self, path: str | os.PathLike[str]) -> str | Path:
        """Where a file written under the folder ends up."""
        if self._tmp is None:
            return Path(path)
        return join_location(self.location, Path(path).relative_to(self.path).as_posix())

    def finals(self, paths: dict[str, Any]) -> dict[str, Any]:
        return {k: self.final(v) if isinstance(v, (str, os.PathLike)) and str(v).startswith(str(self.path)) else v
                for k, v in paths.items()}
