"""Which rubric mode scored a judge's rows (the score rows' `rubric_mode`: sim/judging/one_call), and what
the leaderboard and the report say beside a judge that was not asked the paper's way."""
from __future__ import annotations

import pandas as pd

# What a judge's rubric mode means beside its numbers (its rows' `rubric_mode`; sim/judging/one_call).
RUBRIC_MODE_NOTES = {
    "one_call": "rubric mode one_call: every dimension in one call per dialogue (not the paper's call per dimension)",
    "mixed": "rows of both rubric modes under one judge id: not one judge's protocol",
}


def rubric_mode_of(rows: pd.DataFrame) -> str:
    """The rubric mode that scored these rows (one judge's): per_dimension (the paper's; rows from before
    the column say nothing and were), one_call, or mixed."""
    if "rubric_mode" not in rows.columns:
        return "per_dimension"
    modes = set(rows["rubric_mode"].fillna("per_dimension"))
    return modes.pop() if len(modes) == 1 else "mixed" if modes else "per_dimension"
