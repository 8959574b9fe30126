"""Training: SFT datasets (role-play with loss on the seeker's turns; judge from annotations),
LoRA + DeepSpeed on Ray Train, judge evaluation (ACC / ACC_soft, Table 4), adapters and
registry entries for serve/ (the `esc-eval train` commands are in cli/train.py).

Layer: beside analysis, above sim. train may import sim and serve; never analysis or cli.

Heavy libraries (torch, transformers, peft, deepspeed, ray, vllm) are imported inside the
functions that need them.
"""
from esc_eval.train.adapter_registry import AdapterRegistryEntry, load_registry_entry, write_registry_entry
from esc_eval.train.annotations import Annotation, aggregate_annotations, load_annotations, load_official_scores, validate_rows
from esc_eval.train.chat_tokens import IGNORE_INDEX, TokenizedExample, tokenize_chat
from esc_eval.train.config import (
    AnnotationSourceConfig, DialogueSourceConfig, EvalConfig, LoraSettings, RankDataConfig, RankJobConfig,
    RoleDataConfig, RoleJobConfig, SplitConfig, TrainConfig, load_rank_config, load_role_config,
)
from esc_eval.train.deepspeed_config import (
    build_deepspeed_config, check_resources, global_batch_size, preflight, scaling_config_kwargs, torch_backend,
    total_steps,
)
from esc_eval.train.job import TrainRunResult, ray_session, run_training
from esc_eval.train.rank_job import RankData, evaluate_judges, prepare_rank_data, run_rank_job
from esc_eval.train.role_job import PreparedData, prepare_role_data, run_role_job
from esc_eval.train.dialogue_sources import (
    SourceDialogue, load_dialogues, load_esconv_dialogues, load_official_dialogues, load_run_dialogues,
)
from esc_eval.train.errors import TrainConfigError, TrainInputError
from esc_eval.train.judge_data import JudgeExample, adapter_name, fit_judge_example, join_annotations, tokenize_judge
from esc_eval.train.judge_eval import (
    JudgePrediction, accuracy_metrics, digit_probs, score_examples, strict_parse, table4_markdown, write_evaluation,
)
from esc_eval.train.roleplay_data import RolePlayExample, build_roleplay_examples, roleplay_messages, tokenize_roleplay
from esc_eval.train.splits import split_annotations, split_keys

__all__ = [
    "PreparedData", "RankData", "TrainRunResult", "evaluate_judges", "preflight", "prepare_rank_data",
    "prepare_role_data", "ray_session", "run_rank_job", "run_role_job", "run_training",
    "AdapterRegistryEntry", "Annotation", "AnnotationSourceConfig", "DialogueSourceConfig", "EvalConfig",
    "IGNORE_INDEX", "JudgeExample", "JudgePrediction", "LoraSettings", "RankDataConfig", "RankJobConfig",
    "RoleDataConfig", "RoleJobConfig", "RolePlayExample", "SourceDialogue", "SplitConfig", "TokenizedExample",
    "TrainConfig", "TrainConfigError", "TrainInputError", "accuracy_metrics", "adapter_name",
    "aggregate_annotations", "build_deepspeed_config", "fit_judge_example", "build_roleplay_examples", "check_resources", "digit_probs",
    "global_batch_size", "join_annotations", "load_annotations", "load_dialogues", "load_esconv_dialogues",
    "load_official_dialogues", "load_official_scores", "load_rank_config", "load_registry_entry",
    "load_role_config", "load_run_dialogues", "roleplay_messages", "scaling_config_kwargs", "score_examples",
    "split_annotations", "split_keys", "strict_parse", "table4_markdown", "tokenize_chat", "tokenize_judge",
    "tokenize_roleplay", "torch_backend", "total_steps", "validate_rows",
    "write_evaluation", "write_registry_entry",
]

