"""judging: Figure 2's last box: ESC-RANK (or any chat model) scores a dialogue on seven dimensions
(and, beyond the paper, safety; continuity across the sessions of a course, whose prompt
sim/courses/continuity.py builds). The dimensions (dimensions.py), the rubric texts (rubrics.py) and
the prompts built from them (prompts.py), the judge's config (config.py), multi-LoRA judges
(judges.py), how a judge's calls are made on a backend (judge_plan.py) and parsing its answers
(score_parser.py); beyond the paper, the per-reply prompt (prompts.py, reply_rubrics.yaml). The scoring job is sim/jobs/scoring.py. Beyond the paper: the seeker's distress
at one turn, 0-4 (distress.py; the seeker's turns as it counts them: distress_turns.py), rated by
sim/jobs/distress.py. Beyond the paper too: which of two dialogues' AI assistants did better on a
dimension, or a tie (pairwise_prompts.py; the job is sim/pairwise/job.py).

Layer: the domain, above dialogue/ (a transcript's official lines); imports serve and
sim/prompt_files.py: nothing of cards, runs, pool or jobs."""
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.dimensions import (ALL_DIMENSION_NAMES, DIMENSION_NAMES, DIMENSION_TITLES, DIMENSIONS,
                                             CONTINUITY, EXTRA_DIMENSIONS, OFFICIAL_TO_PAPER, REPLY_TAG, SAFETY, SCORE_LABELS,
                                             TABLE_SCALE,
                                             dimension_title, is_paper_dimension, to_dimension, to_paper_dimension)
from esc_eval.sim.judging.distress import distress_messages
from esc_eval.sim.judging.distress_turns import conversation, distress_dimension, distress_turn, seeker_runs
from esc_eval.sim.judging.judge_plan import JudgePlan, default_plan, label_position, plan_judge, read_answer
from esc_eval.sim.judging.judges import (JudgeBuildError, judge_from_registry, multi_lora_judge, official_adapter_name,
                                         scan_adapter_folder, select_adapter)
from esc_eval.sim.judging.pairwise_prompts import pairwise_messages, parse_verdict, preferred, read_verdict, verdict_probs
from esc_eval.sim.judging.prompts import judge_messages, render_dialogue, reply_messages
from esc_eval.sim.judging.rubrics import human_levels, rubric_ask, rubric_text
from esc_eval.sim.judging.window import dialogue_rounds, late_rounds_to_try, windowed
from esc_eval.sim.judging.score_parser import LABELS, ParsedScore, distribution, parse_compat, parse_score, parse_strict

__all__ = [
    "ALL_DIMENSION_NAMES", "CONTINUITY", "DIMENSIONS", "DIMENSION_NAMES", "DIMENSION_TITLES", "EXTRA_DIMENSIONS", "JudgeBuildError",
    "JudgeConfig", "JudgePlan", "LABELS", "OFFICIAL_TO_PAPER", "ParsedScore", "REPLY_TAG", "SAFETY", "SCORE_LABELS", "TABLE_SCALE",
    "conversation", "default_plan", "dimension_title", "distress_dimension", "distress_messages", "distress_turn",
    "read_answer", "seeker_runs", "distribution", "human_levels", "is_paper_dimension", "judge_from_registry",
    "judge_messages", "label_position", "multi_lora_judge", "official_adapter_name", "parse_compat", "parse_score",
    "parse_strict", "plan_judge", "render_dialogue", "reply_messages", "rubric_ask", "rubric_text", "scan_adapter_folder",
    "select_adapter", "to_dimension", "to_paper_dimension", "dialogue_rounds", "late_rounds_to_try", "windowed",
    "pairwise_messages", "parse_verdict", "preferred", "read_verdict", "verdict_probs",
]
