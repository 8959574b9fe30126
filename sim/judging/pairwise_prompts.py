"""Pairwise judging's prompts and answers (beyond the paper): the messages asking a judge which of
two dialogues' AI assistants did better on one dimension (sim/data/prompts/pairwise.yaml, en and
zh), and reading the answer into a verdict by position: first | second | tie.

The answer is one label: "1" (Dialogue 1, shown first), "2" (Dialogue 2) or "0" (a tie). With the
logprob method the answer is constrained to the three labels and their log-probabilities read at
the answer position give P(first, second, tie), as scoring reads P(0..4) (judge_plan.py); with
generate the free answer is parsed strictly. An answer that is none of them is a parse failure
(a null verdict), never a tie.
"""
from __future__ import annotations

import math
import re
from typing import Any, Sequence

from esc_eval.serve.chat.interface import ChatMessage, ChatResult, GenerationParams
from esc_eval.sim.judging.dimensions import to_paper_dimension
from esc_eval.sim.judging.judge_plan import TOP_LOGPROBS_ANSWER_TOKENS, JudgePlan
from esc_eval.sim.judging.prompts import Rendering, render_dialogue
from esc_eval.sim.prompt_files import load_prompt_file

VERDICTS = ("first", "second", "tie")  # the order of `probs`: P(first, second, tie)
VERDICT_LABELS = {"first": "1", "second": "2", "tie": "0"}  # as pairwise.yaml `labels` says them
LABEL_VERDICT = {label: verdict for verdict, label in VERDICT_LABELS.items()}
PAIR_LABELS = ("0", "1", "2")  # the constrained answer's choices
_STRICT = re.compile(r"^\s*([012])\s*[.。!！,，;；)）\]]?\s*$")  # as score_parser's strict rule, labels 0-2


def _lang(language: str) -> str:
    return "zh" if language == "zh" else "en"


def pairwise_messages(dimension: str, first: Sequence[tuple[str, str]], second: Sequence[tuple[str, str]],
                      language: str, rendering: Rendering = "official",
                      system_prompt: str | None = None) -> list[ChatMessage]:
    """The messages asking which AI assistant did better on `dimension`: `first` is shown as
    Dialogue 1 (对话1), `second` as Dialogue 2 (对话2); turns are (speaker, text) as the scoring
    judge reads them (prompts.render_dialogue). system_prompt replaces the file's system message
    (a registry judge's own, e.g. InternLM2's meta instruction)."""
    data, lang = load_prompt_file("pairwise"), _lang(language)
    dim = data["dimensions"][to_paper_dimension(dimension)]
    ask = dim["ask"][lang]
    frame = data["frame"][lang].replace("{focus}", dim["focus"][lang]).replace("{ask}", ask)
    shown = [data["header"][lang].replace("{n}", str(n)) + "\n" + render_dialogue(turns, rendering).strip()
             for n, turns in ((1, first), (2, second))]
    body = frame + "\n" + shown[0] + "\n\n" + shown[1] + "\n" + data["question"][lang].replace("{ask}", ask)
    return [ChatMessage(role="system", content=system_prompt or data["system"]), ChatMessage(role="user", content=body)]


def parse_verdict(text: str | None) -> str | None:
    """The verdict of a free answer, strictly: one label 1 | 2 | 0 with surrounding whitespace and
    trailing punctuation allowed ("1", " 2.", "0。"); anything else is None (a parse failure)."""
    m = _STRICT.match(text or "")
    return LABEL_VERDICT[m.group(1)] if m else None


def verdict_probs(top: dict[str, float]) -> list[float] | None:
    """P(first, second, tie) from the log-probabilities of the three label tokens, renormalised over
    them (score_parser.distribution does the same for 0-4; its labels are fixed to those five, and a
    server's top-k may hold "3" or "4" here, which must not count). A label missing from `top` is NaN:
    its probability is unknown, not 0. None when no label is there."""
    lp: dict[str, float] = {}
    for token, value in top.items():
        key = token.strip()
        if math.isnan(value) or value == math.inf:
            continue  # a broken backend's value carries no information
        if key in LABEL_VERDICT and (key not in lp or value > lp[key]):
            lp[key] = value
    if not lp or all(v == -math.inf for v in lp.values()):
        return None
    m = max(lp.values())
    weights = {k: math.exp(v - m) for k, v in lp.items()}
    total = sum(weights.values())
    return [weights[VERDICT_LABELS[v]] / total if VERDICT_LABELS[v] in lp else float("nan") for v in VERDICTS]


def pairwise_params(plan: JudgePlan, own: GenerationParams) -> GenerationParams:
    """The parameters of a pairwise call under the judge's plan (judge_plan.plan_judge): the plan's
    method with the three labels instead of 0-4; `own` (the judge model's params) for generate."""
    if plan.method == "generate" or plan.params is None:
        return own
    if plan.method == "logprob:top_logprobs":  # not constrained: a few tokens, read at the first label
        return GenerationParams(max_tokens=TOP_LOGPROBS_ANSWER_TOKENS, temperature=0.0, logprobs=plan.params.logprobs)
    top = len(PAIR_LABELS) if plan.method == "logprob" else plan.params.logprobs  # logit_bias: room above the labels
    return GenerationParams(max_tokens=1, temperature=0.0, choices=list(PAIR_LABELS), logprobs=top)


def read_verdict(result: ChatResult, plan: JudgePlan) -> dict[str, Any]:
    """Row fields of one answer: verdict (by position), probs (P(first, second, tie) where the plan
    reads log-probabilities), parse_status. The verdict is the most probable label; with no label
    among the log-probabilities the answer text is parsed instead."""
    if plan.reads_logprobs and result.top_logprobs:
        at = 0
        if plan.method == "logprob:top_logprobs":  # the first generated token that is a label
            at = next((i for i, tok in enumerate(result.tokens[:len(result.top_logprobs)])
                       if tok.strip() in LABEL_VERDICT), 0)
        probs = verdict_probs(result.top_logprobs[at]) if len(result.top_logprobs) > at else None
        if probs is not None:
            known = [(p, v) for p, v in zip(probs, VERDICTS) if not math.isnan(p)]
            return {"verdict": max(known, key=lambda pv: pv[0])[1], "probs": probs, "parse_status": "ok"}
    verdict = parse_verdict(result.text)
    return {"verdict": verdict, "probs": None, "parse_status": "ok" if verdict else "parse_failure"}


def preferred(verdict: str | None, order: str) -> str | None:
    """A verdict by position in the pair's canonical terms: in order "ab" dialogue a was shown
    first, in "ba" dialogue b was; a | b | tie, None for no verdict."""
    if verdict is None:
        return None
    if order not in ("ab", "ba"):
        raise ValueError(f"unknown order {order!r} (ab | ba)")
    if verdict == "tie":
        return "tie"
    first, second = ("a", "b") if order == "ab" else ("b", "a")
    return first if verdict == "first" else second
