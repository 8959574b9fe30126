"""Planted models: scripted chat models whose behaviour is set by parameters and known, registered as
the backend `planted/<role>` (options as keyword arguments or a query string, as fake/ takes them:
`planted/judge?sigma=0.4&first=0.6&seed=3`). A run of them through the real jobs (simulate, score,
pairwise) carries a truth that is known, so a verdict printed from its rows can be checked against it
(sim/bench/planted/ builds such runs; analysis checks them). The arithmetic: planted_math.py.

Roles:
  target  writes replies carrying the quality planted in them: `q` (0-4 scale), changed by `drop` from
          its `from_round`-th reply on (never without it), by `hard` when the seeker's setting is hard;
          `words` = lo-hi words per reply (one length per dialogue, drawn uniformly: longer is not
          better); `family` tags its replies (self-preference).
  judge   scores what it reads (planted_math's module doc): `sigma` its noise, `card_sd` the card's
          effect, `people_sd` the people it is calibrated to, `T` its temperature (T < 1 overconfident),
          `beta` points per 100 words of the replies it reads, `family` and `own` (+ for its own
          family's replies), `offset`; in a pairwise prompt it picks the better dialogue by quality
          (plus its biases and `pair_sd` noise; `tie` = the margin it calls a tie), and the first shown
          regardless with probability 2 x `first` - 1 (`first` = 0.6: the first-shown dialogue 60% of
          the time); `context` = its context in estimated tokens (a longer prompt is refused as a
          vLLM engine refuses it, so the judge's windowing runs); `stream` keeps judges' noise apart;
          `reply` = it rates only the last reply shown (a per-reply judge: `score --by-reply`).
  seeker  says lines about its card (`Problem:` of its system prompt), tagged with its card's key and
          round; `hard` = a text of its system prompt that marks a hard seeker setting (its lines then
          say so, and a target with `hard` answers them worse); `ends` = the round it ends the dialogue
          at (when its prompt defines the stop mark; never without it); `spoil` = out_of_character |
          talks_like_assistant | resolves_in_first_round in a `spoil_rate` share of its dialogues, at
          `spoil_round`; `replay` = a JSON file of people's seeker turns ([{key, lines}], the entry
          whose key is in its system prompt), said untagged, each with `longer` more words.
Every role takes `seed` (the replicate: noise, card effects, lengths and spoiled dialogues are pure
functions of it and of what the model is shown).
"""
from __future__ import annotations

import json
import math
import re
import time
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl

from esc_eval.serve.backends import planted_math as pm
from esc_eval.serve.chat.interface import (Backend, Capabilities, ChatMessage, ChatModel, ChatResult,
                                           ContextOverflowError, GenerationParams)

ROLES = ("target", "judge", "seeker")
PAIR_LABELS = {"first": "1", "second": "2", "tie": "0"}  # sim/data/prompts/pairwise.yaml `labels`
SPOILS = {
    "out_of_character": "As an AI language model I do not really have these troubles, but I will go on.",
    "talks_like_assistant": "How can I help you today? I'm here to help, feel free to ask me anything.",
    "resolves_in_first_round": "Thank you so much, I feel much better now. Bye!",
}
_FILLER = ("that sounds really hard and it makes sense that you feel worn down by all of it so let us take "
           "it one step at a time and look at what matters most to you right now").split()
_OPENERS = ["Hi. I am not sure where to begin, but {p}",
            "The hardest part is this: {p}",
            "I keep thinking about it at night. {p}",
            "Maybe you are right, though I still worry. {p}",
            "I will try what we talked about, one small thing first. {p}"]
_PROBLEM = re.compile(r"(?:Problem|\u95ee\u9898)\s*[:\uff1a]\s*(.+)")
CAPS = Capabilities(logprobs=True, max_top_logprobs=20, choice="structured")
_TEXT_OPTIONS = {"words", "family", "hard", "spoil", "replay", "stream", "end"}


def _tokens(text: str) -> int:
    return len(text) // 4 + 1  # as fake/: a plausible count, not a tokenizer


class PlantedModel(ChatModel):
    """One planted role (the module doc); every option is a keyword argument."""

    def __init__(self, role: str, *, seed: int = 0, context: int | None = None, q: float = 2.5, drop: float = 0.0,
                 from_round: int | None = None, hard: Any = None, words: str = "40-160", family: str = "",
                 sigma: float = 0.4, card_sd: float = 0.6, people_sd: float = 0.5, T: float = 1.0, beta: float = 0.0,
                 own: float = 0.0, offset: float = 0.0, first: float = 0.5, tie: float = 0.0, pair_sd: float = 0.4,
                 stream: str = "", ends: int | None = None, end: str = "resolved", spoil: str = "", spoil_rate: float = 0.0,
                 spoil_round: int = 2, replay: str = "", longer: int = 0, reply: bool = False):
        if role not in ROLES:
            raise ValueError(f"unknown planted role {role!r}; known: {', '.join(ROLES)}")
        if spoil and spoil not in SPOILS:
            raise ValueError(f"planted seeker: unknown spoil {spoil!r}; known: {', '.join(SPOILS)}")
        if not 0.5 <= first <= 1.0:
            raise ValueError(f"planted judge: first={first} must be in [0.5, 1] (the first-shown share it plants)")
        lo, _, hi = str(words).partition("-")
        self.lo, self.hi = int(lo), int(hi or lo)
        self.name = f"planted/{role}"
        self.role, self.seed, self.context = role, int(seed), None if context is None else int(context)
        self.q, self.drop, self.from_round, self.hard = float(q), float(drop), from_round, hard
        self.family, self.ends, self.end = family, None if ends is None else int(ends), end
        self.sigma, self.card_sd, self.people_sd, self.T = float(sigma), float(card_sd), float(people_sd), float(T)
        self.beta, self.own, self.offset = float(beta), float(own), float(offset)
        self.first, self.tie, self.pair_sd, self.stream = float(first), float(tie), float(pair_sd), stream
        self.spoil, self.spoil_rate, self.spoil_round = spoil, float(spoil_rate), int(spoil_round)
        self.replay, self.longer = replay, int(longer)
        # a per-reply judge (score --by-reply): it rates the last reply shown, which its prompt ends with
        self.reply = reply in (True, 1, "1", "true", "True")
        self.calls = 0

    @property
    def capabilities(self) -> Capabilities:
        return CAPS

    async def chat(self, messages: list[ChatMessage], params: GenerationParams | None = None, *,
                   adapter: str | None = None, session_id: str | None = None) -> ChatResult:
        params = params or GenerationParams()
        started = time.perf_counter()
        self.calls += 1
        prompt_tokens = sum(_tokens(m.content) for m in messages)
        if self.context is not None and prompt_tokens >= self.context:
            raise ContextOverflowError(f"prompt of {prompt_tokens} tokens leaves no room in the context of {self.context}")
        top: list[dict[str, float]] = []
        if self.role == "target":
            text = self._reply(messages)
        elif self.role == "seeker":
            text = self._line(messages)
        else:
            text, top = self._judge(messages, params)
        finish = "stop"
        if _tokens(text) > params.max_tokens:
            text, finish = text[: 4 * params.max_tokens], "length"
        return ChatResult(text=text, prompt_tokens=prompt_tokens, completion_tokens=_tokens(text), finish_reason=finish,
                          latency_s=time.perf_counter() - started, top_logprobs=top, model=self.name)

    # --- target -------------------------------------------------------------------------------------
    def _reply(self, messages: list[ChatMessage]) -> str:
        users = [m.content for m in messages if m.role == "user"]
        k = sum(1 for m in messages if m.role == "assistant") + 1
        seen = pm.read_tags(users[-1]) if users else []
        hard = any(t.get("h") == "1" for t in seen)
        q = quality(self, k, hard)
        target = reply_words(self, users[0] if users else "")
        head = pm.tag(q=f"{q:.3f}", f=self.family or "-", w=target)
        body = [_FILLER[(k + i) % len(_FILLER)] for i in range(max(0, target - pm.count_words(head)))]
        return head + " " + " ".join(body).capitalize() + "."

    # --- seeker -------------------------------------------------------------------------------------
    def _line(self, messages: list[ChatMessage]) -> str:
        system = next((m.content for m in messages if m.role == "system"), "")
        r = sum(1 for m in messages if m.role == "assistant") + 1  # the role's view: the seeker speaks as assistant
        problem = _PROBLEM.search(system)
        key = pm.card_key(problem.group(1) if problem else system)
        if self.replay:
            lines = _replay_lines(self.replay, system)
            text = lines[(r - 1) % len(lines)] if lines else "I do not know what to say."
            if self.longer:
                text = text + " " + " ".join(_FILLER[i % len(_FILLER)] for i in range(self.longer))
        else:
            hard = bool(self.hard) and str(self.hard) in system
            text = pm.tag(s=key, r=r, h=int(hard)) + " " + self._words(problem.group(1) if problem else "", r)
        if r == (1 if self.spoil == "resolves_in_first_round" else self.spoil_round) and spoils(self, key):
            text = text + " " + SPOILS[self.spoil]
        if self.ends is not None and r == self.ends and "<END:" in system:
            text = f"{text} <END:{self.end}>"
        return text

    @staticmethod
    def _words(problem: str, r: int) -> str:
        """Round r's line: its own opening and a slice of the card's problem (so it never ignores its card)."""
        words = problem.split()
        n = max(6, len(words) // 3)
        start = ((r - 1) * n) % max(1, len(words))
        piece = " ".join(words[start:start + n]) or "things have been hard lately."
        return _OPENERS[(r - 1) % len(_OPENERS)].format(p=piece) + ("" if r <= len(_OPENERS) else f" (day {r})")

    # --- judge --------------------------------------------------------------------------------------
    def _judge(self, messages: list[ChatMessage], params: GenerationParams) -> tuple[str, list[dict[str, float]]]:
        prompt = "\n".join(m.content for m in messages)
        tags = pm.judged_tags(prompt)
        if self.reply:
            rated = [t for t in tags if "q" in t][-1:]
            tags = [t for t in tags if "s" in t][:1] + rated  # the card's key, then the reply it rates
        shown = [pm.dialogue_view(d) for d in pm.split_dialogues(tags)]
        if len(shown) >= 2:
            return self._pair(shown[0], shown[1], prompt, params)
        view = shown[0] if shown else {"card": "", "n": 0, "q": 2.0, "w": 0.0, "family": None}
        m = view["q"] if view["n"] else 2.0
        u = pm.card_effect(view["card"], self.seed, self.card_sd)
        e = self.sigma * pm.normal("judge", self.stream, self.seed, prompt)
        rho = pm.shrink(self.card_sd, self.sigma)
        probs = pm.scalar_probs(m + bias(self, view) + rho * (u + e),
                                pm.stated_spread(self.card_sd, self.sigma, self.people_sd), self.T)
        labels = params.choices or [str(k) for k in range(pm.LABELS)]
        best = max(range(len(probs)), key=probs.__getitem__)
        top = [{lab: float(math.log(max(p, 1e-300))) for lab, p in zip(labels, probs)}] if params.logprobs else []
        return labels[best], top

    def _pair(self, a: dict[str, Any], b: dict[str, Any], prompt: str,
              params: GenerationParams) -> tuple[str, list[dict[str, float]]]:
        if pm.uniform("position", self.stream, self.seed, prompt) < 2 * self.first - 1:
            verdict = "first"
        else:
            d = (a["q"] + bias(self, a)) - (b["q"] + bias(self, b)) + self.pair_sd * pm.normal("pair", self.stream,
                                                                                             self.seed, prompt)
            verdict = "tie" if abs(d) < self.tie else "first" if d > 0 else "second"
        top = []
        if params.logprobs:
            top = [{PAIR_LABELS[v]: math.log(0.8 if v == verdict else 0.1) for v in PAIR_LABELS}]
        return PAIR_LABELS[verdict], top


# The planted arithmetic, as functions of a planted model rather than its methods: the chat seam declares
# every public name of a ChatModel, and sim/bench/planted/truth.py computes the truth from these same lines.
def quality(m: PlantedModel, k: int, hard: bool) -> float:
    """The quality a planted target puts in its k-th reply (1-based)."""
    q = m.q + (m.drop if m.from_round is not None and k >= int(m.from_round) else 0.0)
    return q + (float(m.hard) if hard and m.hard else 0.0)


def reply_words(m: PlantedModel, first_line: str) -> int:
    """A dialogue's words per reply: uniform in [lo, hi], a pure function of the seed and the seeker's first line."""
    return m.lo + int(pm.uniform("words", m.seed, first_line) * (m.hi - m.lo + 1))


def spoils(m: PlantedModel, key: str) -> bool:
    """Whether a planted seeker spoils its dialogue on the card with this key (planted_math.card_key)."""
    return bool(m.spoil) and pm.uniform("spoil", m.seed, key) < m.spoil_rate


def bias(m: PlantedModel, view: dict[str, Any]) -> float:
    """What a planted judge adds to what it reads of one dialogue: length, its own family, its offset."""
    mine = m.own if m.family and view["family"] == m.family else 0.0
    return m.beta * view["w"] / 100.0 + mine + m.offset


@lru_cache(maxsize=8)
def _replay_table(path: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    with open(path, encoding="utf-8") as f:
        return tuple((e["key"], tuple(e["lines"])) for e in json.load(f))


def _replay_lines(path: str, system: str) -> tuple[str, ...]:
    return next((lines for key, lines in _replay_table(path) if key in system), ())


def make_planted_model(name: str, **options: Any) -> PlantedModel:
    role, _, query = name.partition("?")
    parsed: dict[str, Any] = {}
    for k, v in parse_qsl(query):
        parsed[k] = v if k in _TEXT_OPTIONS else float(v) if "." in v or "e" in v.lower() else int(v)
    parsed.update(options)
    return PlantedModel(role, **parsed)


class PlantedBackend(Backend):
    """`planted/<role>` (registered in serve.chat.interface.BACKENDS)."""

    def make(self, name: str, **options: Any) -> ChatModel:
        return make_planted_model(name, **options)

    def capabilities(self, name: str, **options: Any) -> Capabilities:
        return CAPS


BACKEND = PlantedBackend()
