"""Scripted fake chat models: a real registered backend (`fake/<script>`), so tests and
orchestration benchmarks run the same code path as production.

Scripts:
  echo     repeats the last user message ("echo: ...")
  seeker   a distressed seeker's canned lines, cycling; with `ends=N` (and `end=resolved|gave_up`)
           its Nth line carries the stop mark, when its system prompt defines one (seeker_stop); with
           `vary=1` each line ends with a tag of its system prompt (the card), so cards' dialogues differ;
           asked with `choices` (its own rating of the support, sim/seekerview) it answers as the judge does
  judge    a score digit, deterministic in the prompt (or `score=N`); honours choices/logprobs, and a
           json_schema of integer fields (a score each, json.dumps' layout, one token per value). With
           `marks=WORD:S,...` a planted rater: the score of the mark word it read last (the reply a
           per-reply prompt rates, the last reply of a dialogue), plus `noise` (the sd of a normal
           draw, seeded by the prompt and `seed`), rounded and clipped to 0-4; no mark read: `score`, else 2;
           `WORD:S/L` also answers choices[L] to a call constrained to other choices than the five
           scores (a label question)
  fixed    always `reply=...`; with `replies` (a list) its n-th reply is replies[n-1], the last one
           repeated; with `bad_from=K`, `bad_reply=...` from its K-th reply on (a failure planted from
           round K: the opener is not the target's)
Options (keyword arguments, or a query string: `fake/judge?score=3&latency=0.01`):
  latency     seconds of asyncio.sleep per call (fixed-latency benchmarks)
  error_rate  probability of a transient ChatModelError
  timeout_rate probability of a ChatModelError(kind="timeout") after `timeout` seconds
  seed        seeds the fault injection (deterministic per call content and attempt)
  context      the model's context in (estimated) tokens: a prompt leaving no room for an answer raises
               ContextOverflowError, as vLLM's max_model_len does
An engine's life, for the run-level paths (keyword options):
  start_error  start() raises EngineStartError with this cause (a model that cannot start)
  dies_after   after this many calls every call raises RunStopError (an engine dead for good)
  kv_tokens, max_num_seqs, device   capacity() describes an engine holding this much (e.g. a GPU's)
"""
from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import random
import time
from typing import Any
from urllib.parse import parse_qsl

from esc_eval.serve.chat.interface import (Backend, Capabilities, ChatMessage, ChatModel, ChatModelError, ChatResult,
                                           ContextOverflowError, EngineStartError,
                                 GenerationParams, RunStopError)
from esc_eval.serve.engines.args import EngineCapacity

SEEKER_LINES = [
    "Hi. I don't really know where to start, things have been rough lately.",
    "It's mostly about work. My manager keeps piling things on me and I can't say no.",
    "I guess I'm scared that if I push back I'll lose the job, and we need the money.",
    "I've tried talking to my partner but they just say I should quit, which isn't that simple.",
    "Yeah... maybe I could write down what's actually on my plate. I'm still worried though.",
]
SCRIPTS = ("echo", "seeker", "judge", "fixed")


def _tokens(text: str) -> int:
    return len(text) // 4 + 1  # a fake needs a plausible count, not a tokenizer


def _digest(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big")


class FakeChatModel(ChatModel):
    def __init__(
        self,
        script: str = "echo",
        *,
        latency: float = 0.0,
        error_rate: float = 0.0,
        timeout_rate: float = 0.0,
        timeout: float = 0.0,
        seed: int = 0,
        reply: str = "I hear you.",
        score: int | None = None,
        replies: list[str] | None = None,
        ends: int | None = None,
        end: str = "resolved",
        adapters: dict[str, str] | None = None,
        max_loras: int | None = None,
        max_lora_rank: int | None = None,
        start_error: str | None = None,
        dies_after: int | None = None,
        kv_tokens: int | None = None,
        max_num_seqs: int | None = None,
        device: str = "cpu",
        context: int | None = None,
        marks: str | dict[str, str] | None = None,
        noise: float = 0.0,
        bad_from: int | None = None,
        bad_reply: str = "Whatever.",
        vary: int = 0,
    ):
        """adapters / max_loras / max_lora_rank: what a multi-LoRA vLLM engine takes; a fake given
        adapters refuses a call naming another one, as the engine does (the limits are unused)."""
        if script not in SCRIPTS:
            raise ValueError(f"unknown fake script {script!r}; known: {', '.join(SCRIPTS)}")
        self.name = f"fake/{script}"
        self.script = script
        self.latency = float(latency)
        self.error_rate = float(error_rate)
        self.timeout_rate = float(timeout_rate)
        self.timeout = float(timeout)
        self.seed = int(seed)
        self.reply = reply
        self.score = None if score is None else int(score)
        self.replies = replies
        self.ends, self.end = (None if ends is None else int(ends)), end
        self.adapters = dict(adapters) if adapters is not None else None
        self.start_error, self.dies_after = start_error, dies_after
        self._capacity = (EngineCapacity(self.name, "gpu" if device == "gpu" else "cpu", int(kv_tokens),
                                         int(max_num_seqs) if max_num_seqs else None) if kv_tokens else None)
        self.context = None if context is None else int(context)
        self.marks = parse_marks(marks)
        self.noise = float(noise)
        self.bad_from, self.bad_reply = (None if bad_from is None else int(bad_from)), bad_reply
        self.vary = bool(vary)
        self.calls = 0
        self._attempts: dict[int, int] = {}
        self._cycle = itertools.count()

    @property
    def capabilities(self) -> Capabilities:
        return FAKE_CAPABILITIES

    def start(self) -> None:
        if self.start_error:
            raise EngineStartError(f"the engine for {self.name} did not start: {self.start_error}", model=self.name)

    def capacity(self) -> EngineCapacity | None:
        return self._capacity

    async def chat(self, messages: list[ChatMessage], params: GenerationParams | None = None, *,
                   adapter: str | None = None, session_id: str | None = None) -> ChatResult:
        params = params or GenerationParams()
        if adapter is not None and self.adapters is not None and adapter not in self.adapters:
            raise ChatModelError(f"no adapter {adapter!r} loaded for {self.name}; known: {sorted(self.adapters)}", kind="fatal")
        started = time.perf_counter()
        self.calls += 1
        if self.dies_after is not None and self.calls > self.dies_after:
            raise RunStopError(f"the engine for {self.name} died {self.calls - self.dies_after} times; not restarting it "
                               "again", model=self.name)
        key = 0
        if self.error_rate or self.timeout_rate or self.script == "judge" or params.choices:
            # Hashing the conversation costs; only faults and judge scores need it.
            key = _digest(self.seed, session_id, [(m.role, m.content) for m in messages], adapter)
        if self.error_rate or self.timeout_rate:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
            # Fault injection is a pure function of (seed, request, attempt): reruns reproduce it.
            draw = random.Random(_digest(key, attempt)).random()
            if draw < self.timeout_rate:
                await asyncio.sleep(self.timeout)
                raise ChatModelError(f"{self.name}: injected timeout", kind="timeout")
            if draw < self.timeout_rate + self.error_rate:
                raise ChatModelError(f"{self.name}: injected transient error", kind="transient")
        if self.latency:
            await asyncio.sleep(self.latency)
        prompt_tokens = sum(_tokens(m.content) for m in messages)
        if self.context is not None and prompt_tokens >= self.context:
            raise ContextOverflowError(f"prompt of {prompt_tokens} tokens leaves no room in the context of {self.context}")
        text, top, *pieces = self._answer(messages, params, key)
        finish = "stop"
        if len(text) // 4 + 1 > params.max_tokens:
            text, finish = text[: 4 * params.max_tokens], "length"
        return ChatResult(
            text=text, prompt_tokens=prompt_tokens, completion_tokens=_tokens(text) if text else 0,
            finish_reason=finish, latency_s=time.perf_counter() - started, top_logprobs=top, model=self.name,
            tokens=pieces[0] if pieces and params.logprobs else [],
        )

    def _answer(self, messages: list[ChatMessage], params: GenerationParams, key: int):
        last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
        if self.script == "echo":
            return f"echo: {last_user[:200]}", []
        if self.script == "fixed":
            nth = 1 + sum(1 for m in messages if m.role == "assistant")  # its own replies so far, then this one
            if self.replies:  # a planted course: the n-th reply
                return self.replies[min(nth - 1, len(self.replies) - 1)], []
            return (self.bad_reply if self.bad_from is not None and nth >= self.bad_from else self.reply), []
        if self.script == "seeker" and not params.choices:
            lines = self.replies or SEEKER_LINES
            turn = sum(1 for m in messages if m.role == "assistant")
            line = lines[turn % len(lines)]
            if self.vary:  # the card's own dialogue: independent planted noise per card downstream
                system = next((m.content for m in messages if m.role == "system"), "")
                line = f"{line} (#{_digest(system) % 100000:05d})"
            told = any(m.role == "system" and "<END:" in m.content for m in messages)
            if self.ends is not None and turn + 1 == self.ends and told:
                line = f"{line} <END:{self.end}>"
            return line, []
        if params.json_schema is not None:
            return self._json_answer(params, key)
        # judge (or a seeker asked to choose): a score, deterministic in the prompt unless pinned
        labels = params.choices or ["0", "1", "2", "3", "4"]
        best = self.score if self.score is not None else key % len(labels)
        if self.marks:
            best = self._marked(last_user, key, labels)
        text = labels[best] if self.score is None or params.choices else str(best)
        top: list[dict[str, float]] = []
        if params.logprobs:
            weights = [math.exp(-abs(i - best)) for i in range(len(labels))]
            total = sum(weights)
            top = [{lab: math.log(w / total) for lab, w in zip(labels, weights)}]
        return text, top

    def _marked(self, prompt: str, key: int, labels: list[str]) -> int:
        """The planted rater's answer: the mark word found last in the prompt (see the module docstring),
        a score with its noise, or a label question's planted label."""
        at, (score, label) = max(((prompt.rfind(w), v) for w, v in self.marks.items()), key=lambda x: x[0])
        if at >= 0 and label is not None and labels != ["0", "1", "2", "3", "4"]:
            return min(label, len(labels) - 1)
        base = score if at >= 0 else (self.score if self.score is not None else 2)
        drawn = base + (random.Random(_digest("noise", key)).gauss(0.0, self.noise) if self.noise else 0.0)
        return int(min(len(labels) - 1, max(0, round(drawn))))

    def _json_answer(self, params: GenerationParams, key: int):
        """The judge script under a JSON schema: each integer property a score (deterministic in the prompt and
        the property unless pinned) in json.dumps' layout, its tokens (a value is one token) and, with logprobs,
        each value position's alternatives near its score."""
        props = params.json_schema.get("properties") or {}
        values = {name: self.score if self.score is not None else _digest(key, name) % 5 for name in props}
        pieces: list[str] = []
        for i, (name, v) in enumerate(values.items()):
            pieces += [("{" if i == 0 else ", ") + json.dumps(name) + ": ", str(v)]
        pieces.append("}")
        top: list[dict[str, float]] = []
        if params.logprobs:
            for piece in pieces:
                if piece.isdigit():
                    weights = [math.exp(-abs(i - int(piece))) for i in range(5)]
                    top.append({str(i): math.log(w / sum(weights)) for i, w in enumerate(weights)})
                else:
                    top.append({piece: 0.0})
        return "".join(pieces), top, pieces


def parse_marks(marks: str | dict[str, str] | None) -> dict[str, tuple[int, int | None]]:
    """`WORD:S,WORD:S/L` (a query string's) or a mapping word -> 'S' | 'S/L' -> {word: (score 0-4, label or None)}."""
    if not marks:
        return {}
    pairs = marks.items() if isinstance(marks, dict) else (p.rsplit(":", 1) for p in str(marks).split(",") if p)
    out: dict[str, tuple[int, int | None]] = {}
    for word, value in pairs:
        score, _, label = str(value).partition("/")
        out[str(word)] = (int(score), int(label) if label else None)
    if any(not 0 <= s <= 4 for s, _ in out.values()):
        raise ValueError(f"fake judge marks {marks!r}: each score is 0-4")
    return out


FAKE_CAPABILITIES = Capabilities(logprobs=True, max_top_logprobs=20, choice="structured", json_schema=True)  # the judge script honours all three


def make_fake_model(name: str, **options: Any) -> FakeChatModel:
    script, _, query = name.partition("?")
    parsed: dict[str, Any] = {}
    for k, v in parse_qsl(query):
        parsed[k] = v if k in ("reply", "end", "bad_reply", "marks") else float(v) if "." in v else int(v)
    parsed.update(options)
    return FakeChatModel(script, **parsed)


class FakeBackend(Backend):
    """`fake/<name>` (registered in serve.chat.interface.BACKENDS)."""

    def make(self, name: str, **options: Any) -> ChatModel:
        return make_fake_model(name, **options)

    def capabilities(self, name: str, **options: Any) -> Capabilities:
        return FAKE_CAPABILITIES


BACKEND = FakeBackend()
