"""train.jobs: the training jobs: the ESC-Role job (role.py) and the ESC-RANK job with its Table 4
evaluation (rank.py, judge_eval.py), each one LoRA + DeepSpeed run on Ray Train (run.py drives it,
worker.py is the per-worker loop, deepspeed_config.py derives the DeepSpeed and Ray Train settings
and checks the resources), and what `esc-eval train role|rank` show while they run (terminal.py)."""
from esc_eval.train.jobs.deepspeed_config import (
    build_deepspeed_config, check_resources, global_batch_size, preflight, scaling_config_kwargs, torch_backend,
    total_steps,
)
from esc_eval.train.jobs.run import TrainRunResult, ray_session, run_training
from esc_eval.train.jobs.judge_eval import (
    JudgePrediction, accuracy_metrics, digit_probs, score_examples, strict_parse, table4_markdown, write_evaluation,
)
from esc_eval.train.jobs.role import PreparedData, prepare_role_data, run_role_job
from esc_eval.train.jobs.rank import RankData, evaluate_judges, prepare_rank_data, run_rank_job
from esc_eval.train.jobs.terminal import show_summary, train_rank_command, train_role_command

__all__ = ["show_summary", "train_rank_command", "train_role_command", 
    "JudgePrediction", "PreparedData", "RankData", "TrainRunResult", "accuracy_metrics", "build_deepspeed_config",
    "check_resources", "digit_probs", "evaluate_judges", "global_batch_size", "preflight", "prepare_rank_data",
    "prepare_role_data", "ray_session", "run_rank_job", "run_role_job", "run_training", "scaling_config_kwargs",
    "score_examples", "strict_parse", "table4_markdown", "torch_backend", "total_steps", "write_evaluation",
]
