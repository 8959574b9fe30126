"""Build chat models from config: registry names or backend specs -> ChatModel instances.

One instance per distinct (spec, options) inside a process, so participants naming the same
model share one engine (and its batching and prefix cache): the role, a target and the judge
that name the same model and options use one engine.

Engines are released by need, not blindly: a worker holds the role's engine and one target's at a
time (TargetEngines: the next target's engine starts only after the previous target's dialogues
in this worker are done and its engine is released, unless the role or the judge also uses it),
and a job starting on a worker releases the engines of earlier jobs it does not use (retain).
On GPUs this is what lets the next engine fit; the plan (serve/plan/planner.py) sizes each engine's share.

Where the run's plan placed a model (serve/plan/planner.py, given to the workers in ESC_EVAL_PLACEMENT),
the pool builds it there: an in-process engine with the plan's GPU share, or a handle to its
Serve deployment. The model's own options are untouched (dialogue ids and fingerprints stay).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from typing import Any, AsyncIterator

from esc_eval.serve.chat.interface import ChatModel, WrapperChatModel, get_chat_model
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.plan.planner import PLACEMENT_ENV, placement_from_env, ref_key
from esc_eval.serve.registry.registry import resolve
from esc_eval.serve.calls.retry import RetryingChatModel
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.call_cache import RUN_FOLDER_CACHE, RunFolderCallCache

log = logging.getLogger("esc_eval.participants")


class CallTally:
    """Model calls answered in one worker and their tokens (what live progress shows mid-item)."""

    def __init__(self) -> None:
        self.calls = self.prompt_tokens = self.completion_tokens = 0

    def snapshot(self) -> dict[str, int]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}


class _Tallied(WrapperChatModel):
    """A chat model that adds each answer to a tally (one attribute lookup and three additions per call).
    Every other hook is the inner model's, as ChatModel declares it (WrapperChatModel passes each on)."""

    def __init__(self, inner: ChatModel, tally: CallTally):
        super().__init__(inner)
        self.tally = tally

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        result = await self.inner.chat(messages, params, adapter=adapter, session_id=session_id)
        t = self.tally
        t.calls += 1
        t.prompt_tokens += result.prompt_tokens or 0
        t.completion_tokens += result.completion_tokens or 0
        return result


class _Pooled(WrapperChatModel):
    """The pool's current model for a ref: after the pool released its engine, the next call
    builds it again (a chunk re-sent after a worker loss may bring an earlier target back)."""

    def __init__(self, pool: "ModelPool", ref: ModelRef):
        super().__init__(pool.raw(ref))
        self.pool, self.ref = pool, ref

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        if self.inner.released:
            self.inner = self.pool.raw(self.ref)
        return await self.inner.chat(messages, params, adapter=adapter, session_id=session_id)


class ModelPool:
    """Chat models of one worker, built on first use, shared between participants and jobs."""

    def __init__(self) -> None:
        self._models: dict[str, ChatModel] = {}
        self._stores: dict[str, object] = {}
        # The run folder as this worker reaches it (set per job by the pool: sim/pool/worker.py).
        self.run_storage = None
        self.tally = CallTally()
        self._placement_raw: str | None = None
        self._placement: dict[str, dict[str, Any]] = {}

    def placement(self) -> dict[str, dict[str, Any]]:
        raw = os.environ.get(PLACEMENT_ENV, "")
        if raw != self._placement_raw:
            self._placement, self._placement_raw = placement_from_env(), raw
        return self._placement

    def _build(self, ref: ModelRef) -> tuple[str, Any]:
        """(pool key, a function building the model) for `ref`, where the run's plan placed it."""
        placed = self.placement().get(ref_key(ref.model, ref.options), {})
        if "serve" in placed:
            spec, options = placed["serve"]["spec"], placed["serve"].get("options", {})
        else:
            spec, registry_options = resolve(ref.model)
            options = {**registry_options, **ref.options, **placed.get("engine", {})}
        key = spec + "|" + json.dumps(options, sort_keys=True, default=str)
        return key, lambda: get_chat_model(spec, **options)

    def key(self, ref: ModelRef) -> str:
        return self._build(ref)[0]

    def store(self, root: str):
        """The call cache at `root` (a folder or a URI; sim/call_setup.call_cache_location says where)."""
        if root == RUN_FOLDER_CACHE:
            if self.run_storage is None:
                raise ValueError("no run folder to keep the call cache in")
            return RunFolderCallCache(self.run_storage)
        if root not in self._stores:
            from esc_eval.serve.calls.cache import ArrowFsStore

            self._stores[root] = ArrowFsStore(root)
        return self._stores[root]

    def raw(self, ref: ModelRef) -> ChatModel:
        key, build = self._build(ref)
        if key not in self._models:
            self._models[key] = build()
        return self._models[key]

    def get(self, ref: ModelRef, execution: ExecutionConfig, calls=None) -> ChatModel:
        """The model behind `ref`, with the job's timeouts and classified retries; with the job's
        `calls` (sim/call_setup.CallSettings), also its limits, spend cap and call cache:
        cache -> retries -> (each attempt) limits and budget -> the backend."""
        raw = self.raw(ref)
        if raw.holds_engine:  # an engine of this process: rebuilt after a release (see _Pooled)
            raw = _Pooled(self, ref)
        if calls is None:
            return _Tallied(RetryingChatModel(raw, execution.retry_policy()), self.tally)
        key, mc = calls.for_ref(ref)
        gate = calls.gate(key, mc)
        model: ChatModel = RetryingChatModel(raw, execution.retry_policy(), gate=gate)
        if mc is not None and mc.cache_root:
            from esc_eval.serve.calls.cache import CachedChatModel

            try:
                store = self.store(mc.cache_root)
            except (OSError, ValueError) as e:  # e.g. an object store this worker has no credentials for
                log.warning("call cache at %s unavailable (%s); calls are not cached", mc.cache_root, e)
                store = None
            if store is not None:
                model = CachedChatModel(model, store, default_params=raw.default_params,
                                        on_hit=gate.hit if gate is not None else None)
        return _Tallied(model, self.tally)

    def start(self, ref: ModelRef) -> None:
        """Start `ref`'s engine now, if its backend has one to start (blocking; a model that cannot
        start raises EngineStartError, a RunStopError: the job stops before its items)."""
        self.raw(ref).start()

    def capacity(self, ref: ModelRef):
        """What `ref`'s started engine holds at once (serve.engines.args.EngineCapacity), or None."""
        return self.raw(ref).capacity()

    def holds_engine(self, ref: ModelRef) -> bool:
        """Whether `ref` runs in an engine of this process (vllm/), i.e. something to release."""
        return self.raw(ref).holds_engine

    def release_key(self, key: str) -> bool:
        """Release the engine of pool key `key` (it stops unless another holder in this process, e
        .g. a test's shared engine, still holds it). Returns whether it stopped."""
        model = self._models.pop(key, None)
        return bool(model.release()) if model is not None else False

    def retain(self, refs: list[ModelRef]) -> list[str]:
        """Release the engines this worker holds for earlier jobs that none of `refs` uses (a
        scoring job after a simulation keeps the engine its judge shares with the role). Returns
        the released keys."""
        keep = {self.key(r) for r in refs}
        released = [k for k in list(self._models) if k not in keep and self._models[k].holds_engine]
        for k in released:
            self.release_key(k)
        return released

    async def close(self) -> None:
        for m in self._models.values():
            await m.close()


class TargetEngines:
    """One target engine at a time in a worker: a dialogue of target k waits while dialogues of
    another target still run here, then that target's engine is released and k's starts. Targets
    without an engine here (API, Serve, fake) or sharing the role's engine never wait. Items come
    target by target (sim/jobs/simulation_items.py iter_items), so a worker switches once per target. A
    target's engine starts before its first dialogue here (the first target's at the job's setup):
    one that cannot start stops the run (EngineStartError), it fails no dialogue."""

    def __init__(self, pool: ModelPool, role: ModelRef, targets: list[ModelRef]):
        self.pool = pool
        self.targets = targets
        role_key = pool.key(role) if pool.holds_engine(role) else None
        self.keys = [pool.key(t) if pool.holds_engine(t) and pool.key(t) != role_key else None for t in targets]
        self.active: str | None = None
        self.users = 0
        self.switches = 0
        self.started: set[int] = set()  # targets started (the job's setup starts the first)
        self._cond: asyncio.Condition | None = None
        self._starting: asyncio.Lock | None = None

    def preloaded(self, target_index: int) -> None:
        """The job's setup started this target's engine: it is the worker's active one."""
        self.started.add(target_index)
        self.active = self.keys[target_index] or self.active

    async def _start(self, target_index: int) -> None:
        """Start a target when its turn comes (once; a failure is the run's: EngineStartError)."""
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if target_index not in self.started:
                await asyncio.to_thread(self.pool.start, self.targets[target_index])
                self.started.add(target_index)

    @contextlib.asynccontextmanager
    async def lease(self, target_index: int) -> AsyncIterator[None]:
        key = self.keys[target_index]
        if key is None:
            if target_index not in self.started:
                await self._start(target_index)
            yield
            return
        if self._cond is None:
            self._cond = asyncio.Condition()
        async with self._cond:
            await self._cond.wait_for(lambda: self.active in (None, key) or self.users == 0)
            if self.active not in (None, key):
                # before the next engine starts: its GPU share assumes the previous one is gone
                old = self.active
                await asyncio.to_thread(self.pool.release_key, old)
                self.started -= {i for i, k in enumerate(self.keys) if k == old}
                self.switches += 1
            self.active = key
            if target_index not in self.started:
                await self._start(target_index)
            self.users += 1
        try:
            yield
        finally:
            async with self._cond:
                self.users -= 1
                self._cond.notify_all()
