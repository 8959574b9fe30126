"""cli: the `esc-eval` command line, the top layer. It only parses and calls: each command is its
options, door checks and one call into the library, which does and shows the rest
(tests/cli/test_cli_only_parses.py holds every module to it); it may import every other package
(serve, sim, train, analysis), and none of them imports it.

Rooms by what the commands do: jobs/ (simulate, score, pairwise, demo, train, cards), results/ (report,
leaderboard, view, compare, export, analysis, annotate), ops/ (serve, plan, check, bench, docs); `app`
composes them (cli/app.py) over what they share (cli/common.py)."""
from esc_eval.cli.app import app, main

__all__ = ["app", "main"]
