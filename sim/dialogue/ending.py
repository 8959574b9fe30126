"""How a dialogue ended: the values a dialogue row's `termination_reason` and `end_reason` take
when it did not fail, and `dialogue_ending`, which tells them from the turns.

A dialogue runs to its round cap, or ends earlier when its seeker ends it (seeker_stop.py) or when
its next call would not fit a model's context (dialogue.py ends it there, after one round at least).
"""
from __future__ import annotations

from typing import Sequence

from esc_eval.sim.dialogue.seeker_stop import seeker_end

# termination_reason of a dialogue that did not fail
COMPLETED, SEEKER_ENDED, CONTEXT_FULL = "completed", "seeker_ended", "context_full"
AT_CAP = "still_going"  # end_reason of a dialogue that reached the round cap (the seeker's: resolved | gave_up)


def dialogue_ending(turns: Sequence, rounds: int) -> str:
    """How a dialogue run_dialogue returned ended: its seeker ended it, it reached `rounds`, or the
    next call would not fit a model's context (the only other way it returns early)."""
    if seeker_end(turns):
        return SEEKER_ENDED
    return COMPLETED if len(turns) >= 1 + 2 * rounds else CONTEXT_FULL


def end_reason(turns: Sequence, rounds: int) -> str:
    """A row's end_reason: resolved | gave_up (the seeker) | still_going (the cap) | context_full."""
    return seeker_end(turns) or {COMPLETED: AT_CAP, CONTEXT_FULL: CONTEXT_FULL}[dialogue_ending(turns, rounds)]
