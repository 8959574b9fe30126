"""How a judge's calls are made on a given backend: the method its score rows record, and the
parameters of each call, from what the backend says it supports (`serve.chat.interface.Capabilities`).

The configured method `logprob` reads P('0'..'4') at the answer position. Backends differ in
how they get there:
  logprob               the answer is constrained to the labels by structured outputs or allowed
                        tokens (in-process vLLM, Ray Serve, a vLLM server with `api: vllm`)
  logprob:logit_bias    constrained by a +100 logit bias on the labels' token ids (OpenAI's API
                        for OpenAI models), the top 20 log-probabilities read
  logprob:top_logprobs  not constrained: a few tokens, read at the first label the answer holds
                        (any endpoint with top_logprobs but neither of the above)
  generate              a free answer parsed by the judge's parser: the configured method, or the
                        fallback (with a note in the log and the manifest) for a backend without
                        log-probabilities (e.g. Anthropic's API)
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from typing import Any, Callable

from esc_eval.serve.calls.limits import BudgetExceededError
from esc_eval.serve.chat.interface import (Capabilities, ChatMessage, ChatResult, ContextOverflowError, GenerationParams,
                                           RunStopError)
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.score_parser import LABELS, distribution, parse_score

# Tokens a top_logprobs-only answer may take before its label ("Score: 3" is four).
TOP_LOGPROBS_ANSWER_TOKENS = 5


@dataclass(frozen=True)
class JudgePlan:
    """What the judge's calls send and what their rows record."""

    method: str  # logprob | logprob:logit_bias | logprob:top_logprobs | generate
    params: GenerationParams | None = None  # None: the judge model's own params (generate)
    note: str | None = None  # why the configured method was not used as configured

    @property
    def reads_logprobs(self) -> bool:
        return self.method.startswith("logprob")


def constrained_params(top: int = len(LABELS)) -> GenerationParams:
    return GenerationParams(max_tokens=1, temperature=0.0, choices=list(LABELS), logprobs=top)


def default_plan(judge: JudgeConfig) -> JudgePlan:
    """The plan when the backend's capabilities are not known (a model object handed in directly):
    the configured method as it always ran."""
    if judge.method == "logprob":
        return JudgePlan("logprob", constrained_params())
    return JudgePlan("generate")


def plan_judge(judge: JudgeConfig, caps: Capabilities) -> JudgePlan:
    """The judge's plan on a backend with capabilities `caps` (see the module docstring)."""
    if judge.method == "generate":
        return JudgePlan("generate")
    top = min(caps.max_top_logprobs, 20)
    if caps.logprobs and top >= len(LABELS):
        if caps.choice == "structured":
            return JudgePlan("logprob", constrained_params())
        if caps.choice == "logit_bias":
            # a bias moves every label alike, so their renormalised probabilities are unchanged;
            # the top 20 leave room for whatever the server ranks above them
            return JudgePlan("logprob:logit_bias", constrained_params(top))
        return JudgePlan("logprob:top_logprobs", GenerationParams(
            max_tokens=TOP_LOGPROBS_ANSWER_TOKENS, temperature=0.0, logprobs=top))
    return JudgePlan("generate", note=(
        f"judge {judge.model.model}: the backend returns no log-probabilities (or fewer than {len(LABELS)} per "
        f"token), so method 'logprob' falls back to 'generate' (parser {judge.parser!r})"))


def label_position(tokens: list[str], n_positions: int) -> int:
    """The answer position to read P(0..4) at: the first generated token that is a label, else 0."""
    for i, tok in enumerate(tokens[:n_positions]):
        if tok.strip() in LABELS:
            return i
    return 0


def read_answer(result: ChatResult, plan: JudgePlan, parser: str) -> dict[str, Any]:
    """A 0-4 answer as row fields (score, probs, expected, parse_status, probs_status): P(0..4) where
    the plan reads log-probabilities, else (or with no label among them) the answer parsed by `parser`.
    Shared by every job that asks a judge for one label 0-4 (scoring, the seeker's distress)."""
    if not plan.reads_logprobs:
        parsed = parse_score(result.text, parser)
        return {"score": parsed.score, "parse_status": parsed.status}
    at = label_position(result.tokens, len(result.top_logprobs)) if plan.method == "logprob:top_logprobs" else 0
    top = result.top_logprobs[at] if len(result.top_logprobs) > at else None
    probs = distribution(top) if top else None
    if probs is None:
        # No label among the log-probabilities (or none returned): parse the answer instead.
        parsed = parse_score(result.text, "strict")
        return {"score": parsed.score, "parse_status": parsed.status}
    present = {t.strip() for t in top} & set(LABELS)
    best = max(range(len(probs)), key=probs.__getitem__)
    if len(present) == len(LABELS):
        return {"score": best, "probs": probs, "expected": sum(i * p for i, p in enumerate(probs)),
                "parse_status": "ok", "probs_status": "full"}
    # A label outside the server's top-k: its probability is unknown, not 0. The score is the best
    # label seen; the vector keeps NaN where a label is missing.
    probs = [p if lab in present else float("nan") for lab, p in zip(LABELS, probs)]
    return {"score": best, "probs": probs, "expected": None, "parse_status": "ok", "probs_status": "partial"}


async def ask_judge(model: Any, messages: list[ChatMessage], params: GenerationParams, plan: JudgePlan, parser: str,
                    row: dict[str, Any], adapter: str | None = None, raise_overflow: bool = False,
                    read: Callable[[Any], dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """One judge call for one label, recorded into `row`: the answer, its tokens and latency and
    read_answer's fields, or the error as data (never a score). None when the spend cap refused the
    call (no failure: a resume asks again); the run's failure (RunStopError: the judge's engine is
    gone) propagates, and so does a prompt over the judge's context with raise_overflow (the caller
    windows the dialogue: sim/judging/window.py). Shared by scoring (one call per dimension), the
    seeker's distress (per turn) and pairwise verdicts (`read`: how an answer becomes the row's
    fields; default read_answer's 0-4 label)."""
    started = time.perf_counter()
    try:
        result = await model.chat(messages, params, adapter=adapter)
    except BudgetExceededError:
        return None
    except RunStopError:
        raise
    except Exception as e:  # noqa: BLE001 - recorded as data
        if raise_overflow and isinstance(e, ContextOverflowError):
            raise
        row.update(error=f"{type(e).__name__}: {e}", latency_s=time.perf_counter() - started)
        return row
    row.update(raw=result.text, prompt_tokens=result.prompt_tokens, latency_s=result.latency_s)
    row.update(read(result) if read is not None else read_answer(result, plan, parser))
    return row
