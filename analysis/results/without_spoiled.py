"""Table 2 without the dialogues the simulator spoiled, next to the table with them (`leaderboard
--exclude-spoiled`, the report's spoiled section): the Average with and without them per row, and the
files that show both."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from esc_eval.analysis.results.leaderboard import leaderboard_markdown
from esc_eval.sim.runs.open import OutputFolder

SPOILED_COLUMNS = ["language", "model", "judge", "n_all", "n_kept", "average_all", "average_kept", "change"]


def compare_without_spoiled(full: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """Per (language, model, judge) of the full Table 2: dialogues and Average with every dialogue
    and without the spoiled ones, and the change (without - with); a model left with no dialogue
    has NaN."""
    key = ["language", "model", "judge"]
    k = kept.set_index(key)[["n_dialogues", "Average"]] if not kept.empty else pd.DataFrame(columns=["n_dialogues", "Average"])
    rows = []
    for _, r in full.iterrows():
        at = tuple(r[c] for c in key)
        n_kept, avg = (int(k.loc[at, "n_dialogues"]), float(k.loc[at, "Average"])) if at in k.index else (0, float("nan"))
        rows.append({"language": r["language"], "model": r["model"], "judge": r["judge"], "n_all": int(r["n_dialogues"]),
                     "n_kept": n_kept, "average_all": float(r["Average"]), "average_kept": avg,
                     "change": avg - float(r["Average"])})
    return pd.DataFrame(rows, columns=SPOILED_COLUMNS)


def without_spoiled_markdown(kept: pd.DataFrame, comparison: pd.DataFrame, excluded: str) -> str:
    """The Average with and without the spoiled dialogues side by side, then Table 2 without them."""
    lines = [excluded, "", "## Next to the table with them", "",
             "| Language | Model | Judge | n (all) | n (without spoiled) | Average (all) | Average (without spoiled) | Change |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    f = lambda v, sign="": "n/a" if v != v else f"{v:{sign}.2f}"  # noqa: E731 - NaN -> n/a
    for _, r in comparison.iterrows():
        lines.append(f"| {r['language']} | {r['model']} | {r['judge']} | {r['n_all']} | {r['n_kept']} | "
                     f"{f(r['average_all'])} | {f(r['average_kept'])} | {f(r['change'], '+')} |")
    return "\n".join(lines) + "\n\n## Without the spoiled dialogues\n\n" + leaderboard_markdown(kept)


def write_without_spoiled(kept: pd.DataFrame, comparison: pd.DataFrame, out_dir: str | Path, excluded: str) -> dict[str, Path]:
    """leaderboard_without_spoiled.md (the comparison, then Table 2 without them), its .csv and
    leaderboard_spoiled_change.csv (the comparison) in out_dir."""
    with OutputFolder(out_dir) as out:
        md, csv, change = (out / "leaderboard_without_spoiled.md", out / "leaderboard_without_spoiled.csv",
                           out / "leaderboard_spoiled_change.csv")
        md.write_text("# Leaderboard without the dialogues the simulator spoiled (mean score x 25, bootstrap 95% CI)\n\n"
                      + without_spoiled_markdown(kept, comparison, excluded), encoding="utf-8")
        kept.to_csv(csv, index=False)
        comparison.to_csv(change, index=False)
        return out.finals({"markdown": md, "csv": csv, "change_csv": change})
