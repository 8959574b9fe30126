"""The minimal references of `esc-eval bench gpu`, on the engines our side used (same model folders,
same engine arguments, same environment as a pool worker), in the benchmark's own process:

- scoring: vLLM's offline `LLM.generate` over every judge prompt at once, each prompt built as
  scoring builds it (sim/scoring.judge_call_messages, the model's chat template) and answered
  with one greedy token and its top-5 log-probabilities;
- simulation: a two-engine asyncio loop: every dialogue in flight at once, each turn one bare
  `AsyncLLM.generate` call on the role's or the target's engine, the exchange the same 5 rounds
  as ours (sim/dialogue.run_dialogue with the same prompts and parameters).

Token counts come from vLLM's per-request outputs (prompt tokens, `num_cached_tokens`, generated
tokens). Engine start and a warm-up are outside every timing; prefix caches are emptied before.
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import uuid
from typing import Any, Iterator

from esc_eval.serve.chat.interface import ChatResult, GenerationParams
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig

CHAT_OPTIONS = ("adapters", "chat_template", "supports_system", "system_fallback")  # VLLMChatModel's, not the engine's


def model_setup(ref: ModelRef, execution: ExecutionConfig, plan=None) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(model name as VLLMChatModel takes it, its chat options, its engine options) of a configured
    model, as a pool worker builds it (sim/participants.ModelPool: registry options, the config's,
    then the run's placement). A model the plan deployed on Serve gets its replica's GPU share and
    tensor parallelism (`plan`: the placement the run recorded in its manifest, a dict)."""
    from esc_eval.serve.plan.planner import placement_from_env, ref_key
    from esc_eval.serve.registry.registry import resolve

    spec, registry_options = resolve(ref.model)
    backend, _, name = spec.partition("/")
    if backend != "vllm":
        raise ValueError(f"{ref.model}: bench gpu measures vLLM models (vllm/...); this one is {spec!r}")
    placed = placement_from_env(execution.env).get(ref_key(ref.model, ref.options), {})
    options = {**registry_options, **ref.options, **placed.get("engine", {})}
    if "serve" in placed and plan:
        for e in plan.get("engines") or []:
            if ref_key(ref.model, ref.options) in (e.get("refs") or []):
                share = {k: e.get(k) for k in ("gpu_memory_utilization", "tensor_parallel_size")}
                options.update({k: v for k, v in share.items() if v is not None})
    chat = {k: options.pop(k) for k in CHAT_OPTIONS if k in options}
    return name, chat, options


@contextlib.contextmanager
def worker_environment(execution: ExecutionConfig) -> Iterator[None]:
    """The environment a pool worker's engine starts in (VLLM_CPU_KVCACHE_SPACE, dtype, binding)."""
    from esc_eval.sim.pool.env import temporary_env
    from esc_eval.sim.pool.on_ray import worker_env

    with contextlib.ExitStack() as stack:
        for name, value in worker_env(execution, 0).items():
            stack.enter_context(temporary_env(name, value))
        yield


def _tally(acc: dict[str, int], prompt: int, cached: int, generated: int) -> None:
    acc["requests"] = acc.get("requests", 0) + 1
    acc["prompt_tokens"] = acc.get("prompt_tokens", 0) + prompt
    acc["cached_prompt_tokens"] = acc.get("cached_prompt_tokens", 0) + cached
    acc["generation_tokens"] = acc.get("generation_tokens", 0) + generated


def _close_llm(llm) -> None:
    engine_core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if engine_core is not None:
        engine_core.shutdown()
    del llm
    gc.collect()


def _lora(chat: dict[str, Any], name: str | None, ids: dict[str, int]):
    if name is None:
        return None
    from vllm.lora.request import LoRARequest

    return LoRARequest(name, ids.setdefault(name, len(ids) + 1), str(chat["adapters"][name]))


def score_reference(rows: list[dict[str, Any]], warm_rows: list[dict[str, Any]], judge: JudgeConfig,
                    orders: list[str], execution: ExecutionConfig, plan=None) -> dict[str, Any]:
    """vLLM's offline generate on the judge prompts of `rows`, once per prompt order."""
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from esc_eval.serve.engines.args import detect_device, engine_kwargs
    from esc_eval.serve.backends.vllm_engine import render_chat, resolve_model_path
    from esc_eval.sim.judging.judges import select_adapter
    from esc_eval.sim.jobs.scoring import judge_call_messages
    from esc_eval.sim.jobs.scoring_judges import with_registry_adapters

    judge = with_registry_adapters(judge)
    name, chat, options = model_setup(judge.model, execution, plan)
    path = resolve_model_path(name)
    kwargs = engine_kwargs(options, detect_device(), adapters=len(chat.get("adapters") or {}))
    sp = SamplingParams(max_tokens=1, temperature=0.0, logprobs=5)
    lora_ids: dict[str, int] = {}

    def prompts(rs: list[dict[str, Any]], cfg: JudgeConfig) -> tuple[list[Any], list[Any]]:
        out, loras = [], []
        for r in rs:
            turns = [(t["speaker"], t["text"]) for t in r["turns"]]
            for dim in cfg.dimensions:
                text = render_chat(tok, judge_call_messages(dim, turns, r["language"], cfg),
                                   chat_template=_template(chat), supports_system=chat.get("supports_system", True),
                                   system_fallback=chat.get("system_fallback", "merge"))
                out.append(TokensPrompt(prompt_token_ids=tok.encode(text, add_special_tokens=False)))
                loras.append(_lora(chat, select_adapter(cfg, dim, r["language"]), lora_ids))
        return out, loras

    result: dict[str, Any] = {"engine": "vllm.LLM (offline), generate() over every prompt at once",
                              "model_path": path, "engine_kwargs": {k: repr(v) for k, v in sorted(kwargs.items())},
                              "sampling": "max_tokens 1, temperature 0, logprobs 5", "by_order": {}}
    with worker_environment(execution):
        started = time.perf_counter()
        llm = LLM(model=path, **kwargs)
        result["engine_start_s"] = round(time.perf_counter() - started, 1)
        try:
            tok = llm.get_tokenizer()
            for order in orders:
                cfg = judge.model_copy(update={"prompt_order": order})
                warm, warm_lora = prompts(warm_rows, cfg)
                todo, todo_lora = prompts(rows, cfg)
                llm.reset_prefix_cache()
                llm.generate(warm, sp, use_tqdm=False, lora_request=warm_lora if chat.get("adapters") else None)
                llm.reset_prefix_cache()
                t0 = time.perf_counter()
                outs = llm.generate(todo, sp, use_tqdm=False, lora_request=todo_lora if chat.get("adapters") else None)
                wall = time.perf_counter() - t0
                counts: dict[str, int] = {}
                for o in outs:
                    _tally(counts, len(o.prompt_token_ids), int(o.num_cached_tokens or 0), len(o.outputs[0].token_ids))
                result["by_order"][order] = {"dialogues": len(rows), "wall_s": round(wall, 3), "tokens": {path: counts}}
        finally:
            _close_llm(llm)
    return result


def _template(chat: dict[str, Any]) -> str | None:
    from pathlib import Path

    t = chat.get("chat_template")
    return Path(t).read_text(encoding="utf-8") if t else None


class BareEngineChat:
    """One engine's chat: the prompt rendered with the model's chat template and sent to AsyncLLM as
    is (no retries, limits, cache or tally of ours); vLLM's per-request token counts added up."""

    def __init__(self, host, chat: dict[str, Any]):
        self.host, self.chat_options = host, chat
        self.template = _template(chat)
        self.counts: dict[str, int] = {}
        self.lora_ids: dict[str, int] = {}
        self.name = f"reference/{host.model_path}"

    async def _generate(self, ids: list[int], sp, lora):
        from vllm.inputs import TokensPrompt

        final = None
        async for out in self.host.engine.generate(TokensPrompt(prompt_token_ids=ids), sp, request_id=uuid.uuid4().hex,
                                                   lora_request=lora):
            final = out
        return final

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter: str | None = None,
                   session_id: str | None = None) -> ChatResult:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        from esc_eval.serve.backends.vllm_engine import render_chat

        p = params or GenerationParams()
        tok = self.host.tokenizer
        text = render_chat(tok, messages, chat_template=self.template,
                           supports_system=self.chat_options.get("supports_system", True),
                           system_fallback=self.chat_options.get("system_fallback", "merge"))
        ids = tok.encode(text, add_special_tokens=False)
        kw: dict[str, Any] = {"temperature": p.temperature, "top_p": p.top_p, "seed": p.seed, "top_k": p.top_k,
                              "repetition_penalty": p.repetition_penalty, "stop": list(p.stop) if p.stop else None}
        sp = SamplingParams(max_tokens=max(1, min(p.max_tokens, self.host.max_model_len - len(ids))),
                            output_kind=RequestOutputKind.FINAL_ONLY, **{k: v for k, v in kw.items() if v is not None})
        lora = _lora(self.chat_options, adapter, self.lora_ids)
        started = time.perf_counter()
        final = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._generate(ids, sp, lora), self.host.loop))
        out = final.outputs[0]
        _tally(self.counts, len(ids), int(final.num_cached_tokens or 0), len(out.token_ids))
        return ChatResult(text=out.text, prompt_tokens=len(ids), completion_tokens=len(out.token_ids),
                          finish_reason=out.finish_reason or "stop", latency_s=time.perf_counter() - started)


def _on_loop(host, coro) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, host.loop).result()


def simulation_reference(cards, warm_cards, cfg: SimulationConfig, plan=None) -> dict[str, Any]:
    """Every card's dialogue at once over bare AsyncLLM engines (one per distinct model, built with
    our engine arguments; an engine this process already runs with them is used as it is)."""
    from esc_eval.serve.backends.vllm_engine import VLLMChatModel, engines_started_here
    from esc_eval.sim.bench.engine_probe import started_kwargs
    from esc_eval.sim.dialogue.dialogue import DialogueSetup, Participant, run_dialogue
    from esc_eval.sim.dialogue.generation import effective_adapter, effective_params, samples
    from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt
    from esc_eval.sim.dialogue.targets import configured_system_prompt, target_system

    ex = cfg.execution
    target_ref = cfg.targets[0]
    strategy, seed = cfg.seeker_strategies[0], cfg.seeds[0]
    out: dict[str, Any] = {"engine": "vllm AsyncLLM, one per model; every dialogue in flight, one generate() per turn",
                           "engines": {}}
    with worker_environment(ex), engines_started_here():
        chats: dict[str, BareEngineChat] = {}

        def chat_for(ref: ModelRef) -> BareEngineChat:
            name, chat, options = model_setup(ref, ex, plan)
            model = VLLMChatModel(name, **{k: v for k, v in chat.items() if k == "adapters"}, **options)
            host = model.host
            key = f"{host.model_path}|{id(host)}"
            if key not in chats:
                running = host.engine is not None
                t0 = time.perf_counter()
                host.ensure_started()
                out["engines"][host.model_path] = {"engine_start_s": 0.0 if running else round(time.perf_counter() - t0, 1),
                                                   "already_running": running,
                                                   "engine_kwargs": started_kwargs(host)}
                chats[key] = BareEngineChat(host, chat)
            return chats[key]

        role_chat, target_chat = chat_for(cfg.role), chat_for(target_ref)
        role_params, target_params = effective_params(cfg.role, cfg.profile), effective_params(target_ref, cfg.profile)
        if samples(role_params):
            role_params = role_params.model_copy(update={"seed": seed})
        if samples(target_params):
            target_params = target_params.model_copy(update={"seed": seed})
        system = configured_system_prompt(target_ref)

        async def dialogue(card, rounds: int) -> int:
            setup = DialogueSetup(role_system_prompt=roleplay_system_prompt(card.text, card.language, strategy),
                                  opener=opener(card.language, strategy), rounds=rounds)
            sys_prompt = target_system(system, card.language)
            role = Participant(role_chat, role_params, adapter=effective_adapter(cfg.role))
            target = Participant(target_chat, target_params, system_prompt=sys_prompt or None,
                                 adapter=effective_adapter(target_ref))
            return len(await run_dialogue(setup, role, target))

        asyncio.run(_gather(dialogue(c, 1) for c in warm_cards))
        for c in chats.values():
            _on_loop(c.host, c.host.engine.reset_prefix_cache())
            c.counts = {}
        t0 = time.perf_counter()
        turns = asyncio.run(_gather(dialogue(c, cfg.rounds) for c in cards))
        wall = time.perf_counter() - t0
    out.update(dialogues=len(cards), completed=sum(1 for n in turns if n == 1 + 2 * cfg.rounds), wall_s=round(wall, 3),
               tokens=_by_model(chats.values()))
    return out


async def _gather(coros) -> list[Any]:
    return list(await asyncio.gather(*coros))


def _by_model(chats) -> dict[str, dict[str, int]]:
    """Counts per model folder (two engines of one folder, e.g. with different options, summed)."""
    out: dict[str, dict[str, int]] = {}
    for c in chats:
        acc = out.setdefault(c.host.model_path, {})
        for k, v in c.counts.items():
            acc[k] = acc.get(k, 0) + v
    return out


__all__ = ["BareEngineChat", "model_setup", "score_reference", "simulation_reference", "worker_environment"]
