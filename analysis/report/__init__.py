"""analysis.report: the HTML and Markdown report of one or more runs (`report.py`: `write_report`,
`report.html.jinja`) and the paper's sections in it (`sections.py`: summary, leaderboard,
categories, seeds, distributions, comparisons, health, throughput, fidelity, cards, samples); what
`esc-eval leaderboard` and `report` write from run folders (`from_runs.py`), what those commands, the
demo and `analysis safety` do with their options (`commands.py`), and their tables on the terminal
(`terminal.py`).

Layer: above compare, trust, seekers and the rooms below them; only bench imports it.

`write_report` is imported from analysis.report.report, not from here: the report module loads jinja2 and
matplotlib, and importing it here would make every command that reads this package (`esc-eval
leaderboard`, `analysis safety`) 1.0-1.5 s slower (measured on the 2-core AVX-512 EPYC, 2026-12-05:
`import esc_eval.analysis.report.commands` 4.5-6 s, loaded; the report module 1.0-1.5 s more)."""
from esc_eval.analysis.report.commands import (demo_report, leaderboard_of_runs, report_of_runs, safety_of_runs,
                                               show_fidelity_card, write_report_for)
from esc_eval.analysis.report.from_runs import (GroupRule, LeaderboardFiles, board_scores, model_groups, named_targets,
                                                write_leaderboard_by_files, write_leaderboard_files, write_report_files,
                                                write_safety_files)
from esc_eval.analysis.report.terminal import (show_anchored, show_leaderboard, show_leaderboard_files, show_line,
                                               show_safety)

__all__ = ["GroupRule", "LeaderboardFiles", "board_scores", "demo_report", "leaderboard_of_runs", "model_groups",
           "named_targets", "report_of_runs", "safety_of_runs", "show_anchored", "show_fidelity_card", "show_leaderboard",
           "show_leaderboard_files", "show_line", "show_safety", "write_leaderboard_by_files", "write_leaderboard_files",
           "write_report_files", "write_report_for", "write_safety_files"]
