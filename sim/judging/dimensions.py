"""The seven ESC-Eval judge dimensions: paper name, official key (ESC-RANK adapters, score JSON);
and the dimensions beyond the paper (crisis safety; continuity across the sessions of a course), scored by the same judges and annotators but
reported apart: never in Table 2, its Average, or a figure pooled "over all dimensions"."""
from __future__ import annotations

# paper name -> official key, in the paper's table order
DIMENSIONS: dict[str, str] = {
    "fluency": "fluency",
    "expression": "diversity",
    "empathy": "empathic",
    "information": "suggestion",
    "skillful": "tech",
    "humanoid": "human",
    "overall": "overall",
}
OFFICIAL_TO_PAPER = {v: k for k, v in DIMENSIONS.items()}
DIMENSION_NAMES = list(DIMENSIONS)
# Labels used in the paper's tables.
DIMENSION_TITLES = {
    "fluency": "Fluency",
    "expression": "Expression",
    "empathy": "Empathy",
    "information": "Information",
    "skillful": "Skillful",
    "humanoid": "Humanoid",
    "overall": "Overall",
}
SCORE_LABELS = ["0", "1", "2", "3", "4"]
# The end of a per-reply judge's id (config.py `reads: reply`): its rows rate one reply, not a dialogue.
REPLY_TAG = ":reply"
# The paper's tables show mean score x 25 (a 0-100 scale).
TABLE_SCALE = 25.0


# Beyond the paper: name -> key (no ESC-RANK adapter, no official score-JSON key).
EXTRA_DIMENSIONS: dict[str, str] = {"safety": "safety", "continuity": "continuity"}
EXTRA_TITLES = {"safety": "Safety", "continuity": "Continuity"}
SAFETY = "safety"
# Only for sessions 2, 3, ... of a course (sim/courses/): the judge reads the previous session too.
CONTINUITY = "continuity"
# Every dimension a judge or an annotator may score: the seven, then the extra ones.
ALL_DIMENSION_NAMES = DIMENSION_NAMES + list(EXTRA_DIMENSIONS)


def to_paper_dimension(name: str) -> str:
    """Accept a paper name or an official key; return the paper name."""
    key = name.strip().lower()
    if key in DIMENSIONS:
        return key
    if key in OFFICIAL_TO_PAPER:
        return OFFICIAL_TO_PAPER[key]
    raise ValueError(f"unknown dimension {name!r}; expected one of {DIMENSION_NAMES} or {list(OFFICIAL_TO_PAPER)}")


def to_dimension(name: str) -> str:
    """Like to_paper_dimension, also accepting the dimensions beyond the paper ('safety')."""
    key = name.strip().lower()
    if key in EXTRA_DIMENSIONS:
        return key
    try:
        return to_paper_dimension(key)
    except ValueError:
        raise ValueError(f"unknown dimension {name!r}; expected one of {ALL_DIMENSION_NAMES} or "
                         f"{list(OFFICIAL_TO_PAPER)}") from None


def is_paper_dimension(name: str) -> bool:
    """True for the seven dimensions of the paper (paper names), False for safety and the rest."""
    return name in DIMENSIONS


def dimension_title(name: str) -> str:
    """'Fluency', ..., 'Safety'; the name itself when unknown."""
    return DIMENSION_TITLES.get(name) or EXTRA_TITLES.get(name) or name
