"""judging.one_call: beyond the paper, one judge call per dialogue answering every dimension at once as a
JSON object (JudgeConfig.rubric_mode 'one_call'), against the paper's one call per dimension. The
prompt and its schema (prompts.py; the frame in sim/data/prompts/rubric_one_call.yaml, the rubric
texts the per-dimension prompts use), reading the answer and each dimension's digit probabilities
(answer.py), and the call's plan on a backend and its rows (calls.py). The scoring job calls it from
sim/jobs/scoring.py `score_dialogue`; its rows are another judge's (the judge id ends in ':one_call').

Layer: inside judging; imports serve's seam and judging's prompts, rubrics and plans."""
from esc_eval.sim.judging.one_call.answer import digit_probs, parse_object, read_rubric_answer
from esc_eval.sim.judging.one_call.calls import ONE_CALL, answer_cap, plan_one_call, score_one_call, typical_answer
from esc_eval.sim.judging.one_call.prompts import answer_layout, one_call_messages, rubric_schema

__all__ = ["ONE_CALL", "answer_cap", "answer_layout", "digit_probs", "one_call_messages", "parse_object", "plan_one_call",
           "read_rubric_answer", "rubric_schema", "score_one_call", "typical_answer"]
