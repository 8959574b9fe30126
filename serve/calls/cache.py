"""A cache of deterministic model calls, on storage a cluster can share.

A call is cached when its answer is determined by its inputs: temperature 0 (greedy) or a fixed
seed. The key is a SHA-256 over the model's identity (backend, model, endpoint: its
`cache_identity()`), the adapter, every message and every generation parameter: a changed prompt,
parameter, adapter or endpoint never hits. An entry is the answer as JSON (text, token counts,
finish reason, log-probabilities); a hit returns it marked `cached` and makes no model call, so it
is neither limited nor charged.

Entries live in a `CallStore`: `get(key) -> bytes | None` and `put(key, data)`, atomic (a reader
never sees half an entry). `ArrowFsStore` is the implementation over `pyarrow.fs`: a local folder,
or any URI pyarrow reads (s3://bucket/prefix, gs://...), so workers on other nodes share it.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import uuid
from dataclasses import asdict
from typing import Any, Awaitable, Callable, Protocol

from esc_eval.serve.chat.interface import ChatModel, ChatResult, GenerationParams, WrapperChatModel, as_messages

log = logging.getLogger("esc_eval.serve.calls.cache")
KEY_VERSION = 1  # part of every key: a change of the entry format starts a fresh cache


class CallStore(Protocol):
    """Where cache entries live."""

    def get(self, key: str) -> bytes | None: ...

    def put(self, key: str, data: bytes) -> None: ...


class ArrowFsStore:
    """Entries as files `<root>/<key[:2]>/<key>.json` on any pyarrow filesystem. A local folder gets
    a temporary file renamed into place; object stores publish an object whole when it is closed."""

    def __init__(self, root: str):
        from pyarrow import fs as pafs

        self.root_uri = str(root)
        if "://" in self.root_uri:
            self.fs, self.root = pafs.FileSystem.from_uri(self.root_uri)
        else:
            self.fs, self.root = pafs.LocalFileSystem(), os.path.abspath(self.root_uri)
        self.local = self.fs.type_name == "local"
        self._dirs: set[str] = set()

    def _path(self, key: str) -> tuple[str, str]:
        folder = f"{self.root.rstrip('/')}/{key[:2]}"
        return folder, f"{folder}/{key}.json"

    def get(self, key: str) -> bytes | None:
        _, path = self._path(key)
        try:
            with self.fs.open_input_stream(path) as f:
                return f.read()
        except FileNotFoundError:
            return None

    def put(self, key: str, data: bytes) -> None:
        folder, path = self._path(key)
        if folder not in self._dirs:
            self.fs.create_dir(folder, recursive=True)
            self._dirs.add(folder)
        if not self.local:
            with self.fs.open_output_stream(path) as f:
                f.write(data)
            return
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with self.fs.open_output_stream(tmp) as f:
            f.write(data)
        self.fs.move(tmp, path)  # rename: atomic on one filesystem

    def __repr__(self) -> str:
        return f"ArrowFsStore({self.root_uri!r})"


def cacheable(params: GenerationParams) -> bool:
    """Deterministic calls only: greedy, or sampled with a fixed seed."""
    return params.temperature == 0 or params.seed is not None


# Generation parameters added after the key's version: left out while unset, so a call asked before they
# existed still finds its answer (a cache of paid API calls must not go cold on an upgrade).
PARAMS_ADDED_LATER = ("json_schema", "logprob_labels")


def cache_key(identity: dict[str, Any], messages, params: GenerationParams, adapter: str | None) -> str:
    dumped = params.model_dump(mode="json")
    for name in PARAMS_ADDED_LATER:
        if dumped.get(name) is None:
            dumped.pop(name, None)
    payload = {"v": KEY_VERSION, "model": identity, "adapter": adapter,
               "messages": [[m.role, m.content] for m in as_messages(messages)], "params": dumped}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def encode_result(result: ChatResult) -> bytes:
    data = asdict(result)
    for k in ("attempts", "cached"):
        data.pop(k, None)
    return json.dumps(data, ensure_ascii=False).encode("utf-8")


def decode_result(data: bytes) -> ChatResult | None:
    try:
        fields = json.loads(data)
        return ChatResult(**fields, cached=True)
    except (ValueError, TypeError):
        return None  # written by another version, or damaged: a miss


class CachedChatModel(WrapperChatModel):
    """`inner` behind the call cache. on_hit: awaited on every hit (the run's counters)."""

    def __init__(self, inner: ChatModel, store: CallStore, default_params: GenerationParams | None = None,
                 on_hit: Callable[[], Awaitable[None]] | None = None):
        super().__init__(inner)
        self.store, self.on_hit = store, on_hit
        # what `params=None` means to the inner model, so the key names the real parameters
        self._defaults = default_params or inner.default_params or GenerationParams()
        self.identity = inner.cache_identity()
        self.hits = self.misses = 0
        self._warned = False

    @property
    def default_params(self) -> GenerationParams:  # type: ignore[override]
        return self._defaults

    def cache_identity(self):
        return self.identity

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter=None, session_id=None) -> ChatResult:
        effective = params or self._defaults
        if not cacheable(effective):
            return await self.inner.chat(messages, params, adapter=adapter, session_id=session_id)
        key = cache_key(self.identity, messages, effective, adapter)
        try:
            data = await asyncio.to_thread(self.store.get, key)
        except OSError as e:  # an unreadable cache is a miss, never a failed call
            self._warn("read", e)
            data = None
        if data is not None:
            result = decode_result(data)
            if result is not None:
                self.hits += 1
                if self.on_hit is not None:
                    await self.on_hit()
                return result
        self.misses += 1
        result = await self.inner.chat(messages, params, adapter=adapter, session_id=session_id)
        try:
            await asyncio.to_thread(self.store.put, key, encode_result(result))
        except OSError as e:  # a cache that cannot be written costs money later, never the answer now
            self._warn("write", e)
        return result

    def _warn(self, what: str, e: OSError) -> None:
        if not self._warned:
            log.warning("call cache %r: cannot %s (%s); calls go to the model", self.store, what, e)
            self._warned = True

