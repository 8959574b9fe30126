"""cli.jobs: the commands that run jobs and write run folders: simulate, score, pairwise, demo, train, cards.

Each module declares a command's options and makes one call into the library; cli/app.py
registers them."""
from esc_eval.cli.jobs import cards, demo, pairwise, score, simulate, train

__all__ = ['cards', 'demo', 'pairwise', 'score', 'simulate', 'train']
