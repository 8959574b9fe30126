"""cli.results: the commands that read results: report and leaderboard, view, compare, export, the analyses, annotation.

Each module declares a command's options and makes one call into the library; cli/app.py
registers them."""
from esc_eval.cli.results import analysis, annotate, compare, export, judge_bias, pairwise_ratings, panels, report, safety, view

__all__ = ['analysis', 'annotate', 'compare', 'export', 'judge_bias', 'pairwise_ratings', 'panels', 'report', 'safety', 'view']
