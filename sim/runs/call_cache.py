"""The call cache kept inside a run folder (`<run>/cache/`), for jobs whose `execution.cache_dir` is
unset (pool/calls.py says where a job's cache lives; serve/calls/cache.py caches the calls)."""
from __future__ import annotations

from typing import Any


# The run folder's own cache (`<run>/cache/`): each worker reaches it the way it reaches the run
# folder (directly, through the writer on the driver's node, or in object storage: runs/open.py).
RUN_FOLDER_CACHE = "<run folder>/cache"


class RunFolderCallCache:
    """The call cache inside the run folder, through a worker's view of its storage: entries
    `cache/<key[:2]>/<key>.json`, written atomically (a reader sees a whole entry or none)."""

    def __init__(self, storage: Any):
        self.storage = storage

    @staticmethod
    def _key(key: str) -> str:
        return f"cache/{key[:2]}/{key}.json"

    def get(self, key: str) -> bytes | None:
        try:
            return self.storage.read(self._key(key))
        except FileNotFoundError:
            return None

    def put(self, key: str, data: bytes) -> None:
        self.storage.write(self._key(key), data, durable=False)
