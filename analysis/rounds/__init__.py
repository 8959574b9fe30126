"""analysis.rounds (beyond the paper): scores by round, each target's score as its dialogues stood
after each round, and the change over the rounds (`by_round.py`, with its report section).

Layer: beside trust, seekers, panels and pairwise; reads results."""
from esc_eval.analysis.rounds.by_round import round_change, round_table, round_values, write_rounds

__all__ = ["round_change", "round_table", "round_values", "write_rounds"]
