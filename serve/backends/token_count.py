"""A model's prompt tokens before any call (the dry run's count), without starting an engine.

Where the model is local (`vllm/<folder>`, `vllm/embedded`: its weights folder holds the tokenizer),
with its own tokenizer and chat template exactly as the in-process engine renders and encodes a
prompt (serve/backends/vllm_engine.py `render_chat`, then encode without special tokens): the count
the run's rows will carry. Otherwise (API models, Serve deployments, a hub id not on this disk:
nothing is downloaded) estimated as the spend cap estimates a prompt (serve/calls/limits.py:
UTF-8 bytes / 4 per message plus the chat format's few tokens), and said so.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from esc_eval.serve.calls.limits import estimate_prompt_tokens
from esc_eval.serve.chat.interface import ChatMessage, parse_spec

ESTIMATED = "estimated: UTF-8 bytes / 4 per message plus 4, and 3 for the chat format (no tokenizer here)"


@dataclass(frozen=True)
class TokenCounter:
    """Counts one model's tokens: `exact` with its own tokenizer (`how` names it), else estimated."""

    exact: bool
    how: str
    tokenizer: Any = None
    render: tuple[tuple[str, Any], ...] = ()  # render_chat's keyword arguments

    def prompts(self, conversations: Sequence[Sequence[ChatMessage]]) -> list[int]:
        """Each conversation's prompt tokens as the model's engine would count them."""
        if not self.exact:
            return [estimate_prompt_tokens(list(c)) for c in conversations]
        from esc_eval.serve.backends.vllm_engine import render_chat

        texts = [render_chat(self.tokenizer, list(c), **dict(self.render)) for c in conversations]
        return [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []

    def text(self, text: str) -> int:
        """A text's tokens (an answer as the model writes it)."""
        if not self.exact:
            return max(1, len(text.encode("utf-8")) // 4)
        return len(self.tokenizer.encode(text, add_special_tokens=False))


def _local_folder(name: str) -> Path | None:
    """The local weights folder of a vLLM model name (the embedded model, or a path holding a tokenizer)."""
    if name == "embedded":
        from esc_eval.serve.engines.embedded import embedded_model_path

        return embedded_model_path()
    path = Path(name).expanduser()
    if path.is_dir() and any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        return path
    return None


@lru_cache(maxsize=16)
def _counter(spec: str, options_json: str) -> TokenCounter:
    backend, name = parse_spec(spec)
    options = json.loads(options_json)
    folder = _local_folder(name) if backend == "vllm" else None
    if folder is None:
        return TokenCounter(False, ESTIMATED)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=bool(options.get("trust_remote_code")))
    template = options.get("chat_template")
    render = {"chat_template": Path(template).read_text(encoding="utf-8") if template else None,
              "supports_system": options.get("supports_system", True),
              "system_fallback": options.get("system_fallback", "merge")}
    return TokenCounter(True, f"exact: {Path(folder).name}'s own tokenizer and chat template, as the engine counts",
                        tokenizer, tuple(sorted(render.items())))


def token_counter(spec: str, **options: Any) -> TokenCounter:
    """The counter of the model `spec` with its options (a registry entry's implied ones included)."""
    keep = {k: options[k] for k in ("chat_template", "supports_system", "system_fallback", "trust_remote_code")
            if k in options}
    return _counter(spec, json.dumps(keep, sort_keys=True, default=str))
