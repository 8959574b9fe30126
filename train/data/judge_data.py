"""Judge (ESC-RANK) SFT examples: judge_messages(dimension, dialogue) -> the score digit.

Annotations (train.data.annotations) are joined with dialogues (train.data.dialogue_sources) by
dialogue_id; an id with no dialogue raises TrainInputError before anything is trained. The
target is one assistant message holding the digit ("0".."4"); the loss covers the digit and the
end-of-turn token only. A prompt too long for max_length is shortened by trimming the dialogue
turns (overflow="shorten", the rubric and the question are never cut), or dropped/raises.

Adapter layout of the official ESC-RANK release: one LoRA adapter per dimension named by the
official key (fluency, diversity, empathic, suggestion, human, tech, overall), with an `_en`
suffix for the English judges (fluency_en, ...): `adapter_name(dimension, language)`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Literal, Mapping, Sequence

from esc_eval.sim.judging.dimensions import DIMENSIONS, to_paper_dimension
from esc_eval.train.config import OVERFLOW
from esc_eval.train.data.annotations import UNNAMED_ANNOTATOR, Annotation
from esc_eval.train.data.chat_tokens import TokenizedExample, tokenize_chat
from esc_eval.train.data.dialogue_sources import SourceDialogue
from esc_eval.train.errors import TrainInputError

Overflow = Literal["shorten", "drop", "error"]


def adapter_name(dimension: str, language: str) -> str:
    """Official ESC-RANK adapter name: official key, '_en' suffix for English."""
    key = DIMENSIONS[to_paper_dimension(dimension)]
    return f"{key}_en" if language == "en" else key


@dataclass
class JudgeExample:
    """One judge training/eval example: a (dialogue, dimension) with its gold score."""

    dialogue_id: str
    dimension: str  # paper name
    language: str
    target_model: str
    turns: list[tuple[str, str]]
    score: int
    annotator: str = UNNAMED_ANNOTATOR

    def messages(self, rubric: str = "official", rendering: str = "official",
                 turns: Sequence[tuple[str, str]] | None = None, order: str = "rubric_first") -> list[dict[str, str]]:
        """The judge prompt (without the answer)."""
        from esc_eval.sim.judging.prompts import judge_messages

        msgs = judge_messages(self.dimension, list(turns if turns is not None else self.turns), self.language,
                              rubric=rubric, rendering=rendering, order=order)
        return [{"role": m.role, "content": m.content} for m in msgs]

    @property
    def adapter(self) -> str:
        return adapter_name(self.dimension, self.language)


def join_annotations(annotations: Iterable[Annotation], dialogues: Iterable[SourceDialogue]) -> list[JudgeExample]:
    """Join labels with dialogues; every dialogue id must resolve (else TrainInputError listing them)."""
    by_id: Mapping[str, SourceDialogue] = {d.dialogue_id: d for d in dialogues}
    annotations = list(annotations)
    missing = sorted({a.dialogue_id for a in annotations if a.dialogue_id not in by_id})
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        known = ", ".join(repr(k) for k in list(by_id)[:3])
        raise TrainInputError(
            f"{len(missing)} annotated dialogue id(s) have no dialogue in the given sources: {shown} "
            f"(known ids look like {known or 'nothing: no dialogues loaded'})")
    out = []
    for a in annotations:
        d = by_id[a.dialogue_id]
        if not d.turns:
            raise TrainInputError(f"dialogue {a.dialogue_id}: has no turns to judge")
        out.append(JudgeExample(
            dialogue_id=a.dialogue_id, dimension=a.dimension, language=d.language,
            target_model=a.target_model or d.target_model, turns=list(d.turns), score=a.score, annotator=a.annotator,
        ))
    return out


def _shortened(turns: Sequence[tuple[str, str]], max_chars: int) -> list[tuple[str, str]]:
    return [(s, t if len(t) <= max_chars else t[:max_chars].rstrip() + " ...") for s, t in turns]


def fit_judge_example(tokenizer, example: JudgeExample, max_length: int, overflow: Overflow = OVERFLOW,
                      rubric: str = "official", rendering: str = "official",
                      order: str = "rubric_first") -> tuple[JudgeExample, TokenizedExample] | None:
    """The example with its dialogue turns trimmed so that prompt + answer fit max_length (the
    rubric and the question are never cut), and its tokens; None when dropped. Scoring uses the
    fitted example, so a judge is evaluated on the same prompt shape it was trained on."""
    answer = {"role": "assistant", "content": str(example.score)}
    turns = list(example.turns)
    budget = max((len(t) for _, t in turns), default=0)
    while True:
        msgs = example.messages(rubric, rendering, turns, order) + [answer]
        tok = tokenize_chat(tokenizer, msgs, max_length, target_role="assistant", truncation="drop")
        if tok is not None:
            tok.truncated = turns != list(example.turns)
            return (replace(example, turns=turns) if tok.truncated else example), tok
        if overflow == "error":
            raise TrainInputError(
                f"judge example {example.dialogue_id}/{example.dimension} does not fit in {max_length} tokens")
        budget //= 2
        if overflow == "drop" or budget < 16:
            return None
        turns = _shortened(example.turns, budget)


def tokenize_judge(tokenizer, example: JudgeExample, max_length: int, overflow: Overflow = OVERFLOW,
                   rubric: str = "official", rendering: str = "official",
                   order: str = "rubric_first") -> TokenizedExample | None:
    """Prompt + score digit, loss on the digit (and end-of-turn). None when dropped."""
    fitted = fit_judge_example(tokenizer, example, max_length, overflow, rubric, rendering, order)
    return fitted[1] if fitted else None


def prompt_text(tokenizer, example: JudgeExample, rubric: str = "official", rendering: str = "official",
                order: str = "rubric_first") -> str:
    """The rendered judge prompt with the generation prompt (what the scorer sends)."""
    return tokenizer.apply_chat_template(example.messages(rubric, rendering, None, order), tokenize=False,
                                         add_generation_prompt=True)
