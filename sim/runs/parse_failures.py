"""How often the judge's answers did not become scores, per (judge, target model, dimension).

A score row with a null score is either a parse failure (the judge answered, the parser found no
0-4 score) or an error (the call failed after retries). Both are kept as rows, never as zeros;
this table makes their rate visible, since a dimension whose answers rarely parse is biased
towards the dialogues where they do.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from esc_eval.sim.runs.runfolder import RunFolder

COLUMNS = ["judge", "target_model", "dimension", "n_scores", "ok", "parse_failures", "errors",
           "parse_failure_rate", "failure_rate"]


def parse_failure_report(run_dir: str | Path, judge: str | None = None) -> pd.DataFrame:
    """One row per (judge, target model, dimension) of a run folder's scores.

    n_scores counts the latest row per (dialogue, dimension, judge) (a resumed run re-scores
    failed rows: only the newest attempt counts). parse_failure_rate = parse_failures / n_scores;
    failure_rate also counts errors. Sorted by failure_rate, worst first. Empty (with the
    columns) when the run has no scores.
    """
    run = RunFolder(run_dir, create=False)
    cols = ["dialogue_id", "target_model", "dimension", "judge", "parse_status", "scored_at"]
    df = run.read("scores", columns=cols).to_pandas()
    if judge is not None:
        df = df[df["judge"] == judge]
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = df.sort_values("scored_at", kind="stable").drop_duplicates(["dialogue_id", "dimension", "judge"], keep="last")
    status = df["parse_status"]
    df = df.assign(ok=(status == "ok").astype(int), parse_failures=(status == "parse_failure").astype(int),
                   errors=(status == "error").astype(int))
    out = (df.groupby(["judge", "target_model", "dimension"], as_index=False)
             .agg(n_scores=("parse_status", "size"), ok=("ok", "sum"), parse_failures=("parse_failures", "sum"),
                  errors=("errors", "sum")))
    out["parse_failure_rate"] = out["parse_failures"] / out["n_scores"]
    out["failure_rate"] = (out["parse_failures"] + out["errors"]) / out["n_scores"]
    return out.sort_values(["failure_rate", "judge", "target_model", "dimension"], ascending=[False, True, True, True],
                           kind="stable").reset_index(drop=True)[COLUMNS]
