"""What `esc-eval leaderboard` and `esc-eval report` write from run folders: the scores read once, the
models grouped by the rule the caller passes (the CLI passes the model registry's, which analysis may
not import), the files written. The tables come back for the caller to show; nothing is printed here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import pandas as pd

from esc_eval.sim.runs.open import OutputFolder
from esc_eval.sim.runs.storage import join_location

# model names -> {model: "close" | "open" | "domain"} for the models the rule knows (Table 2's groups)
GroupRule = Callable[[list[str]], dict[str, str]]


@dataclass
class LeaderboardFiles:
    """What a leaderboard wrote, and the tables to show beside the files."""

    paths: dict[str, Any]
    table: pd.DataFrame  # Table 2 over every dialogue
    line: str = ""  # said beside the table: the judge has no human scores beside it, or ""
    kept: pd.DataFrame | None = None  # --exclude-spoiled: the table without the spoiled dialogues
    excluded: str = ""  # --exclude-spoiled: what was left out, in a line
    anchored: pd.DataFrame | None = None  # --humans: the human-anchored means (PPI)
    safety: pd.DataFrame | None = None  # the harm-weighted safety summary where the runs hold safety scores
    windowed: str = ""  # how many judgments were made on a window (analysis/judgments/windowed.py), said beside the table
    self_preference: str = ""  # a judge of a target's own family (analysis/panels/self_preference.py), said beside it
    by: dict[str, pd.DataFrame] = field(default_factory=dict)  # --by: one table per value of the attribute


def board_scores(run_dirs: list[str], score_kind: str, panel: str | None = None, windowed: str = "include") -> pd.DataFrame:
    """The runs' score rows, as labels or expected scores; with `panel` (a rule) the judges' panel
    added as one more judge (analysis/panels/panel_runs.py); `windowed` (include | exclude | only) the
    judgments made on a window, counted in attrs["windowed"] (analysis/judgments/windowed.py)."""
    from esc_eval.analysis.judgments.expected_scores import check_score_kind, expected_scores
    from esc_eval.analysis.results.loaders import load_manifests, load_scores

    scores = load_scores(run_dirs, windowed=windowed)
    counts = scores.attrs["windowed"]
    if panel is not None:
        from esc_eval.analysis.panels.panel_runs import with_panel_rows

        scores = with_panel_rows(scores, load_manifests(run_dirs), panel)
    out = expected_scores(scores) if check_score_kind(score_kind) == "expected" else scores
    out.attrs["windowed"] = counts  # the count of the rows read, whatever was added to them
    return out


def named_targets(run_dirs: list[str]) -> dict[str, str]:
    """Target name -> model of the targets the runs' simulations named."""
    from esc_eval.analysis.results.loaders import is_official_json, load_manifests

    out = {}
    folders = [r for r in run_dirs if not is_official_json(r)]
    for manifest in (load_manifests(folders) if folders else {}).values():  # official JSON has no manifest
        for t in ((manifest.get("simulation") or {}).get("config") or {}).get("targets") or []:
            if isinstance(t, dict) and t.get("name") and t.get("model"):
                out[str(t["name"])] = str(t["model"])
    return out


def model_groups(models: Iterable, run_dirs: list[str] | None, rule: GroupRule) -> dict[str, str]:
    """The rule's group of every model it knows; a named target (ModelRef.name, read from the runs'
    manifests) takes the group of the model it runs."""
    names = sorted({str(m) for m in models})
    runs = named_targets(run_dirs) if run_dirs else {}
    groups = rule(sorted({runs.get(m, m) for m in names}))
    return {m: groups[runs.get(m, m)] for m in names if runs.get(m, m) in groups}


def write_safety_files(run_dirs: list[str], out: str | None, n_boot: int = 1000, seed: int = 0,
                       required: bool = True, windowed: str = "include") -> tuple[dict[str, Any], pd.DataFrame | None]:
    """safety.md/.csv of the runs and the summary, with risk that emerges mid-conversation beside it
    (emerging_risk.md/.csv: analysis/safety/emerging_section.py); with required=False, ({}, None) when they
    hold neither (required: one line, AnalysisInputError). windowed: include | exclude | only the
    judgments made on a window (analysis/judgments/windowed.py)."""
    from esc_eval.analysis.safety.emerging_section import safety_files

    return safety_files(run_dirs, out or join_location(run_dirs[0], "report"), n_boot, seed, required, windowed)


def marked_board(table: pd.DataFrame, scores: pd.DataFrame, run_dirs: list[str], humans, n_boot: int,
                 seed: int) -> tuple[pd.DataFrame, str]:
    """Table 2 with each row whose judge shares its target's family marked, and the line said beside it
    (analysis/panels/self_preference.py: sized against judges of other families or `humans`, else a warning)."""
    from esc_eval.analysis.panels.self_preference import mark_leaderboard, self_preference, self_preference_line
    from esc_eval.analysis.results.loaders import is_official_json, load_manifests

    folders = [r for r in run_dirs if not is_official_json(r)]
    marks = self_preference(scores, load_manifests(folders) if folders else {}, humans, n_boot=n_boot, seed=seed)
    return mark_leaderboard(table, marks), self_preference_line(marks)


def write_leaderboard_files(run_dirs: list[str], out: str | None, rule: GroupRule, n_boot: int = 1000, seed: int = 0,
                            humans=None, score_kind: str = "label", exclude_spoiled: bool = False,
                            panel: str | None = None, windowed: str = "include") -> LeaderboardFiles:
    """leaderboard.md/.csv (Table 2 with bootstrap CIs, usage columns); with exclude_spoiled also the
    table without the spoiled dialogues; with humans (analysis.trust.human_scores.HumanScores) the
    human-anchored means; safety.md/.csv where the runs hold safety scores. Bad input raises before
    anything is written. windowed: include | exclude | only the judgments made on a window (counted beside the table)."""
    from esc_eval.analysis.judgments.expected_scores import score_kind_note
    from esc_eval.analysis.results.leaderboard import build_leaderboard, human_scores_line, write_leaderboard
    from esc_eval.analysis.results.loaders import load_manifests
    from esc_eval.analysis.results.spoiled import spoiled_by_dialogue, split_spoiled
    from esc_eval.analysis.results.usage import add_usage_columns
    from esc_eval.analysis.judgments.windowed import windowed_line

    scores = board_scores(run_dirs, score_kind, panel, windowed)
    said = windowed_line(scores)
    if humans is not None:
        humans.check_runs(set(scores["dialogue_id"]))
    if exclude_spoiled:  # runs without the dialogues' turns: one line, before anything is written
        kept_scores, excluded = split_spoiled(run_dirs, scores)
    groups = model_groups(scores["target_model"].dropna(), run_dirs, rule)
    spoiled = spoiled_by_dialogue(run_dirs)
    table, own = marked_board(build_leaderboard(scores, groups=groups, n_boot=n_boot, seed=seed, spoiled=spoiled),
                              scores, run_dirs, humans, n_boot, seed)
    target = out or join_location(run_dirs[0], "report")
    line = human_scores_line(scores["judge"].dropna().unique(), anchored=humans is not None)
    kind_note = score_kind_note(scores) if score_kind == "expected" else ""
    paths = write_leaderboard(add_usage_columns(table, load_manifests(run_dirs)), target,
                              note="\n\n".join(n for n in (kind_note, line, said, own) if n))
    result = LeaderboardFiles(paths, table, line, windowed=said, self_preference=own)
    if exclude_spoiled:
        from esc_eval.analysis.results.without_spoiled import compare_without_spoiled, write_without_spoiled

        result.kept = build_leaderboard(kept_scores, groups=groups, n_boot=n_boot, seed=seed, spoiled=spoiled)
        result.excluded = excluded
        paths.update({f"without_spoiled_{k}": v for k, v in
                      write_without_spoiled(result.kept, compare_without_spoiled(table, result.kept), target,
                                            excluded).items()})
    if humans is not None:
        from esc_eval.analysis.trust.human_leaderboard import human_anchored, write_anchored

        result.anchored = human_anchored(scores, humans, table)
        paths.update({f"humans_{k}": v for k, v in write_anchored(result.anchored, target, humans.source).items()})
    # beyond the paper, apart from Table 2: safety.md/.csv beside it when the runs hold safety scores
    safety_paths, result.safety = write_safety_files(run_dirs, out, n_boot, seed, required=False, windowed=windowed)
    paths.update({f"safety_{k}": v for k, v in safety_paths.items()})
    return result


def write_leaderboard_by_files(run_dirs: list[str], out: str | None, by: str, rule: GroupRule, n_boot: int = 1000,
                               seed: int = 0, score_kind: str = "label", windowed: str = "include") -> LeaderboardFiles:
    """Table 2 per value of a card attribute: leaderboard_by_<by>.md/.csv; `by` holds one table per value."""
    from esc_eval.analysis.results.leaderboard import (build_leaderboard_by, human_scores_line,
                                                       leaderboard_by_markdown)
    from esc_eval.analysis.results.spoiled import flag_map, spoiled_dialogues
    from esc_eval.analysis.judgments.windowed import windowed_line

    scores = board_scores(run_dirs, score_kind, windowed=windowed)
    said = windowed_line(scores)
    dialogues = spoiled_dialogues(run_dirs)
    table = build_leaderboard_by(scores, dialogues, by, groups=model_groups(scores["target_model"].dropna(), run_dirs, rule),
                                 n_boot=n_boot, seed=seed, spoiled=flag_map(dialogues))
    line = human_scores_line(scores["judge"].dropna().unique())  # --by takes no --humans
    with OutputFolder(out or join_location(run_dirs[0], "report")) as folder:
        md, csv = folder / f"leaderboard_by_{by}.md", folder / f"leaderboard_by_{by}.csv"
        md.write_text(f"# Leaderboard by {by} (mean score x 25, bootstrap 95% CI)\n\n"
                      + "".join(n + "\n\n" for n in (line, said) if n) + leaderboard_by_markdown(table, by), encoding="utf-8")
        table.to_csv(csv, index=False)
        paths = folder.finals({"markdown": md, "csv": csv})
    name = table.columns[0]
    return LeaderboardFiles(paths, table, line, by={value: g for value, g in table.groupby(name, sort=True)}, windowed=said)


def write_report_files(run_dirs: list[str], out: str | None, rule: GroupRule, n_boot: int = 1000, seed: int = 0,
                       samples: int = 3, humans=None, score_kind: str = "label", human_seekers=None,
                       judge_note: str | None = None, panel: str | None = None, windowed: str = "include",
                       embedding=None) -> LeaderboardFiles:
    """The report (which writes the leaderboard once) and its Table 2. human_seekers
    (analysis.seekers.esconv.HumanSeekers): add the seeker-fidelity section, and with embedding
    (analysis.realism.EmbeddingOptions) the comparison by embedding; judge_note: the line said
    instead of the usual one where the judge has no human scores (the demo's)."""
    from esc_eval.analysis.report.report import write_report
    from esc_eval.analysis.results.leaderboard import build_leaderboard, human_scores_line
    from esc_eval.analysis.results.spoiled import spoiled_by_dialogue
    from esc_eval.analysis.judgments.windowed import windowed_line

    scores = board_scores(run_dirs, score_kind, panel, windowed)
    groups = model_groups(scores["target_model"].dropna(), run_dirs, rule)
    table, own = marked_board(build_leaderboard(scores, groups=groups, n_boot=n_boot, seed=seed,
                                                spoiled=spoiled_by_dialogue(run_dirs)), scores, run_dirs, humans, n_boot, seed)
    paths = write_report(run_dirs, out, groups=groups, leaderboard=table, n_boot=n_boot, seed=seed, n_samples=samples,
                         humans=humans, score_kind=score_kind, human_seekers=human_seekers, judge_note=judge_note,
                         panel=panel, windowed=windowed, embedding=embedding)
    result = LeaderboardFiles(paths, table, human_scores_line(scores["judge"].dropna().unique(),
                                                              anchored=humans is not None, instead=judge_note),
                              windowed=windowed_line(scores), self_preference=own)
    if humans is not None:
        from esc_eval.analysis.trust.human_leaderboard import human_anchored

        result.anchored = human_anchored(scores, humans, table)
    return result


__all__ = ["GroupRule", "LeaderboardFiles", "board_scores", "model_groups", "named_targets",
           "write_leaderboard_by_files", "write_leaderboard_files", "write_report_files", "write_safety_files"]
