"""`esc-eval analysis panel` on run folders: read the score rows and manifests, analyse the panel
(panel_tables.analyse_panel) and write panel.md, panel.json and the panel's score rows
(panel_scores.csv, panel_scores.parquet) into one folder, all or nothing; bad input fails in one
line before anything is written."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

import pandas as pd

from esc_eval.analysis.panels.agreement import ALPHA_BOOT
from esc_eval.analysis.panels.panel_tables import PanelAnalysis, analyse_panel, panel_data, panel_markdown
from esc_eval.analysis.results.loaders import AnalysisInputError, load_manifests, load_scores
from esc_eval.analysis.results.outputs import report_folder, write_markdown_json
from esc_eval.analysis.judgments.windowed import windowed_line


def panel_of_runs(run_dirs: list, out, *, judges: list[str] | None = None, weights: Mapping[str, float] | None = None,
                  families: Mapping[str, str] | None = None, rule: str | None = None, min_judges: int | None = None,
                  n_boot: int = 1000, alpha_boot: int = ALPHA_BOOT, seed: int = 0,
                  windowed: str = "include") -> tuple[str, dict[str, str], PanelAnalysis]:
    """(Markdown, written paths by name, the analysis) of the runs' judge panel; windowed: include | exclude |
    only the judgments made on a window (analysis/judgments/windowed.py), counted in the markdown."""
    manifests = load_manifests(run_dirs)
    scores = load_scores(run_dirs, windowed=windowed)
    if scores.empty:
        raise AnalysisInputError(f"no score rows of the seven dimensions in {', '.join(map(str, run_dirs))}: score the runs first")
    a = analyse_panel(scores, manifests, judges=judges, weights=weights, families=families, rule=rule,
                      min_judges=min_judges, n_boot=n_boot, alpha_boot=alpha_boot, seed=seed)
    said = windowed_line(scores)
    markdown = panel_markdown(a) + ("\n\n" + said if said else "")
    rows = a.panel.scores

    def csv(path: Path) -> None:
        # P(0..4) as a JSON list so the CSV reads back without parsing Python reprs
        rows.assign(probs=rows["probs"].map(json.dumps)).to_csv(path, index=False)

    paths = write_markdown_json(out, "panel", markdown, {**panel_data(a), "windowed": scores.attrs["windowed"]}, extra={
        "panel_scores.csv": csv, "panel_scores.parquet": lambda p: rows.to_parquet(p, index=False)})
    return markdown, paths, a


def panel_command(run_dirs: list, out=None, *, judges: list[str] | None = None, weights: list[str] | None = None,
                  families: list[str] | None = None, rule: str | None = None, min_judges: int | None = None,
                  n_boot: int = 1000, alpha_boot: int = ALPHA_BOOT, seed: int = 0, windowed: str = "include") -> tuple[str, dict[str, str]]:
    """`esc-eval analysis panel`: its --weight ID=W and --family MODEL=FAM values read first (a bad one: one
    line, nothing read or written), then panel_of_runs into `out` (default <first run>/report); the Markdown
    and the written paths."""
    from esc_eval.analysis.panels.panel_spec import parse_assignments, parse_weights

    out = report_folder(run_dirs, out)
    parsed_weights, parsed_families = parse_weights(weights), parse_assignments(families, "--family")
    markdown, paths, _ = panel_of_runs(run_dirs, out, judges=judges, weights=parsed_weights, families=parsed_families,
                                       rule=rule, min_judges=min_judges, n_boot=n_boot, alpha_boot=alpha_boot, seed=seed,
                                       windowed=windowed)
    return markdown, paths


def with_panel_rows(scores: pd.DataFrame, manifests: Mapping[str, dict] | None, rule: str) -> pd.DataFrame:
    """`scores` with the panel's rows added as one more judge (`panel:<rule>`), so the leaderboard,
    the report, calibration and the prediction-powered means take the panel as they take one judge
    (`report --panel`, `leaderboard --panel`). The panel is the manifests' (else every judge in the
    rows); rows beyond the seven dimensions (safety) are not combined."""
    from esc_eval.analysis.panels.panel_scores import panel_scores
    from esc_eval.analysis.panels.panel_spec import panel_spec
    from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

    seven = scores[scores["dimension"].isin(DIMENSION_NAMES) & ~scores["judge"].astype(str).str.startswith("panel:")]
    rows = panel_scores(seven, panel_spec(seven, manifests, rule=rule)).scores
    rows = rows[[c for c in rows.columns if c in scores.columns]]  # the score frame's columns (not n_judges)
    return pd.concat([scores, rows], ignore_index=True)
