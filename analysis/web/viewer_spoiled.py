"""The viewer's filter on the dialogues the simulator spoiled. It rides on the status filter (the
page's status choices and the API's `status` parameter), so the JSON API needs no new parameter:
besides a row status (ok, failed), `spoiled`, `not spoiled` and `spoiled: <reason>`."""
from __future__ import annotations

import pandas as pd

from esc_eval.sim.dialogue.spoiled import REASONS

SPOILED, CLEAN, REASON_PREFIX = "spoiled", "not spoiled", "spoiled: "


def spoiled_statuses(index: pd.DataFrame) -> list[str]:
    """The spoiled choices of the status filter: both sides, then each reason some dialogue has."""
    flags = index["spoiled"].dropna()
    if flags.empty:
        return []
    present = {r for rs in index["spoiled_reasons"].dropna() for r in rs}
    return [SPOILED, CLEAN] + [REASON_PREFIX + r for r in REASONS if r in present]


def status_mask(index: pd.DataFrame, status: str) -> pd.Series:
    """Rows of a status filter value: a row status, or one of spoiled_statuses()."""
    if status in (SPOILED, CLEAN):
        want = status == SPOILED
        return index["spoiled"].map(lambda v: v is not None and not pd.isna(v) and bool(v) == want)
    if status.startswith(REASON_PREFIX):
        reason = status[len(REASON_PREFIX):]
        return index["spoiled_reasons"].map(lambda rs: rs is not None and reason in rs)
    return index["status"] == status
