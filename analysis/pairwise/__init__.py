"""pairwise: a judge's head-to-head verdicts between two targets' dialogues of the same card (the run
folder's `pairwise` rows, sim/pairwise/job.py): position bias, Bradley-Terry ratings with bootstrap
intervals over cards, an Elo-scale table and the agreement with the pointwise ranking.

- verdicts.py: both orders of a pair combined into one outcome (a flip counts as a tie), with counts;
- position_bias.py: the flip rate and the share of answers picking the first-shown dialogue;
- bt_fit.py: the Bradley-Terry fit, vectorised over bootstrap resamples (checked against choix);
- bradley_terry.py: ratings per dimension and pooled, Elo scale, intervals and ranks;
- rank_agreement.py: Kendall's tau with the pointwise ranking (mean of the seven dimensions);
- pairwise_analysis.py: all of it as one call and its files (`esc-eval analysis pairwise-ratings`);
- pairwise_section.py: the report's section (order 280);
- fake_verdicts.py: synthetic verdict rows with known strengths (tests, `esc-eval bench pairwise`).
"""
from esc_eval.analysis.pairwise.bradley_terry import PairwiseRatings, bt_ratings
from esc_eval.analysis.pairwise.bt_fit import fit_bt, to_elo, win_tensor
from esc_eval.analysis.pairwise.fake_verdicts import fake_verdict_frame, write_fake_verdicts
from esc_eval.analysis.pairwise.pairwise_analysis import PairwiseAnalysis, analyse_pairwise, pairwise_of_runs, write_pairwise
from esc_eval.analysis.pairwise.position_bias import POOLED, position_bias
from esc_eval.analysis.pairwise.rank_agreement import rank_agreement
from esc_eval.analysis.pairwise.verdicts import FLIP_NOTE, Outcomes, combine_orders

__all__ = ["pairwise_of_runs", "FLIP_NOTE", "POOLED", "Outcomes", "PairwiseAnalysis", "PairwiseRatings", "analyse_pairwise", "bt_ratings",
           "combine_orders", "fake_verdict_frame", "fit_bt", "position_bias", "rank_agreement", "to_elo", "win_tensor",
           "write_fake_verdicts", "write_pairwise"]
