"""pairwise: a judge's head-to-head verdicts between two targets' dialogues of the same card (the run
folder's `pairwise` rows, sim/jobs/pairwise.py): position bias, Bradley-Terry ratings with bootstrap
intervals over cards, an Elo-scale table and the agreement with the pointwise ranking."""
