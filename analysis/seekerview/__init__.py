"""seekerview: the person's own view (beyond the paper). The ratings ESConv's seekers gave their own
conversations (empathy, relevance, emotion intensity before and after, 1-5), given by the simulated
seeker at the end of its dialogue, by a judge reading a dialogue as its seeker, or by the people
themselves: read from run folders with each rater's means per target (`ratings.py`), who agrees with
the reference (the people, or the simulated seeker) with the verdict as a plain function
(`agreement.py` `agrees_with_people`), the report's section and the check of a judge against the people
who were helped (`section.py`).

Layer: above seekers (it reads people's dialogues with their reader, seekers/esconv.py) and trust, under
ranking; the models it needs are run by the caller (the check's `run`: sim/launch/seeker_check.py)."""
from esc_eval.analysis.seekerview.agreement import AGREES, DISAGREES, UNCLEAR, agrees_with_people, bootstrap_spearman
from esc_eval.analysis.seekerview.ratings import (PEOPLE, QUESTIONS, agreement_rows, load_seeker_ratings, rating_summary,
                                                  reference_rater, wide)
from esc_eval.analysis.seekerview.section import (seeker_check_of_people, seeker_view, seeker_view_markdown,
                                                  seeker_view_section, write_seeker_view)

__all__ = ["AGREES", "DISAGREES", "PEOPLE", "QUESTIONS", "UNCLEAR", "agreement_rows", "agrees_with_people",
           "bootstrap_spearman", "load_seeker_ratings", "rating_summary", "reference_rater", "seeker_check_of_people",
           "seeker_view", "seeker_view_markdown", "seeker_view_section", "wide", "write_seeker_view"]
