"""A local run folder reached from other nodes: a writer actor on the driver's node.

Workers on the driver's node (or on a file system every node shares) write the run folder
directly. A worker on another node cannot see the driver's disk, so its parts and turn
checkpoints travel as bytes through Ray to `StorageServer`, an actor pinned to the driver's node
that writes them with the same LocalStorage (temp file + rename). The guarantees do not change:
a part is written atomically before the worker forgets its items' checkpoints, and checkpoints
land on the driver's disk, so they survive the node that wrote them.

The actor runs one call at a time, so the calls of one worker run in the order it sent them
(Ray keeps a submitter's order for a sequential actor): checkpoint lines can be sent without
waiting (`append`), and a part is always on disk before the "done" line that follows it.
"""
from __future__ import annotations

import logging
from typing import Any

from esc_eval.sim.runs.storage import Appender, LocalStorage, RunStorage

log = logging.getLogger("esc_eval.storage")
# A call to the writer actor that takes longer than this means the driver's node is gone.
CALL_TIMEOUT_S = 300.0


class StorageServer:
    """The actor's body: the run folders on the driver's node (a LocalStorage each), plus open
    checkpoint logs. One per pool, serving every run folder its jobs use: an actor is a process,
    and starting one costs about a core-second, so none starts while a job runs."""

    def __init__(self) -> None:
        self.folders: dict[str, LocalStorage] = {}
        self.appenders: dict[tuple[str, str], Appender] = {}

    def _local(self, root: str) -> LocalStorage:
        local = self.folders.get(root)
        if local is None:
            local = self.folders[root] = LocalStorage(root)
        return local

    def write(self, root: str, key: str, data: bytes, durable: bool = True) -> None:
        self._local(root).write(key, data, durable=durable)

    def read(self, root: str, key: str) -> bytes:
        return self._local(root).read(key)

    def read_from(self, root: str, key: str, offset: int) -> bytes:
        return self._local(root).read_from(key, offset)

    def list(self, root: str, folder: str, suffix: str = "") -> list[str]:
        return self._local(root).list(folder, suffix)

    def delete(self, root: str, key: str) -> None:
        self.close_appender(root, key)
        self._local(root).delete(key)

    def exists(self, root: str, key: str) -> bool:
        return self._local(root).exists(key)

    def size(self, root: str, key: str) -> int:
        return self._local(root).size(key)

    def append(self, root: str, key: str, data: bytes) -> int:
        ap = self.appenders.get((root, key))
        if ap is None:
            ap = self.appenders[(root, key)] = self._local(root).open_appender(key)
        ap.write(data)
        return len(data)

    def close_appender(self, root: str, key: str) -> None:
        ap = self.appenders.pop((root, key), None)
        if ap is not None:
            ap.close()

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()


def start_server() -> Any:
    """A writer actor on this (the driver's) node for any run folder there, using no CPU of the
    cluster. Returns at once: the actor starts in the background."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor = ray.remote(StorageServer).options(
        num_cpus=0, max_concurrency=1, max_restarts=0,
        scheduling_strategy=NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False))
    return actor.remote()


class ShippedStorage(RunStorage):
    """A worker's view of the driver's run folder through the writer actor."""

    supports_append = True
    # A send is a Ray call: batch a writer's checkpoint lines (a crash of its node loses at most
    # this long of turns, played again on resume).
    checkpoint_interval_s = 0.2

    def __init__(self, server: Any, location: str):
        self.server, self.location = server, location

    def _call(self, method: str, *args: Any) -> Any:
        # ref.future() rather than ray.get: the pool's workers are async actors, where ray.get warns;
        # the wait is as short (one write on the driver's node) and Ray resolves it on its own thread.
        return getattr(self.server, method).remote(*args).future().result(timeout=CALL_TIMEOUT_S)

    def write(self, key: str, data: bytes, *, durable: bool = True) -> None:
        self._call("write", self.location, key, data, durable)

    def read(self, key: str) -> bytes:
        return self._call("read", self.location, key)

    def read_from(self, key: str, offset: int) -> bytes:
        return self._call("read_from", self.location, key, offset)

    def source(self, key: str) -> Any:
        import pyarrow as pa

        return pa.BufferReader(self.read(key))

    def list(self, folder: str, suffix: str = "") -> list[str]:
        return self._call("list", self.location, folder, suffix)

    def delete(self, key: str) -> None:
        self._call("delete", self.location, key)

    def exists(self, key: str) -> bool:
        return self._call("exists", self.location, key)

    def size(self, key: str) -> int:
        return self._call("size", self.location, key)

    def open_appender(self, key: str) -> Appender:
        return _ShippedAppender(self.server, self.location, key)


class _ShippedAppender(Appender):
    """Sends without waiting; answers are collected later, so a failed write is logged, not lost silently."""

    def __init__(self, server: Any, root: str, key: str):
        self.server, self.root, self.key = server, root, key
        self.pending: list[Any] = []

    def _collect(self, timeout: float = 0) -> None:
        import ray

        if not self.pending:
            return
        done, self.pending = ray.wait(self.pending, num_returns=len(self.pending), timeout=timeout)
        for ref in done:
            try:
                ref.future().result()
            except Exception as e:  # noqa: BLE001 - a lost checkpoint line only means replaying turns
                log.warning("turn checkpoint %s not written on the driver's node: %s", self.key, str(e).splitlines()[0])

    def write(self, data: bytes) -> None:
        self.pending.append(self.server.append.remote(self.root, self.key, data))
        if len(self.pending) >= 64:
            self._collect()

    def close(self) -> None:
        try:
            self.pending.append(self.server.close_appender.remote(self.root, self.key))
            self._collect(timeout=30)
        except Exception as e:  # noqa: BLE001 - the driver's node is gone: nothing left to close
            log.warning("closing turn checkpoint %s: %s", self.key, str(e).splitlines()[0])
        self.pending = []
