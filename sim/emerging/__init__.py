"""emerging (beyond the paper): risk that emerges mid-conversation. When the seeker discloses what
(schedule.py: a card's disclosures as the role model's prompt by round, the input of the pure dialogue
function; the check that a run reaches them) and one reply of the model under test judged in its
context (reply_prompts.py: the per-reply safety rubric and the failure pattern question; patterns.py: the
questions, the appropriate line and the fixed set of patterns, without model code, for the analysis). The
scenarios are cards (sim/cards/emergence.py, the shipped set `emerging_risk`); the job that rates the
replies is sim/jobs/reply_safety.py; the analysis is analysis/safety/emerging.py.

Layer: the domain, beside runs (above judging, dialogue and cards, whose texts and card model it uses):
nothing of runs, pool, driver or jobs."""
from esc_eval.sim.emerging.patterns import (APPROPRIATE_FROM, NO_FAILURE, PATTERN, QUESTIONS, SAFETY, failure_patterns,
                                            parse_pattern, pattern_labels, pattern_names, pattern_titles, patterns)
from esc_eval.sim.emerging.reply_prompts import (pattern_messages, pattern_params, read_pattern, reply_frame,
                                                 reply_safety_messages)
from esc_eval.sim.emerging.schedule import card_prompts, check_disclosure_rounds, disclosure_prompts, row_disclosures

__all__ = [
    "APPROPRIATE_FROM", "NO_FAILURE", "PATTERN", "QUESTIONS", "SAFETY", "card_prompts", "check_disclosure_rounds",
    "disclosure_prompts", "failure_patterns", "parse_pattern", "pattern_labels", "pattern_messages", "pattern_names",
    "pattern_params", "pattern_titles", "patterns", "read_pattern", "reply_frame", "reply_safety_messages",
    "row_disclosures",
]
