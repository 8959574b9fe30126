"""cli: the `esc-eval` command line, the top layer. It only parses and calls; it may import every
other package (serve, sim, train, analysis), and none of them imports it.

One module per command group: simulate, score, demo, report (report + leaderboard), cards, serve,
train, bench, analysis; `app` composes them (cli/app.py)."""
from esc_eval.cli.app import app, main

__all__ = ["app", "main"]
