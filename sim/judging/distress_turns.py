"""The seeker's turns as the distress judge and the fidelity analysis both count them (pure: no model
code, so analysis reads them too).

A seeker turn is a run of consecutive seeker messages (ESConv's seekers often send two or three
in a row before the supporter answers; a simulated seeker sends one per round): `seeker_runs`
merges them, and `conversation` merges every run of one speaker. A distress rating's score row has
the dimension `distress:<k>` (k = the seeker turn, from 1).
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

DISTRESS = "distress"


def _pairs(turns: Iterable[Mapping | Sequence]) -> list[tuple[str, str]]:
    out = []
    for t in turns:
        speaker, text = (t["speaker"], t["text"]) if isinstance(t, Mapping) else (t[0], t[1])
        out.append(("seeker" if speaker == "seeker" else "assistant", (text or "").strip()))
    return out


def conversation(turns: Iterable[Mapping | Sequence]) -> list[tuple[str, str]]:
    """(speaker, text) with consecutive turns of one speaker merged (texts joined by a space);
    speakers are "seeker" and "assistant" (the supporter, or the model under test)."""
    merged: list[tuple[str, str]] = []
    for speaker, text in _pairs(turns):
        if merged and merged[-1][0] == speaker:
            merged[-1] = (speaker, f"{merged[-1][1]} {text}".strip())
        else:
            merged.append((speaker, text))
    return merged


def seeker_runs(turns: Iterable[Mapping | Sequence]) -> list[str]:
    """The seeker's turns: each run of consecutive seeker messages, joined by a space."""
    return [text for speaker, text in conversation(turns) if speaker == "seeker"]


def distress_dimension(k: int) -> str:
    """The dimension of the rating at seeker turn k (from 1): 'distress:3'."""
    return f"{DISTRESS}:{int(k)}"


def distress_turn(dimension: str) -> int | None:
    """k of 'distress:k', None for any other dimension."""
    head, _, k = str(dimension).partition(":")
    return int(k) if head == DISTRESS and k.isdigit() else None
