"""One reply of the model under test, judged in its context (beyond the paper): the per-reply safety
rubric (0-4) and the failure pattern it shows (one of a fixed set), as the judge's chat messages, and
how a pattern answer is read (sim/data/prompts/emergence.yaml `reply_safety`, `patterns`).

The judge reads the conversation up to the reply (its context, rendered as the whole-dialogue judge
renders a dialogue: judging/prompts.py `render_dialogue`) and then the reply, and rates that reply
only, as a response to everything the user has said up to then. The same frame as the per-reply
judging of the seven dimensions (scores by round, `reads: reply`): a system message and one user
turn, the rubric, the context, the reply, the question; kept here, apart, so that either can change
its texts without the other (they could share `reply_frame` later).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from esc_eval.serve.chat.interface import ChatMessage, ChatResult, GenerationParams
from esc_eval.sim.emerging.patterns import PROMPTS, parse_pattern, pattern_labels, pattern_names
from esc_eval.sim.judging.prompts import Rendering, render_dialogue
from esc_eval.sim.prompt_files import load_prompt_file

TOP_ANSWER_TOKENS = 5  # a pattern answer read from top log-probabilities without constraint ("Option 3")


def _lang(language: str) -> str:
    return "zh" if language == "zh" else "en"


def reply_frame(context: Sequence[tuple[str, str]], reply: str, language: str, rendering: Rendering) -> str:
    """The conversation so far and the reply to rate, under their headers."""
    data, lang = load_prompt_file(PROMPTS)["reply_safety"], _lang(language)
    shown = render_dialogue(context, rendering).strip() if context else ""
    return f"{data['context_header'][lang]}\n{shown}\n\n{data['reply_header'][lang]}\n{reply.strip()}"


def reply_safety_messages(context: Sequence[tuple[str, str]], reply: str, language: str,
                          rendering: Rendering = "official") -> list[ChatMessage]:
    """The messages asking for the per-reply safety score (0-4) of `reply` after `context`."""
    data, lang = load_prompt_file(PROMPTS)["reply_safety"], _lang(language)
    body = (data["rubric"][lang].rstrip() + "\n\n" + reply_frame(context, reply, language, rendering) + "\n\n"
            + data["question"][lang])
    return [ChatMessage(role="system", content=data["system"]), ChatMessage(role="user", content=body)]


def pattern_messages(context: Sequence[tuple[str, str]], reply: str, language: str,
                     rendering: Rendering = "official") -> list[ChatMessage]:
    """The messages asking which failure pattern `reply` shows (its number; 0 = none)."""
    data, lang = load_prompt_file(PROMPTS), _lang(language)
    q = data["pattern_question"]
    options = "\n".join(f"{i}: {p[lang]}" for i, p in enumerate(data["patterns"]))
    body = (q["instruction"][lang] + "\n\n" + reply_frame(context, reply, language, rendering) + "\n\n" + options
            + "\n\n" + q["question"][lang])
    return [ChatMessage(role="system", content=data["reply_safety"]["system"]), ChatMessage(role="user", content=body)]


def pattern_params(method: str, top: int = 20) -> GenerationParams:
    """A pattern call's parameters under a judge plan's method: constrained to the labels with their
    log-probabilities (logprob, logprob:logit_bias), a few tokens read at the first label
    (logprob:top_logprobs), or None for the judge's own (generate: the answer parsed)."""
    labels = pattern_labels()
    if method in ("logprob", "logprob:logit_bias"):
        return GenerationParams(max_tokens=1, temperature=0.0, choices=labels, logprobs=min(top, 20))
    return GenerationParams(max_tokens=TOP_ANSWER_TOKENS, temperature=0.0, logprobs=min(top, 20))


def read_pattern(result: ChatResult, reads_logprobs: bool) -> dict[str, Any]:
    """A pattern answer as row fields (label, probs, parse_status): the most likely label among the
    log-probabilities at the first position holding one, else the answer parsed."""
    labels, names = pattern_labels(), pattern_names()
    if reads_logprobs:
        for top in result.top_logprobs:
            lp = {t.strip(): v for t, v in top.items() if t.strip() in labels and math.isfinite(v)}
            if lp:
                m = max(lp.values())
                weights = [math.exp(lp[lab] - m) if lab in lp else 0.0 for lab in labels]
                total = sum(weights)
                probs = [w / total for w in weights]
                best = max(range(len(labels)), key=probs.__getitem__)
                full = len(lp) == len(labels)
                return {"label": names[best], "parse_status": "ok", "probs_status": "full" if full else "partial",
                        "probs": probs if full else [p if lab in lp else float("nan") for lab, p in zip(labels, probs)]}
    name = parse_pattern(result.text)
    return {"label": name, "parse_status": "ok" if name else "parse_failure"}


__all__ = ["pattern_messages", "pattern_params", "read_pattern", "reply_frame", "reply_safety_messages"]
