"""What the batches answered, by request key, and the judge model that reads it.

The scoring job's own code makes the score rows (sim/jobs/scoring.py `ScoringJob.run`, prompts,
windowing, parsing and all): its judge is a `ReplayJudge`, a ChatModel that answers each call from
the batches' results instead of sending it. A call it cannot answer yet is recorded as a request
for the next batch and raises `NotAnsweredYet`, which the judging code takes as a call not made
(no row: the dimension waits, as for the spend cap); a prompt a batch refused as too long for the
judge's context raises ContextOverflowError, so the dialogue is windowed and that request is the
next one; a request that failed `max_attempts` times (fallback 'batch'), or with an error no retry
mends, raises its error, which becomes the row's error (data, never a score).
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any

from esc_eval.serve.calls.cache import cache_key, cacheable
from esc_eval.serve.calls.limits import BudgetExceededError
from esc_eval.serve.chat.interface import (ChatMessage, ChatModel, ChatModelError, ChatResult, ContextOverflowError,
                                           GenerationParams, as_messages)


# The dialogue whose calls are being replayed (set per item by the replay pass: one task each).
CURRENT_DIALOGUE: contextvars.ContextVar[str] = contextvars.ContextVar("esc_eval_batch_dialogue", default="")


class NotAnsweredYet(BudgetExceededError):
    """No batch has answered this call yet (or it goes online later): the call is not made now and
    its dimension gets no row in this pass. A BudgetExceededError so the judging code skips it as a
    call that was not made (sim/judging/judge_plan.py `ask_judge`), never a failed one."""


@dataclass
class Outcome:
    """A request's answers and failures over the run folder's batches."""

    result: ChatResult | None = None
    overflow: str | None = None  # the judge's context refused the prompt (no batch will take it)
    errors: list[tuple[str, ChatModelError]] = field(default_factory=list)  # (session, error), oldest first


class AnswerIndex:
    """Outcomes by request key, from the results of every ended batch of the folder."""

    def __init__(self) -> None:
        self.outcomes: dict[str, Outcome] = {}

    def add(self, key: str, session: str, result: ChatResult | None, error: ChatModelError | None) -> None:
        o = self.outcomes.setdefault(key, Outcome())
        if result is not None:
            o.result = result
        elif isinstance(error, ContextOverflowError):
            o.overflow = str(error)
        elif error is not None:
            o.errors.append((session, error))

    def get(self, key: str) -> Outcome | None:
        return self.outcomes.get(key)


@dataclass
class Need:
    """A request a batch must carry: what the judge would have been sent, and where its row goes."""

    judge: str
    dialogue_id: str
    messages: list[ChatMessage]
    params: GenerationParams
    adapter: str | None


@dataclass
class ReplayPolicy:
    """What a replayed call does with a request's failures (see the module docstring)."""

    session: str  # this command's session: only its failures count towards max_attempts
    fallback: str  # batch | online
    max_attempts: int


class ReplayJudge(ChatModel):
    """One judge of the scoring job, answered from the batches (see the module docstring)."""

    def __init__(self, judge: str, identity: dict[str, Any], index: AnswerIndex, in_flight: set[str],
                 policy: ReplayPolicy, needs: dict[str, Need], deferred: set[str], default_params: GenerationParams):
        self.name = f"batch:{judge}"
        self.judge, self.identity, self.index, self.in_flight = judge, identity, index, in_flight
        self.policy, self.needs, self.deferred = policy, needs, deferred
        self.default_params = default_params

    def _key(self, messages, params: GenerationParams, adapter: str | None) -> str:
        """The request's key: the same request is asked once (its answer is determined by it), unless
        it samples without a seed: then each dialogue's is its own."""
        identity = self.identity if cacheable(params) else {**self.identity, "dialogue": CURRENT_DIALOGUE.get()}
        return cache_key(identity, messages, params, adapter)

    async def chat(self, messages, params: GenerationParams | None = None, *, adapter: str | None = None,
                   session_id: str | None = None) -> ChatResult:
        params = params or self.default_params
        key = self._key(messages, params, adapter)
        o = self.index.get(key)
        if o is not None and o.result is not None:
            return o.result
        if o is not None and o.overflow is not None:
            raise ContextOverflowError(o.overflow)
        if key in self.in_flight:
            raise NotAnsweredYet(f"request {key[:12]} is in a batch in flight")
        failures = [e for s, e in (o.errors if o is not None else []) if s == self.policy.session]
        if failures:
            last = failures[-1]
            if self.policy.fallback == "online":
                self.deferred.add(key)
                raise NotAnsweredYet(f"request {key[:12]} failed in a batch; it goes online")
            if last.kind == "fatal" or len(failures) >= self.policy.max_attempts:
                raise type(last)(f"{last} (in {len(failures)} batch{'es' if len(failures) > 1 else ''})",
                                 kind=last.kind)
        self.needs.setdefault(key, Need(self.judge, CURRENT_DIALOGUE.get(), as_messages(messages), params, adapter))
        raise NotAnsweredYet(f"request {key[:12]} waits for a batch")
