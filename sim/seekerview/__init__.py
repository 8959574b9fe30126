"""seekerview: the person's own view (beyond the paper). At the end of a dialogue the simulated seeker
rates the support as ESConv's seekers rated theirs (empathy and relevance 1-5, its emotion intensity
before and after): the questions as messages, to the seeker in its role or to a judge reading a
dialogue in the seeker's place (`prompts.py`, the wording in sim/data/prompts/seeker_ratings.yaml),
one answer 1-5 read like a judge's label (`rating.py`), and the job that asks them on the pool into
the run folder's `seeker_ratings` rows, resumably (`job.py`).

Layer: under jobs (the simulation runs it after its dialogues; the check against people,
sim/launch/seeker_check.py, runs it on people's dialogues); above the driver, the pool and judging."""
from esc_eval.sim.seekerview.job import (KIND, PEOPLE, SeekerRatingJob, done_keys, rating_items, reader_rater,
                                         run_ratings, seeker_rater)
from esc_eval.sim.seekerview.prompts import question, reader_messages, seeker_messages
from esc_eval.sim.seekerview.rating import (RATING_LABELS, parse_rating, rating_distribution, rating_params, rating_plan,
                                            read_rating)

__all__ = ["KIND", "PEOPLE", "RATING_LABELS", "SeekerRatingJob", "done_keys", "parse_rating", "question",
           "rating_distribution", "rating_items", "rating_params", "rating_plan", "read_rating", "reader_messages",
           "reader_rater", "run_ratings", "seeker_messages", "seeker_rater"]
