"""One judge call per dialogue: how it is made on a backend (the plan) and its score rows.

The plan, from what the backend says it supports (serve.chat.interface.Capabilities):
  logprob               the answer constrained to the rubric's JSON schema and P(0..4) read at each
                        dimension's digit (in-process vLLM: exactly the digits' log-probabilities at
                        every position; OpenAI-compatible APIs: the top 20)
  logprob:top_logprobs  no schema the backend takes, but log-probabilities: the free answer parsed
                        as JSON, P(0..4) read where each digit was written
  generate              the configured method, or a backend without log-probabilities (Anthropic's
                        API: the schema through LiteLLM, no probabilities), with a note as the
                        per-dimension plan gives
One call's answer becomes one row per dimension, each with the call's raw answer, prompt and
completion tokens (the same on every row of the call: usage counts the call once) and
`rubric_mode` one_call. A failed call is an error row per dimension; a spend-cap refusal no row
(a resume asks again), as per dimension.
"""
from __future__ import annotations

from typing import Any, Sequence

from esc_eval.serve.chat.interface import Capabilities, GenerationParams
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.judge_plan import JudgePlan, ask_judge
from esc_eval.sim.judging.one_call.answer import read_rubric_answer
from esc_eval.sim.judging.one_call.prompts import answer_layout, one_call_messages, rubric_schema
from esc_eval.sim.judging.score_parser import LABELS
from esc_eval.sim.judging.window import ask_within_context, dialogue_rounds, windowed

ONE_CALL = "one_call"
# Answer cap: the layout's length, generously (a free answer may add words around the object).
ANSWER_TOKENS_PER_DIMENSION = 12
ANSWER_TOKENS_EXTRA = 32


def answer_cap(dimensions: Sequence[str]) -> int:
    return ANSWER_TOKENS_PER_DIMENSION * len(dimensions) + ANSWER_TOKENS_EXTRA


def plan_one_call(judge: JudgeConfig, caps: Capabilities) -> JudgePlan:
    """The one-call plan of a judge on a backend with capabilities `caps` (see the module docstring)."""
    top = min(caps.max_top_logprobs, 20)
    logprobs = judge.method == "logprob" and caps.logprobs and top >= 1
    params = GenerationParams(max_tokens=answer_cap(judge.dimensions), temperature=0.0,
                              json_schema=rubric_schema(judge.dimensions) if caps.json_schema else None,
                              logprobs=top if logprobs else None, logprob_labels=list(LABELS) if logprobs else None)
    if logprobs:
        return JudgePlan("logprob" if caps.json_schema else "logprob:top_logprobs", params)
    note = None
    if judge.method == "logprob":
        note = (f"judge {judge.model.model}: the backend returns no log-probabilities, so rubric_mode one_call with "
                f"method 'logprob' falls back to 'generate' (the JSON answer parsed"
                f"{', constrained to the schema' if caps.json_schema else ''})")
    return JudgePlan("generate", params, note)


def _params_for(plan: JudgePlan, dimensions: Sequence[str]) -> GenerationParams:
    """The plan's params for these dimensions (a resume may owe a dialogue only some of them)."""
    params = plan.params or GenerationParams()
    update: dict[str, Any] = {"max_tokens": answer_cap(dimensions)}
    if params.json_schema is not None:
        update["json_schema"] = rubric_schema(dimensions)
    return params.model_copy(update=update)


async def score_one_call(turns: list[tuple[str, str]], language: str, judge: JudgeConfig, model,
                         dimensions: Sequence[str], plan: JudgePlan) -> list[dict[str, Any]]:
    """Score one dialogue on `dimensions` in one call; partial score rows (no ids), one per dimension, [] when
    the spend cap refused the call. A prompt over the judge's context is windowed (sim/judging/window.py)."""
    dims = list(dimensions)
    params = _params_for(plan, dims)
    n_rounds = len(dialogue_rounds(turns)[1])

    async def ask(keep_late: int | None, raise_overflow: bool) -> dict[str, Any] | None:
        shown, left_out = (turns, 0) if keep_late is None else windowed(turns, keep_late, language)
        row: dict[str, Any] = {"score": None, "probs": None, "expected": None, "raw": None, "parse_status": "error",
                               "method": plan.method, "parser": judge.parser, "error": None, "prompt_tokens": None,
                               "completion_tokens": None, "latency_s": None, "adapter": judge.model.adapter,
                               "probs_status": None, "rounds_left_out": left_out, "rubric_mode": ONE_CALL}
        return await ask_judge(model, one_call_messages(dims, shown, language, judge), params, plan, judge.parser, row,
                               adapter=judge.model.adapter, raise_overflow=raise_overflow,
                               read=lambda r: {"completion_tokens": r.completion_tokens,
                                               "_dims": read_rubric_answer(r, dims, plan.reads_logprobs)})

    shared = await ask_within_context(n_rounds, ask)
    if shared is None:
        return []
    per = shared.pop("_dims", None)
    return [{**shared, "dimension": d, **(per[d] if per is not None else {})} for d in dims]


def typical_answer(dimensions: Sequence[str]) -> str:
    """An answer as the constrained judge writes it (json.dumps' layout, one digit per value)."""
    return answer_layout(dimensions, "0")
