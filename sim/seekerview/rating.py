"""One answer 1-5 to one of the person's-view questions, read like a judge's label (sim/judging/judge_plan.py),
on the labels '1'..'5': P(1..5) at the answer position where the backend gives log-probabilities (the
rating is the most likely label, `expected` the mean sum_k k x P(k)), else the answer parsed (one digit 1-5,
allowing whitespace and trailing punctuation; anything else is a parse failure, never a made-up value).

The method follows the model's backend as a judge's does (plan_judge with method logprob): structured
choices, a logit bias, top log-probabilities read at the first label the answer holds, or a free answer.
"""
from __future__ import annotations

import math
import re
from typing import Any

from esc_eval.serve.chat.interface import ChatResult, GenerationParams, backend_capabilities
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import resolve
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.judge_plan import TOP_LOGPROBS_ANSWER_TOKENS, JudgePlan, ask_judge, plan_judge

RATING_LABELS = ("1", "2", "3", "4", "5")
GENERATE_TOKENS = 8  # a free answer: one number, a little room for punctuation or a space before it
_ONE_DIGIT = re.compile(r"^\s*([1-5])\s*[.。!！,，;；)）\]]?\s*$")


def rating_plan(ref: ModelRef) -> JudgePlan:
    """How `ref`'s backend is asked (the judge's rule for method logprob, sim/judging/judge_plan.py)."""
    spec, implied = resolve(ref.model)
    return plan_judge(JudgeConfig(model=ref, method="logprob"), backend_capabilities(spec, **{**implied, **ref.options}))


def rating_params(plan: JudgePlan) -> GenerationParams:
    """The call's parameters under `plan`: one token constrained to '1'..'5' (structured choices or a logit
    bias), a few tokens with their top log-probabilities, or a short greedy free answer."""
    if plan.method in ("logprob", "logprob:logit_bias"):
        top = plan.params.logprobs if plan.params is not None and plan.params.logprobs else len(RATING_LABELS)
        return GenerationParams(max_tokens=1, temperature=0.0, choices=list(RATING_LABELS), logprobs=top)
    if plan.method == "logprob:top_logprobs":
        top = plan.params.logprobs if plan.params is not None and plan.params.logprobs else 20
        return GenerationParams(max_tokens=TOP_LOGPROBS_ANSWER_TOKENS, temperature=0.0, logprobs=top)
    return GenerationParams(max_tokens=GENERATE_TOKENS, temperature=0.0)


def parse_rating(text: str | None) -> int | None:
    m = _ONE_DIGIT.match(text or "")
    return int(m.group(1)) if m else None


def rating_distribution(top: dict[str, float]) -> list[float | None] | None:
    """P(1..5) renormalised over the labels found among the log-probabilities; None for a label the
    server did not return (its probability is unknown, not 0); None when no label is there."""
    lp: dict[str, float] = {}
    for token, value in top.items():
        key = token.strip()
        if key in RATING_LABELS and math.isfinite(value) and (key not in lp or value > lp[key]):
            lp[key] = value
    if not lp:
        return None
    m = max(lp.values())
    weights = {k: math.exp(v - m) for k, v in lp.items()}
    total = sum(weights.values())
    return [weights[k] / total if k in weights else None for k in RATING_LABELS]


def read_rating(result: ChatResult, plan: JudgePlan) -> dict[str, Any]:
    """The answer as row fields: rating, probs, expected, parse_status."""
    if plan.reads_logprobs and result.top_logprobs:
        at = 0
        if plan.method == "logprob:top_logprobs":  # the first generated token that is a label
            at = next((i for i, t in enumerate(result.tokens[:len(result.top_logprobs)]) if t.strip() in RATING_LABELS), 0)
        probs = rating_distribution(result.top_logprobs[at]) if len(result.top_logprobs) > at else None
        if probs is not None:
            best = max((p if p is not None else -1.0, i) for i, p in enumerate(probs))[1]
            full = all(p is not None for p in probs)
            expected = sum((i + 1) * p for i, p in enumerate(probs)) if full else None
            return {"rating": best + 1, "probs": [float("nan") if p is None else p for p in probs], "expected": expected,
                    "parse_status": "ok"}
    value = parse_rating(result.text)
    return {"rating": value, "expected": None if value is None else float(value),
            "parse_status": "ok" if value is not None else "parse_failure"}


async def ask_rating(model: Any, messages, plan: JudgePlan, row: dict[str, Any], adapter: str | None = None):
    """One call for one item, recorded into `row` (the judge's ask: the error as data, None when the
    spend cap refused the call, the run's failure raised)."""
    return await ask_judge(model, messages, rating_params(plan), plan, "strict", row, adapter=adapter,
                           read=lambda result: {**read_rating(result, plan), "completion_tokens": result.completion_tokens})
