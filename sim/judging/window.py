"""The whole-dialogue judgment of a dialogue longer than the judge's context: the rule.

A judge reads the whole dialogue whenever it fits. When the judge refuses the prompt
(ContextOverflowError: a vLLM engine's max_model_len, an API's "maximum context length"), the
dialogue is windowed and the judge asked again:
- kept: the opener and round 1 (who the seeker is and what they came with), and the last rounds
  (where the conversation got to);
- left out: the rounds between, said in one marker at the head of the first late seeker turn
  kept (`[... 12 rounds left out ...]`, en and zh: rubrics.yaml `window_marker`);
- the late rounds kept start at all but round 1 and halve on each refusal (R - 1 is the whole
  dialogue, then (R - 1) // 2, ..., 1): at most log2(R) more calls, each refused before any
  generation.
A dialogue whose round 1 and last round together do not fit keeps the refusal as its error row.
Every score row records how many rounds its judge did not read (`rounds_left_out`: 0 for the whole
dialogue; null in runs scored before this rule).

Why not a summary of the middle, or the last rounds only: a summary is another model's words in
the judge's input, and the paper's rubrics (coherence, information) judge the dialogue from its
start; the opener and round 1 are what every later reply answers to.
"""
from __future__ import annotations

from typing import Any, Awaitable, Callable, Sequence

from esc_eval.serve.chat.interface import ContextOverflowError
from esc_eval.sim.prompt_files import load_prompt_file

Turn = tuple[str, str]


def dialogue_rounds(turns: Sequence[Turn]) -> tuple[list[Turn], list[list[Turn]]]:
    """(the opener turns before the first seeker turn, the rounds): a round is a seeker turn and
    what follows it up to the next seeker turn."""
    head: list[Turn] = []
    rounds: list[list[Turn]] = []
    for speaker, text in turns:
        if speaker != "assistant":  # the seeker ("seeker" in rows, "user" in some imports)
            rounds.append([(speaker, text)])
        elif rounds:
            rounds[-1].append((speaker, text))
        else:
            head.append((speaker, text))
    return head, rounds


def late_rounds_to_try(n_rounds: int) -> list[int]:
    """The late rounds kept on each retry after the whole dialogue was refused: (R - 1) // 2, ..., 1."""
    out, keep = [], n_rounds - 1
    while keep > 1:
        keep //= 2
        out.append(keep)
    return out


def windowed(turns: Sequence[Turn], keep_late: int, language: str) -> tuple[list[Turn], int]:
    """The opener, round 1 and the last `keep_late` rounds, the marker at the head of the first late
    seeker turn; and how many rounds were left out (0: the dialogue as it is)."""
    head, rounds = dialogue_rounds(turns)
    left_out = len(rounds) - 1 - keep_late
    if left_out <= 0:
        return list(turns), 0
    late = [list(r) for r in rounds[-keep_late:]]
    marker = load_prompt_file("rubrics")["window_marker"][language if language in ("en", "zh") else "en"]
    speaker, text = late[0][0]
    late[0][0] = (speaker, f"{marker.replace('{n}', str(left_out))} {text}")
    return [*head, *rounds[0], *(t for r in late for t in r)], left_out


async def ask_within_context(n_rounds: int, ask: Callable[[int | None, bool], Awaitable[dict[str, Any] | None]]
                             ) -> dict[str, Any] | None:
    """The rule above around one judge call: `ask(keep_late, raise_overflow)` with the whole dialogue
    (keep_late None), then, each time it raises ContextOverflowError, with fewer late rounds
    (late_rounds_to_try); the last try is asked with raise_overflow False, so its refusal is the
    row's error. Shared by scoring (one dialogue) and pairwise judging (two, windowed alike)."""
    tries: list[int | None] = [None, *late_rounds_to_try(n_rounds)]
    for i, keep_late in enumerate(tries):
        try:
            return await ask(keep_late, i < len(tries) - 1)
        except ContextOverflowError:
            continue
    return None  # not reached: the last try records its refusal
