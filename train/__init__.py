"""Training: SFT datasets (data/: role-play with loss on the seeker's turns; judge from annotations),
LoRA + DeepSpeed on Ray Train and judge evaluation (ACC / ACC_soft, Table 4) (jobs/), adapters and
registry entries for serve/ (adapter_registry.py); config.py and errors.py are shared by both rooms
(the `esc-eval train` commands parse in cli/jobs/train.py and run train/jobs/terminal.py).

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
# Every name of the rooms, as when they were modules of this package.
from esc_eval.train import data, jobs
from esc_eval.train.data import *  # noqa: F403
from esc_eval.train.jobs import *  # noqa: F403

__all__ = [
    "AdapterRegistryEntry", "AnnotationSourceConfig", "DialogueSourceConfig", "EvalConfig", "LoraSettings",
    "RankDataConfig", "RankJobConfig", "RoleDataConfig", "RoleJobConfig", "SplitConfig", "TrainConfig",
    "TrainConfigError", "TrainInputError", "load_rank_config", "load_registry_entry", "load_role_config",
    "write_registry_entry",
    *data.__all__, *jobs.__all__,
]
