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

from esc_eval.sim.storage import Appender, LocalStorage, RunStorage, StorageSpec

log = logging.getLogger("esc_eval.storage")
# A call to the writer actor that takes longer than this means the driver's node is gone.
CALL_TIMEOUT_S = 300.0


class StorageServer:
    """The actor's body: a LocalStorage on the driver's node, plus open checkpoint logs."""

    def __init__(self, root: str):
        self.local = LocalStorage(root)
        self.appenders: dict[str, Appender] = {}

    def write(self, key: str, data: bytes, durable: bool = True) -> None:
        self.local.write(key, data, durable=durable)

    def read(self, key: str) -> bytes:
        return self.local.read(key)

    def read_from(self, key: str, offset: int) -> bytes:
        return self.local.read_from(key, offset)

    def list(self, folder: str, suffix: str = "") -> list[str]:
        return self.local.list(folder, suffix)

    def delete(self, key: str) -> None:
        self.close_appender(key)
        self.local.delete(key)

    def exists(self, key: str) -> bool:
        return self.local.exists(key)

    def size(self, key: str) -> int:
        return self.local.size(key)

    def append(self, key: str, data: bytes) -> int:
        ap = self.appenders.get(key)
        if ap is None:
            ap = self.appenders[key] = self.local.open_appender(key)
        ap.write(data)
        return len(data)

    def close_appender(self, key: str) -> None:
        ap = self.appenders.pop(key, None)
        if ap is not None:
            ap.close()

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()


def start_server(root: str) -> Any:
    """The writer actor for `root`, on this (the driver's) node, using no CPU of the cluster."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actor = ray.remote(StorageServer).options(
        num_cpus=0, max_concurrency=1, max_restarts=0,
        scheduling_strategy=NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False))
    return actor.remote(root)


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
        self._call("write", key, data, durable)

    def read(self, key: str) -> bytes:
        return self._call("read", key)

    def read_from(self, key: str, offset: int) -> bytes:
        return self._call("read_from", key, offset)

    def source(self, key: str) -> Any:
        import pyarrow as pa

        return pa.BufferReader(self.read(key))

    def list(self, folder: str, suffix: str = "") -> list[str]:
        return self._call("list", folder, suffix)

    def delete(self, key: str) -> None:
        self._call("delete", key)

    def exists(self, key: str) -> bool:
        return self._call("exists", key)

    def size(self, key: str) -> int:
        return self._call("size", key)

    def open_appender(self, key: str) -> Appender:
        return _ShippedAppender(self.server, key)

    def spec(self) -> StorageSpec:
        return StorageSpec(self.location, server=self.server, mode="via_driver")


class _ShippedAppender(Appender):
    """Sends without waiting; answers are collected later, so a failed write is logged, not lost silently."""

    def __init__(self, server: Any, key: str):
        self.server, self.key = server, key
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
        self.pending.append(self.server.append.remote(self.key, data))
        if len(self.pending) >= 64:
            self._collect()

    def close(self) -> None:
        try:
            self.pending.append(self.server.close_appender.remote(self.key))
            self._collect(timeout=30)
        except Exception as e:  # noqa: BLE001 - the driver's node is gone: nothing left to close
            log.warning("closing turn checkpoint %s: %s", self.key, str(e).splitlines()[0])
        self.pending = []
