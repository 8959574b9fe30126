"""panels: several judges over the same dialogues (a score run scored with `--judge` repeated, or a
panel in the scoring config). The panel's score per dialogue and dimension by a rule, the judges'
agreement, each judge's leaderboard beside the panel's, and self-preference (a judge from a target's
own family)."""
