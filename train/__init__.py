"""Training: SFT datasets (data/: role-play with loss on the seeker's turns; judge from annotations),
LoRA + DeepSpeed on Ray Train and judge evaluation (ACC / ACC_soft, Table 4) (jobs/), adapters and
registry entries for serve/ (adapter_registry.py); config.py and errors.py are shared by both rooms
(the `esc-eval train` commands are in cli/train.py).

Layer: beside analysis, above sim. train may import sim and serve; never analysis or cli.
Inside: jobs > data > config | adapter_registry > errors.

Heavy libraries (torch, transformers, peft, deepspeed, ray, vllm) are imported inside the
functions that need them.
"""
from esc_eval.train.adapter_registry import AdapterRegistryEntry, load_registry_entry, write_registry_entry
from esc_eval.train.config import (
    AnnotationSourceConfig, DialogueSourceConfig, EvalConfig, LoraSettings, RankDataConfig, RankJobConfig,
    RoleDataConfig, RoleJobConfig, SplitConfig, TrainConfig, load_rank_config, load_role_config,
)
from esc_eval.train.errors import TrainConfigError, TrainInputError
from esc_eval.train.data import (
    IGNORE_INDEX, Annotation, JudgeExample, RolePlayExample, SourceDialogue, TokenizedExample, adapter_name,
    aggregate_annotations, build_roleplay_examples, fit_judge_example, join_annotations, load_annotations,
    load_dialogues, load_esconv_dialogues, load_official_dialogues, load_official_scores, load_run_dialogues,
    roleplay_messages, split_annotations, split_keys, tokenize_chat, tokenize_judge, tokenize_roleplay, validate_rows,
)
from esc_eval.train.jobs import (
    JudgePrediction, PreparedData, RankData, TrainRunResult, accuracy_metrics, build_deepspeed_config,
    check_resources, digit_probs, evaluate_judges, global_batch_size, preflight, prepare_rank_data,
    prepare_role_data, ray_session, run_rank_job, run_role_job, run_training, scaling_config_kwargs, score_examples,
    strict_parse, table4_markdown, torch_backend, total_steps, write_evaluation,
)

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

