"""The workloads of `esc-eval bench serve`, as streams of units the load shapes start.

A unit is what the concurrency counts and what the arrival rate starts:
  dialogues  one ESC-Eval dialogue (sim/dialogue/dialogue.py `run_dialogue`, unchanged): the target's
             prompts grow turn by turn exactly as in an evaluation. The seeker is either a live
             role model on another endpoint (the card's role-play prompt, sim/dialogue/prompts.py) or the
             seeker turns of recorded dialogues replayed verbatim (a run folder or the official
             JSON); the target's replies are always generated live by the endpoint under test.
  judge      one dialogue's seven rubric prompts (sim/jobs/scoring.py `score_dialogue`, unchanged: all
             at once rubric-first; dialogue-first sends one and then the six that share its prefix)
  random     one request of fixed input/output token lengths, built like vLLM's random dataset
             (consecutive vocabulary ids from a random offset, decoded and re-encoded to length)
Streams are endless: a source with fewer dialogues than the run needs is repeated, and every
unit says which source item it repeats (`source_index`), so repeats can be counted.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Protocol

from esc_eval.serve.chat.interface import ChatModel, ChatModelError, ChatResult, GenerationParams
from esc_eval.sim.bench.serve.client import BenchInputError, MeasuredModel
from esc_eval.sim.dialogue.dialogue import DialogueSetup, Participant, run_dialogue

LIVE_STRATEGY = "official"  # a live role model plays the seeker with the paper's role-play prompt unless told


class Unit(Protocol):
    name: str
    source_index: int

    async def run(self, model: MeasuredModel) -> None:
        """Send the unit's requests through `model`; raise on failure (ChatModelError)."""


# -- random -----------------------------------------------------------------------------------
def load_tokenizer(path: str | Path):
    """A Hugging Face tokenizer from a local folder (never from a hub)."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:  # pragma: no cover - transformers is a core dependency
        raise BenchInputError("the random workload needs transformers for its tokenizer") from exc
    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise BenchInputError(f"--tokenizer {path}: no tokenizer there ({type(exc).__name__})") from None


def random_prompt(tokenizer, allowed: list[int], length: int, offset: int) -> str:
    """A prompt of exactly `length` tokens (as vLLM's random dataset builds one)."""
    ids = [allowed[(offset + i) % len(allowed)] for i in range(length)]
    for _ in range(8):  # decoding and re-encoding can merge or split tokens: adjust to the length
        text = tokenizer.decode(ids)
        again = tokenizer.encode(text, add_special_tokens=False)
        if len(again) == length:
            return text
        ids = again[:length] if len(again) > length else again + ids[: length - len(again)]
    return tokenizer.decode(ids[:length])


@dataclass
class RandomUnit:
    name: str
    source_index: int
    prompt: str
    params: GenerationParams

    async def run(self, model: MeasuredModel) -> None:
        from esc_eval.serve.chat.interface import ChatMessage

        await model.chat([ChatMessage(role="user", content=self.prompt)], self.params)


def random_units(tokenizer, input_len: int, output_len: int, seed: int = 0) -> Iterator[RandomUnit]:
    import numpy as np

    special = set(tokenizer.all_special_ids)
    allowed = [i for i in range(tokenizer.vocab_size) if i not in special]
    rng = np.random.default_rng(seed)
    params = GenerationParams(max_tokens=output_len, temperature=0.0)
    for i in itertools.count():
        offset = int(rng.integers(0, len(allowed)))
        yield RandomUnit(f"random-{i}", i, random_prompt(tokenizer, allowed, input_len, offset + i), params)


# -- dialogues --------------------------------------------------------------------------------
class ReplayedSeeker(ChatModel):
    """The seeker of a recorded dialogue: answers each call with its next recorded turn."""

    name = "replay"

    def __init__(self, lines: list[str]):
        self.lines = list(lines)
        self.next = 0

    async def chat(self, messages, params=None, *, adapter=None, session_id=None) -> ChatResult:
        if self.next >= len(self.lines):
            raise ChatModelError("the recorded dialogue has no more seeker turns", kind="fatal")
        self.next += 1
        return ChatResult(text=self.lines[self.next - 1])


@dataclass
class DialogueUnit:
    name: str
    source_index: int
    setup: DialogueSetup
    role: Participant
    target_params: GenerationParams
    target_system: str | None

    async def run(self, model: MeasuredModel) -> None:
        await run_dialogue(self.setup, self.role, Participant(model, self.target_params, system_prompt=self.target_system))


def replay_units(rows: list[dict[str, Any]], rounds: int, params: GenerationParams) -> Iterator[DialogueUnit]:
    """Recorded dialogues with their seeker turns replayed; the target answers live."""
    from esc_eval.sim.dialogue.prompts import opener, target_system_prompt

    usable = []
    for row in rows:
        turns = sorted(row["turns"], key=lambda t: t["index"])
        seeker = [t["text"] for t in turns if t["speaker"] == "seeker"]
        if seeker:
            first = turns[0]["text"] if turns[0]["speaker"] == "assistant" else opener(row["language"])
            usable.append((row, first, seeker))
    if not usable:
        raise BenchInputError("the dialogue source holds no dialogue with a seeker turn to replay")
    for i in itertools.count():
        row, first, seeker = usable[i % len(usable)]
        name = f"dialogue-{i}"
        setup = DialogueSetup(role_system_prompt="", opener=first, rounds=min(rounds, len(seeker)), session_id=name)
        yield DialogueUnit(name, i % len(usable), setup, Participant(ReplayedSeeker(seeker)), params,
                           target_system_prompt(row["language"]))


def live_units(cards: list, role: ChatModel, rounds: int, params: GenerationParams, role_params: GenerationParams,
               strategy: str = LIVE_STRATEGY) -> Iterator[DialogueUnit]:
    """Fresh dialogues on role cards: the role model plays the seeker from the card's prompt."""
    from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt, target_system_prompt

    if not cards:
        raise BenchInputError("no role cards to play (check --cards and --language)")
    for i in itertools.count():
        card = cards[i % len(cards)]
        name = f"dialogue-{i}"
        setup = DialogueSetup(role_system_prompt=roleplay_system_prompt(card.text, card.language, strategy),
                              opener=opener(card.language, strategy), rounds=rounds, session_id=name)
        yield DialogueUnit(name, i % len(cards), setup, Participant(role, role_params), params,
                           target_system_prompt(card.language))


# -- judge ------------------------------------------------------------------------------------
@dataclass
class JudgeUnit:
    name: str
    source_index: int
    turns: list[tuple[str, str]]
    language: str
    judge: Any  # sim.judging.config.JudgeConfig

    async def run(self, model: MeasuredModel) -> None:
        from esc_eval.sim.jobs.scoring import score_dialogue

        # score_dialogue records a failed call as a row; the measured model keeps the reason
        await score_dialogue(self.turns, self.language, self.judge, model)
        if model.failures:
            raise ChatModelError(model.failures[0], kind="fatal")


def judge_units(rows: list[dict[str, Any]], judge) -> Iterator[JudgeUnit]:
    if not rows:
        raise BenchInputError("the dialogue source holds no completed dialogue to judge")
    for i in itertools.count():
        row = rows[i % len(rows)]
        turns = [(t["speaker"], t["text"]) for t in sorted(row["turns"], key=lambda t: t["index"])]
        yield JudgeUnit(f"judge-{i}", i % len(rows), turns, row["language"], judge)


def load_dialogue_rows(source: Path | None, language: str | None, limit: int = 100_000) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Completed dialogues from a run folder or official JSON (bench score's loader: RunFolder /
    sim.runs.official), else the official samples in ../shared, else runs/demo; optionally one language."""
    from esc_eval.sim.bench.dialogues import load_bench_dialogues

    rows, info = load_bench_dialogues(limit, source)
    if language:
        rows = [r for r in rows if r["language"] == language]
        if not rows:
            raise BenchInputError(f"{info['path']}: no completed {language} dialogues (--language)")
        info = {**info, "dialogues": len(rows), "languages": [language]}
    return rows, info

