"""train.data: the SFT datasets: dialogues from every source format (dialogue_sources.py), human
annotation tables (annotations.py) and their seeded splits (splits.py), role-play examples with loss
on the seeker's turns (roleplay_data.py), judge examples from annotations (judge_data.py), and the
chat tokenisation with per-turn loss masks they share (chat_tokens.py)."""
from esc_eval.train.data.chat_tokens import IGNORE_INDEX, TokenizedExample, tokenize_chat
from esc_eval.train.data.dialogue_sources import (
    SourceDialogue, load_dialogues, load_esconv_dialogues, load_official_dialogues, load_run_dialogues,
)
from esc_eval.train.data.annotations import Annotation, aggregate_annotations, load_annotations, load_official_scores, validate_rows
from esc_eval.train.data.splits import split_annotations, split_keys
from esc_eval.train.data.roleplay_data import RolePlayExample, build_roleplay_examples, roleplay_messages, tokenize_roleplay
from esc_eval.train.data.judge_data import JudgeExample, adapter_name, fit_judge_example, join_annotations, tokenize_judge

__all__ = [
    "Annotation", "IGNORE_INDEX", "JudgeExample", "RolePlayExample", "SourceDialogue", "TokenizedExample",
    "adapter_name", "aggregate_annotations", "build_roleplay_examples", "fit_judge_example", "join_annotations",
    "load_annotations", "load_dialogues", "load_esconv_dialogues", "load_official_dialogues", "load_official_scores",
    "load_run_dialogues", "roleplay_messages", "split_annotations", "split_keys", "tokenize_chat", "tokenize_judge",
    "tokenize_roleplay", "validate_rows",
]
