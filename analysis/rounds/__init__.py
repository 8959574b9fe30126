"""analysis.rounds (beyond the paper): scores by round, each target's score round by round over a fixed
cohort and over the survivors (`by_round.py`, with its report section), and where the cohort's curve
changes, with an interval: the verdict (`change_point.py`; `round_change_point` is the function a
validity check calls; `round_change`, the first round against the whole dialogue, is kept for comparison).

Layer: beside trust, seekers, panels and pairwise; reads results."""
from esc_eval.analysis.rounds.by_round import round_change, round_table, round_values, write_rounds
from esc_eval.analysis.rounds.change_point import MIN_CARDS, cohort, curve_step, round_change_point

__all__ = ["MIN_CARDS", "cohort", "curve_step", "round_change", "round_change_point", "round_table", "round_values",
           "write_rounds"]
