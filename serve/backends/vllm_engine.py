"""In-process vLLM engine backend (`vllm/<model>`): one AsyncLLM per (model, engine options) in a
process, shared by every participant that names the same model, so requests from many dialogues
(role, target and judge alike) batch together in one engine.

The engine runs on its own event-loop thread (serve/backends/engine_host.py): callers on any loop (a Ray
actor, a CLI's asyncio.run, a test) just await `chat`. The jobs `start()` it when a worker sets
up (a model that cannot start stops the job with the engine's own cause) and read its
`capacity()`; a model used without `start()` starts on its first call. `vllm/embedded` is
SmolLM2-135M-Instruct from PyPI.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from esc_eval.serve.chat.interface import (Backend, Capabilities, ChatMessage, ChatModel, ChatModelError, ChatResult,
                                           ContextOverflowError, GenerationParams,
                                 as_messages)
from esc_eval.serve.chat.structured import flat_schema_regex
from esc_eval.serve.engines.args import CPU_ENGINE, EngineCapacity
from esc_eval.serve.engines.embedded import EMBEDDED
from esc_eval.serve.backends.engine_host import (INSTALL_HINT, _HOSTS, _EngineHost, _host_for, engine_dtype,  # noqa: F401 - re-exported
                                        engines_started_here, release_engine, shutdown_engine, shutdown_engines)

log = logging.getLogger(__name__)

# The CPU defaults seen to work on 2 cores / 24 GiB (notes/cpu-stack.md); an engine on GPUs starts
# with serve/engines/args.py's GPU_ENGINE instead (compiled, its memory share from the plan).
DEFAULT_ENGINE: dict[str, Any] = CPU_ENGINE


LABEL_CONTEXT_CHARS = 64  # prompt tail re-tokenised to find the label tokens after it


def resolve_model_path(model: str | Path) -> str:
    if str(model) == "embedded":
        from esc_eval.serve.engines.embedded import embedded_model_path

        return str(embedded_model_path())
    return str(model)


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

    def __init__(self, model: str | Path = EMBEDDED, *, adapters: dict[str, str | Path] | None = None,
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
        self.released = False

    holds_engine = True

    @property
    def host(self) -> _EngineHost:
        return self._host

    def release(self) -> bool:
        """Let go of the engine (once per chat model): it stops when no other chat model holds it.
        Returns whether it stopped. This model cannot chat afterwards."""
        if self.released:
            return False
        self.released = True
        return release_engine(self._host)

    def start(self) -> None:
        """Start the engine now (blocking) unless it runs; EngineStartError names the engine's own cause."""
        self._host.ensure_started()

    def capacity(self) -> EngineCapacity | None:
        """What the started engine holds at once (KV cache tokens, max_num_seqs); None before it started."""
        return self._host.capacity

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

    def _label_variant_ids(self, labels: list[str]) -> list[int]:
        """The token ids of each label as it can appear inside an answer (after a character, and after a
        space), where it is one token: what a JSON answer's value positions report log-probabilities for."""
        tok = self._host.tokenizer
        ids: list[int] = []
        for context in ('{"a":', '{"a": '):
            base = tok.encode(context, add_special_tokens=False)
            for label in labels:
                for text in (label, " " + label):
                    full = tok.encode(context + text, add_special_tokens=False)
                    new = full[len(base):] if full[:len(base)] == base else []
                    if len(new) == 1 and new[0] not in ids:
                        ids.append(new[0])
        return ids

    def _sampling_params(self, params: GenerationParams, prompt_len: int, prompt_text: str | None = None):
        """vLLM SamplingParams; with single-token `choices` (the judge's labels, found after
        `prompt_text`), the answer is masked to them and exactly their logprobs are asked for."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        host = self._host
        room = host.max_model_len - prompt_len
        if room < 1:
            raise ContextOverflowError(
                f"context_overflow: prompt of {prompt_len} tokens leaves no room in max_model_len {host.max_model_len}")
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
        if params.json_schema is not None:
            from vllm.sampling_params import StructuredOutputsParams

            regex = flat_schema_regex(params.json_schema)  # one layout for a flat object (serve/chat/structured.py)
            kw["structured_outputs"] = (StructuredOutputsParams(regex=regex) if regex is not None
                                        else StructuredOutputsParams(json=params.json_schema))
            if params.logprobs is not None and params.logprob_labels:
                kw["logprob_token_ids"] = self._label_variant_ids(list(params.logprob_labels))
            elif params.logprobs is not None:
                kw["logprobs"] = params.logprobs
            return SamplingParams(**kw)
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
        # the answer's tokens as text, where log-probabilities were asked for: which position holds what
        tokens = [host.tokenizer.decode([t]) for t in out.token_ids] if params.logprobs is not None else []
        return ChatResult(
            text=out.text, prompt_tokens=len(prompt_ids), completion_tokens=len(out.token_ids),
            finish_reason=out.finish_reason or "stop", latency_s=time.perf_counter() - started,
            top_logprobs=top, model=self.name, tokens=tokens,
        )


# In-process: answers are masked to the labels' tokens and exactly their log-probabilities read.
VLLM_CAPABILITIES = Capabilities(logprobs=True, max_top_logprobs=20, choice="structured", logit_bias=True, json_schema=True)


def make_vllm_model(name: str, **options: Any) -> VLLMChatModel:
    return VLLMChatModel(name, **options)


class VLLMBackend(Backend):
    """`vllm/<name>` (registered in serve.chat.interface.BACKENDS)."""

    def make(self, name: str, **options: Any) -> ChatModel:
        return make_vllm_model(name, **options)

    def capabilities(self, name: str, **options: Any) -> Capabilities:
        return VLLM_CAPABILITIES


BACKEND = VLLMBackend()
