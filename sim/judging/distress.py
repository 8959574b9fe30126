"""The seeker's distress at one turn, 0-4 (beyond the paper): the prompt a judge answers.

The judge reads the last `context` merged turns before a seeker turn and that turn
(sim/data/prompts/distress.yaml; turns as sim/judging/distress_turns.py counts them), the same way
for a real help-seeker and a simulated one. Its rows are score rows with the dimension
`distress:<k>` (k = the seeker turn, from 1), so the scoring machinery (the pool, resume, the call
cache) carries them unchanged; they live in their own run folder, never beside the seven.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.judging.distress_turns import conversation
from esc_eval.sim.prompt_files import load_prompt_file

DEFAULT_CONTEXT = 4  # merged turns shown before the rated one: enough to know what it answers, bounded in length


def _lang(language: str) -> str:
    return "zh" if language == "zh" else "en"


def distress_messages(turns: Iterable[Mapping | Sequence], k: int, language: str,
                      context: int = DEFAULT_CONTEXT) -> list[ChatMessage]:
    """The messages asking a judge for the seeker's distress at seeker turn k (from 1) of a dialogue."""
    data, lang = load_prompt_file("distress"), _lang(language)
    conv = conversation(turns)
    seeker_at = [i for i, (s, _) in enumerate(conv) if s == "seeker"]
    if not 1 <= k <= len(seeker_at):
        raise ValueError(f"seeker turn {k} out of range: the dialogue has {len(seeker_at)} seeker turn(s)")
    at = seeker_at[k - 1]
    labels = data["labels"][lang]
    before = conv[max(0, at - context):at]
    lines = "\n".join(f"{labels[s]}: {t}" for s, t in before) or data["no_context"][lang]
    body = data["prompt"][lang].replace("{context}", lines).replace("{message}", conv[at][1])
    return [ChatMessage(role="system", content=data["system"][lang]), ChatMessage(role="user", content=body)]
