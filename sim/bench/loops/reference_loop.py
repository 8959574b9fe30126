"""The official release's simulation loop (evaluate.py), kept as the benchmark's reference:
one dialogue at a time, sequential HF `generate` calls, greedy, max 512 new tokens, the same
prompts and role mapping as ours. Not used by the service itself.
"""
from __future__ import annotations

import time
from typing import Any

from esc_eval.serve.devices.cpu import DEFAULT_DTYPE
from esc_eval.sim.jobs.config import PAPER_ROUNDS
from esc_eval.sim.bench.loops.scoring import OFFICIAL_MAX_NEW_TOKENS
from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt, target_system_prompt


class HFReference:
    def __init__(self, model_path: str, max_new_tokens: int = OFFICIAL_MAX_NEW_TOKENS, threads: int | None = None,
                 dtype: str = DEFAULT_DTYPE):
        """dtype: 'auto' = the CPU's best (serve/devices/cpu.py), so a benchmark's two sides compute alike."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from esc_eval.serve.devices.cpu import resolve_dtype

        if threads:
            torch.set_num_threads(threads)
        self.torch = torch
        self.dtype = resolve_dtype(dtype, gpu=False)
        self.tok = AutoTokenizer.from_pretrained(model_path)
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, self.dtype)).eval()
        self.max_new_tokens = max_new_tokens

    def __call__(self, messages: list[dict[str, str]]) -> tuple[str, int, int]:
        text = self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = self.tok(text, return_tensors="pt", add_special_tokens=False).input_ids
        with self.torch.no_grad():
            out = self.model.generate(ids, max_new_tokens=self.max_new_tokens, do_sample=False,
                                      pad_token_id=self.tok.eos_token_id)
        new = out[0][ids.shape[-1]:]
        return self.tok.decode(new, skip_special_tokens=True), ids.shape[-1], int(new.shape[-1])

    def dialogue(self, card_text: str, language: str, rounds: int = PAPER_ROUNDS) -> dict[str, Any]:
        """evaluate.py's loop: the role model sees the assistant as user; the target the seeker."""
        started = time.perf_counter()
        role_msgs = [{"role": "system", "content": roleplay_system_prompt(card_text, language)},
                     {"role": "user", "content": opener(language)}]
        doc_msgs = [{"role": "system", "content": target_system_prompt(language)}]
        generated = prompt = 0
        for _ in range(rounds):
            res, p, n = self(role_msgs)
            generated, prompt = generated + n, prompt + p
            role_msgs.append({"role": "assistant", "content": res})
            doc_msgs.append({"role": "user", "content": res})
            res, p, n = self(doc_msgs)
            generated, prompt = generated + n, prompt + p
            role_msgs.append({"role": "user", "content": res})
            doc_msgs.append({"role": "assistant", "content": res})
        return {"seconds": time.perf_counter() - started, "generated_tokens": generated, "prompt_tokens": prompt,
                "messages": len(role_msgs) - 1}
