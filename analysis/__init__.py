"""analysis: everything that reads results — leaderboards (Table 2), judge agreement (Table 4),
correlations (Tables 3, 13-15), text metrics, inter-annotator agreement, role-play fidelity,
confidence intervals, plots and the HTML/Markdown report."""
from analysis.leaderboard import build_leaderboard, leaderboard_markdown, write_leaderboard
from analysis.loaders import (
    AnalysisInputError,
    load_dialogues,
    load_manifests,
    load_official_dialogues,
    load_official_scores,
    load_scores,
)

__all__ = [
    "AnalysisInputError",
    "build_leaderboard",
    "leaderboard_markdown",
    "load_dialogues",
    "load_manifests",
    "load_official_dialogues",
    "load_official_scores",
    "load_scores",
    "write_leaderboard",
]
