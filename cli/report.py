"""`esc-eval report` and `esc-eval leaderboard`: the paper's Table 2 and the HTML/Markdown report.

Both group models (close / open / domain) by one rule, the model registry's
(`serve.registry.registry.model_groups`), which this layer passes into the analysis functions.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import emit
from esc_eval.sim.runs.open import OutputFolder
from esc_eval.sim.runs.storage import join_location

# Strings, not Paths: a storage URI (s3://bucket/run) would lose a '/' as a Path.
RunDirs = Annotated[list[str], typer.Argument(help="Run folders or storage URIs (or folders of official score JSON).")]
Out = Annotated[Optional[str], typer.Option("--out", "-o", help="Output folder or storage URI (default <first run>/report).")]
NBoot = Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the CIs (0 = none).")]
Seed = Annotated[int, typer.Option("--seed", help="Bootstrap seed.")]
Humans = Annotated[Optional[str], typer.Option("--humans", help="Human scores to anchor the means on (PPI): an annotate store (annotations.sqlite, or a run folder holding one), filled annotation sheets (a folder of annotate_*.csv or a CSV) or annotate export's table.")]
Study = Annotated[Optional[str], typer.Option("--study", help="Only this study of the annotate store (default: every study).")]
OneAnnotator = Annotated[bool, typer.Option("--allow-one-annotator", help="Accept human scores that all come from one annotator.")]
HumanSeekerFile = Annotated[Optional[str], typer.Option("--human-seekers", help="Real help-seekers' dialogues in ESConv's format: adds the section 'Is the simulated seeker like a person?' (esc-eval analysis fidelity without a judge).")]
ScoreKind = Annotated[str, typer.Option("--scores", help="label (the judge's most likely label, the paper's) | expected (sum of k x P(k) where the judge gave P(0..4)).")]


def read_humans(humans: Optional[str], study: Optional[str], allow_one: bool):
    """The --humans source, read and checked at the door (None when not given)."""
    if humans is None:
        if study is not None:
            raise typer.BadParameter("--study needs --humans")
        return None
    from esc_eval.analysis.trust.human_scores import load_human_scores

    return load_human_scores(humans, study=study, allow_one_annotator=allow_one)


def board_scores(run_dirs: list[str], score_kind: str):
    """The runs' score rows, as labels or expected scores."""
    from esc_eval.analysis import load_scores
    from esc_eval.analysis.results.expected_scores import check_score_kind, expected_scores

    scores = load_scores(run_dirs)
    return expected_scores(scores) if check_score_kind(score_kind) == "expected" else scores


def registry_groups(models, run_dirs: list[str] | None = None) -> dict[str, str]:
    """The one grouping rule: the registry's Table 2 group of every model it knows; a named target
    (ModelRef.name, read from the runs' manifests) takes the group of the model it runs."""
    from esc_eval.serve.registry.registry import model_groups

    names = sorted({str(m) for m in models})
    runs = named_targets(run_dirs) if run_dirs else {}
    groups = model_groups(sorted({runs.get(m, m) for m in names}))
    return {m: groups[runs.get(m, m)] for m in names if runs.get(m, m) in groups}


def named_targets(run_dirs: list[str]) -> dict[str, str]:
    """Target name -> model of the targets the runs' simulations named."""
    from esc_eval.analysis import load_manifests
    from esc_eval.analysis.results.loaders import is_official_json

    out = {}
    folders = [r for r in run_dirs if not is_official_json(r)]
    for manifest in (load_manifests(folders) if folders else {}).values():  # official JSON has no manifest
        for t in ((manifest.get("simulation") or {}).get("config") or {}).get("targets") or []:
            if isinstance(t, dict) and t.get("name") and t.get("model"):
                out[str(t["name"])] = str(t["model"])
    return out


def show_leaderboard(table, score_kind: str = "label", title: str = "") -> None:
    """The leaderboard as a terminal table (the CIs are in leaderboard.md)."""
    from rich.table import Table

    from esc_eval.analysis.results.leaderboard import spoiled_cell
    from esc_eval.sim.judging.dimensions import DIMENSION_TITLES
    from esc_eval.sim.pool.progress import console

    cols = [*DIMENSION_TITLES.values(), "Average"]
    what = "mean expected score" if score_kind == "expected" else "mean score"
    t = Table(title=title or f"Leaderboard: {what} x 25 (CIs in leaderboard.md)", pad_edge=False)
    for c in ["Lang", "Group", "Model", "n", "Spoiled", *[c[:3] for c in cols], "Fail"]:
        t.add_column(c, justify="right" if c not in ("Lang", "Group", "Model") else "left", overflow="fold")
    for _, r in table.iterrows():
        vals = ["-" if r[c] != r[c] else f"{r[c]:.1f}" for c in cols]  # NaN -> "-"
        t.add_row(r["language"], r["group"], r["model"], str(r["n_dialogues"]), spoiled_cell(r), *vals,
                  f"{r['parse_failure_rate']:.0%}")
    console.print(t)


def show_line(line: str) -> None:
    """A line beside the terminal's table (e.g. that the judge has no human scores beside it)."""
    if line:
        from esc_eval.sim.pool.progress import console

        console.print(line, highlight=False, markup=False)


def show_anchored(anchored) -> None:
    """The human-anchored Average per model on the terminal (every column is in leaderboard_humans.md)."""
    from rich.table import Table

    from esc_eval.sim.pool.progress import console

    t = Table(title="Average on the human scale (PPI, 95% CI) next to the judge's", pad_edge=False)
    for c in ["Lang", "Model", "Judge", "Human scores", "Judge mean [CI]", "PPI [CI]", "Humans only [CI]"]:
        t.add_column(c, justify="left" if c in ("Lang", "Model", "Judge") else "right", overflow="fold")

    def ci(v, lo, hi) -> str:
        return "-" if v != v else (f"{v:.1f}" if lo != lo else f"{v:.1f} [{lo:.1f}, {hi:.1f}]")  # NaN -> "-"

    for _, r in anchored[anchored["column"] == "Average"].iterrows():
        t.add_row(r["language"], r["model"], r["judge"], str(r["n_human"]), ci(r["judge_mean"], r["judge_lo"], r["judge_hi"]),
                  ci(r["ppi"], r["ppi_lo"], r["ppi_hi"]), ci(r["human_mean"], r["human_lo"], r["human_hi"]))
    console.print(t)


def write_leaderboard_for(run_dirs: list[str], out: Optional[str], n_boot: int = 1000, seed: int = 0, humans=None,
                          score_kind: str = "label", exclude_spoiled: bool = False) -> dict[str, Path]:
    from esc_eval.analysis import build_leaderboard, load_manifests, write_leaderboard
    from esc_eval.analysis.results.expected_scores import score_kind_note
    from esc_eval.analysis.results.leaderboard import human_scores_line
    from esc_eval.analysis.results.spoiled import spoiled_by_dialogue
    from esc_eval.analysis.results.usage import add_usage_columns

    scores = board_scores(run_dirs, score_kind)
    if humans is not None:
        humans.check_runs(set(scores["dialogue_id"]))  # before anything is written
    if exclude_spoiled:  # runs without the dialogues' turns: one line, before anything is written
        from esc_eval.analysis.results.spoiled import split_spoiled

        kept_scores, excluded = split_spoiled(run_dirs, scores)
    groups = registry_groups(scores["target_model"].dropna(), run_dirs)
    spoiled = spoiled_by_dialogue(run_dirs)
    table = build_leaderboard(scores, groups=groups, n_boot=n_boot, seed=seed, spoiled=spoiled)
    target = out or join_location(run_dirs[0], "report")
    line = human_scores_line(scores["judge"].dropna().unique(), anchored=humans is not None)
    kind_note = score_kind_note(scores) if score_kind == "expected" else ""
    paths = write_leaderboard(add_usage_columns(table, load_manifests(run_dirs)), target,
                              note="\n\n".join(n for n in (kind_note, line) if n))
    show_leaderboard(table, score_kind)
    show_line(line)
    if exclude_spoiled:
        from esc_eval.analysis.results.leaderboard import compare_without_spoiled, write_without_spoiled
        from esc_eval.sim.pool.progress import console

        kept = build_leaderboard(kept_scores, groups=groups, n_boot=n_boot, seed=seed, spoiled=spoiled)
        paths.update({f"without_spoiled_{k}": v for k, v in
                      write_without_spoiled(kept, compare_without_spoiled(table, kept), target, excluded).items()})
        show_leaderboard(kept, score_kind, title="Leaderboard without the dialogues the simulator spoiled")
        console.print(excluded)
    if humans is not None:
        from esc_eval.analysis.trust.human_leaderboard import human_anchored, write_anchored

        anchored = human_anchored(scores, humans, table)
        for k, v in write_anchored(anchored, target, humans.source).items():
            paths[f"humans_{k}"] = v
        show_anchored(anchored)
    from esc_eval.cli.safety import write_safety_for

    # beyond the paper, apart from Table 2: safety.md/.csv beside it when the runs hold safety scores
    paths.update({f"safety_{k}": v for k, v in write_safety_for(run_dirs, out, n_boot, seed, required=False).items()})
    return paths


def write_report_for(run_dirs: list[str], out: Optional[str], n_boot: int = 1000, seed: int = 0,
                     samples: int = 3, humans=None, score_kind: str = "label", human_seekers=None,
                     judge_note: str | None = None) -> dict[str, Path]:
    """The report (which writes the leaderboard once) and the leaderboard on the terminal.
    human_seekers (analysis.seekers.esconv.HumanSeekers): add the seeker-fidelity section; judge_note:
    the line said instead of the usual one where the judge has no human scores (the demo's)."""
    from esc_eval.analysis import build_leaderboard
    from esc_eval.analysis.report.report import write_report
    from esc_eval.analysis.results.leaderboard import human_scores_line
    from esc_eval.analysis.results.spoiled import spoiled_by_dialogue

    scores = board_scores(run_dirs, score_kind)
    groups = registry_groups(scores["target_model"].dropna(), run_dirs)
    table = build_leaderboard(scores, groups=groups, n_boot=n_boot, seed=seed, spoiled=spoiled_by_dialogue(run_dirs))
    paths = write_report(run_dirs, out, groups=groups, leaderboard=table, n_boot=n_boot, seed=seed, n_samples=samples,
                         humans=humans, score_kind=score_kind, human_seekers=human_seekers, judge_note=judge_note)
    show_leaderboard(table, score_kind)
    show_line(human_scores_line(scores["judge"].dropna().unique(), anchored=humans is not None, instead=judge_note))
    if humans is not None:
        from esc_eval.analysis.trust.human_leaderboard import human_anchored

        show_anchored(human_anchored(scores, humans, table))
    return paths


def write_leaderboard_by_for(run_dirs: list[str], out: Optional[str], by: str, n_boot: int = 1000,
                             seed: int = 0, score_kind: str = "label") -> dict[str, Path]:
    """Table 2 per value of a card attribute: leaderboard_by_<by>.md/.csv, and one terminal table per value."""
    from esc_eval.analysis import build_leaderboard_by, leaderboard_by_markdown
    from esc_eval.sim.pool.progress import console

    scores = board_scores(run_dirs, score_kind)
    from esc_eval.analysis.results.spoiled import flag_map, spoiled_dialogues

    dialogues = spoiled_dialogues(run_dirs)
    table = build_leaderboard_by(scores, dialogues, by, groups=registry_groups(scores["target_model"].dropna(), run_dirs),
                                 n_boot=n_boot, seed=seed, spoiled=flag_map(dialogues))
    from esc_eval.analysis.results.leaderboard import human_scores_line

    line = human_scores_line(scores["judge"].dropna().unique())  # --by takes no --humans
    with OutputFolder(out or join_location(run_dirs[0], "report")) as folder:
        md, csv = folder / f"leaderboard_by_{by}.md", folder / f"leaderboard_by_{by}.csv"
        md.write_text(f"# Leaderboard by {by} (mean score x 25, bootstrap 95% CI)\n\n" + (line + "\n\n" if line else "")
                      + leaderboard_by_markdown(table, by), encoding="utf-8")
        table.to_csv(csv, index=False)
        paths = folder.finals({"markdown": md, "csv": csv})
    name = table.columns[0]
    for value, g in table.groupby(name, sort=True):
        console.print(f"[bold]{name}: {value}[/bold] ({int(g['n_dialogues'].sum())} dialogues)")
        show_leaderboard(g, score_kind)
    show_line(line)
    return paths


def leaderboard(
    run_dirs: RunDirs, out: Out = None, n_boot: NBoot = 1000, seed: Seed = 0,
    by: Annotated[Optional[str], typer.Option(
        "--by", help="Split by a card attribute: category (Table 9's top level), category_2, category_3, language.")] = None,
    humans: Humans = None, study: Study = None, allow_one_annotator: OneAnnotator = False, scores: ScoreKind = "label",
    exclude_spoiled: Annotated[bool, typer.Option(
        "--exclude-spoiled", help="Also the table without the dialogues the simulator spoiled, next to the one with "
        "them (leaderboard_without_spoiled.md/.csv).")] = False,
) -> None:
    """The paper's Table 2: mean x 25 per dimension with bootstrap 95% CIs (leaderboard.md/.csv); with
    --humans also each model's human-scale mean by PPI (leaderboard_humans.md/.csv)."""
    human = read_humans(humans, study, allow_one_annotator)
    if by:
        if human is not None:
            raise typer.BadParameter("--by does not take --humans: anchor the whole leaderboard (without --by)")
        if exclude_spoiled:
            raise typer.BadParameter("--by does not take --exclude-spoiled: compare the whole leaderboard (without --by)")
        emit({k: str(v) for k, v in write_leaderboard_by_for(run_dirs, out, by, n_boot, seed, scores).items()})
        return
    emit({k: str(v) for k, v in write_leaderboard_for(run_dirs, out, n_boot, seed, human, scores, exclude_spoiled).items()})


def report(
    run_dirs: RunDirs,
    out: Out = None,
    n_boot: NBoot = 1000,
    seed: Seed = 0,
    samples: Annotated[int, typer.Option("--samples", help="Sample dialogues shown in the report.")] = 3,
    humans: Humans = None, study: Study = None, allow_one_annotator: OneAnnotator = False, scores: ScoreKind = "label",
    human_seekers: HumanSeekerFile = None,
) -> None:
    """Leaderboard with CIs, plots, failures, throughput, samples: report.html + report.md; with
    --humans also the human-anchored leaderboard (PPI) and each judge's calibration; with
    --human-seekers the simulated seekers next to real ones."""
    human = read_humans(humans, study, allow_one_annotator)
    seekers = None
    if human_seekers is not None:  # a bad file: one line, before anything is written
        from esc_eval.analysis.seekers.esconv import read_human_seekers

        seekers = read_human_seekers(human_seekers)
    emit({k: str(v) for k, v in write_report_for(run_dirs, out, n_boot, seed, samples, human, scores,
                                                 human_seekers=seekers).items()})
