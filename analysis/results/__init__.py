"""analysis.results: reading a run's rows into the paper's tables. Loading run folders and the
official JSON (`loaders.py`), the leaderboard of Table 2 with bootstrap intervals and seed spreads
(`leaderboard.py`), token usage
and spend (`usage.py`), a bootstrap CI of a ratio of sums over units (`ratio_ci.py`), ranks and
Kendall's tau of two rankings (`rank_stats.py`), the dialogues the simulator
spoiled, stored with the run or computed on the fly (`spoiled.py`), the report's plain blocks
every section is written in (`blocks.py`), what a command writes beside its table (`outputs.py`),
fake run folders for benchmarks (`fake_runs.py`), and Table 2 without the spoiled dialogues next to it
(`without_spoiled.py`). What a judgment is read as (expected scores,
windowed readings, the rubric mode) is analysis/judgments, below.

Layer: above analysis/judgments; imports sim's data definitions (dimensions, schemas, run folders)
and no other room."""
from esc_eval.analysis.results.fake_runs import fake_run_folder, write_fake_run
from esc_eval.analysis.results.leaderboard import (build_leaderboard, build_leaderboard_by, format_cell,
                                                   leaderboard_by_markdown, leaderboard_markdown, seed_spread,
                                                   write_leaderboard)
from esc_eval.analysis.results.loaders import (AnalysisInputError, is_official_json, load_dialogues, load_manifests,
                                               load_official_dialogues, load_official_scores, load_pairwise, load_scores,
                                               official_kind)
from esc_eval.analysis.results.rank_stats import kendall_tau, ranks
from esc_eval.analysis.results.ratio_ci import ratio_ci
from esc_eval.analysis.results.outputs import markdown_table, one_judge, records, report_folder, write_markdown_json
from esc_eval.analysis.results.spoiled import exclude_spoiled, spoiled_dialogues, spoiled_flags, with_spoiled
from esc_eval.analysis.results.usage import add_usage_columns, usage_rows

__all__ = ["report_folder", "kendall_tau", "ranks", "ratio_ci", "AnalysisInputError", "add_usage_columns", "build_leaderboard", "build_leaderboard_by",
           "format_cell", "is_official_json", "leaderboard_by_markdown",
           "leaderboard_markdown", "load_dialogues", "load_manifests", "load_official_dialogues", "load_official_scores",
           "load_pairwise", "load_scores", "official_kind", "seed_spread", "usage_rows",
           "fake_run_folder", "write_fake_run", "write_leaderboard", "markdown_table", "one_judge", "records", "write_markdown_json",
           "exclude_spoiled", "spoiled_dialogues", "spoiled_flags", "with_spoiled"]
