"""The seven ESC-Eval judge dimensions: paper name, official key (ESC-RANK adapters, score JSON)."""
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
# The paper's tables show mean score x 25 (a 0-100 scale).
TABLE_SCALE = 25.0


def to_paper_dimension(name: str) -> str:
    """Accept a paper name or an official key; return the paper name."""
    key = name.strip().lower()
    if key in DIMENSIONS:
        return key
    if key in OFFICIAL_TO_PAPER:
        return OFFICIAL_TO_PAPER[key]
    raise ValueError(f"unknown dimension {name!r}; expected one of {DIMENSION_NAMES} or {list(OFFICIAL_TO_PAPER)}")
