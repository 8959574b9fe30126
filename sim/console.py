"""The terminal everything esc-eval shows beside its results goes to: stderr (stdout keeps the JSON a
command prints), 160 columns where it is no terminal (a log, CI, a pipe) so that tables are not squeezed
into 80. The jobs' progress (sim/driver/progress.py), the leaderboard's and the analyses' tables
(analysis/report/terminal.py) and the commands' lines all print on this one console.

Layer: the floor of sim beside prompt_files.py (it imports nothing of esc_eval), so analysis may show
its tables here without importing the driver (whose package imports serve)."""
from __future__ import annotations

from rich.console import Console

console = Console(stderr=True)
if not console.is_terminal:  # logs and CI: do not squeeze tables into 80 columns
    console = Console(stderr=True, width=160)

__all__ = ["console"]
