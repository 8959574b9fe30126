"""Helpers for the training tests: a tiny random Llama and a BPE tokenizer built on the fly with
a ChatML chat template, synthetic official dialogue files, and the shared sample data path."""
from __future__ import annotations

import json
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SHARED_DATA = SHARED / "data"

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "Hello, I'm your personal assistant. You can confide in me about any worries or concerns you may have!",
    "I have been feeling really stressed about my exams and my parents.",
    "Age: not mentioned Gender: female Occupation: student Problem: exam stress",
    "I hope you can role-play as a person with worries and communicate with an AI assistant.",
    "Based on the rules, give your score (The number only) to the Dialogue. 0 1 2 3 4",
    "That sounds hard. What happened? Thank you, that helps a lot.",
    "user assistant system seeker supporter dialogue empathy fluency",
]


def make_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 3, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.chat_template = CHATML
    return fast


def make_tiny_llama_dir(path: Path, tokenizer) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path



def write_official_dialogues(path: Path, dialogues: dict[str, list[str]]) -> Path:
    path.write_text(json.dumps(dialogues, ensure_ascii=False), encoding="utf-8")
    return path
