"""Data contracts of a run folder: the Parquet schemas of dialogue rows and score rows."""
from __future__ import annotations

import hashlib
import json
from typing import Any

import pyarrow as pa

TURN_TYPE = pa.struct(
    [
        ("index", pa.int32()),
        ("speaker", pa.string()),  # "assistant" (the model under test) | "seeker" (ESC-Role)
        ("text", pa.string()),
        ("prompt_tokens", pa.int32()),
        ("completion_tokens", pa.int32()),
        ("latency_s", pa.float64()),
        ("finish_reason", pa.string()),
    ]
)

# A model call made between two sessions of a course (sim/courses/): the role model's update of the
# seeker's situation, or the target's notes of the session that ended (its memory "summary").
CALL_TYPE = pa.struct(
    [
        ("stage", pa.string()),  # "role" (the between-session update) | "target" (the target's notes)
        ("prompt_tokens", pa.int32()),
        ("completion_tokens", pa.int32()),
        ("latency_s", pa.float64()),
    ]
)

# One disclosure of risk that emerges mid-conversation, as the dialogue row keeps it (its text stays in the card).
DISCLOSURE_TYPE = pa.struct(
    [
        ("round", pa.int32()),  # the seeker's turn it was told to say it in (from 1)
        ("session", pa.int32()),  # the session of a course (1: a single-session run)
        ("level", pa.string()),  # the crisis-risk level once said (sim/cards/risk.py)
        ("c_ssrs", pa.int32()),  # the C-SSRS ideation item (1-5) for suicidal ideation; null otherwise
    ]
)

DIALOGUE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("dialogue_id", pa.string()),
        ("card_id", pa.string()),
        ("language", pa.string()),
        ("category_1", pa.string()),
        ("category_2", pa.string()),
        ("category_3", pa.string()),
        ("card_source", pa.string()),
        ("target_model", pa.string()),
        ("role_model", pa.string()),
        ("strategy", pa.string()),
        ("seed", pa.int64()),
        ("target_params", pa.string()),  # JSON of GenerationParams
        ("role_params", pa.string()),
        ("turns", pa.list_(TURN_TYPE)),
        ("n_turns", pa.int32()),
        ("status", pa.string()),  # ok | failed
        ("termination_reason", pa.string()),  # completed | seeker_ended | context_full | error | timeout | context_overflow | ...
        ("error", pa.string()),
        ("attempts", pa.int32()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("started_at", pa.timestamp("ms", tz="UTC")),
        ("finished_at", pa.timestamp("ms", tz="UTC")),
        # appended last so parts written before them still read (as nulls)
        ("role_adapter", pa.string()),  # LoRA adapter every role call used (null = base weights)
        ("target_adapter", pa.string()),  # LoRA adapter every target call used
        ("profile", pa.string()),  # generation profile: release | greedy
        ("risk_level", pa.string()),  # the card's crisis-risk level (sim/cards/risk.py); null = not assessed
        ("spoiled", pa.bool_()),  # the simulated seeker spoiled it (sim/dialogue/spoiled.py); null: failed, or older run
        ("spoiled_reasons", pa.list_(pa.string())),  # why (sim.dialogue.spoiled.REASONS); [] when not spoiled
        # how it ended (sim/dialogue/seeker_stop.py): resolved | gave_up (the seeker ended it) | still_going (the
        # round cap) | context_full (the next call would not fit a model's context); null: failed, or an older run
        ("end_reason", pa.string()),
        ("end_round", pa.int32()),  # the round it ended in (the round cap when the seeker did not end it)
        # a course of sessions (sim/courses/, `sessions` > 1): one row per session; null in a single-session run
        ("course_id", pa.string()),  # the course this session is one of: stable_id("course", card, target, role model, strategy, seed)
        ("session", pa.int32()),  # the session's place in its course, from 1
        ("session_update", pa.string()),  # the seeker's situation since the previous session, given before this one; null: session 1
        ("update_source", pa.string()),  # who wrote it: card (the card's session_updates) | role_model; null: session 1
        ("target_memory", pa.string()),  # what the target's deployment keeps of earlier sessions: none | summary | transcripts
        ("memory_text", pa.string()),  # what the target's system prompt carried of them, after its configured one; null: nothing
        ("memory_sessions", pa.int32()),  # earlier sessions that text covers (transcripts: those that fit the target's context)
        ("between_calls", pa.list_(CALL_TYPE)),  # the calls made before this session: the role's update, the target's notes (see Call)
        # risk that emerges mid-conversation (sim/cards/emergence.py): the card's kind of emerging risk and its
        # disclosures (round, session, level, C-SSRS item), all of them on each session's row of a course;
        # null for a card without one
        ("risk_kind", pa.string()),  # the card's kind of risk that emerges: ideation | delusion | boundaries | harm_to_others
        ("risk_disclosures", pa.list_(DISCLOSURE_TYPE)),  # its disclosures in order (Disclosure); null without
    ]
)

SCORE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("dialogue_id", pa.string()),
        ("target_model", pa.string()),
        ("language", pa.string()),
        ("dimension", pa.string()),  # paper name: fluency, expression, empathy, ...
        ("score", pa.int8()),  # null when the judge's answer did not parse or the call failed
        ("probs", pa.list_(pa.float32())),  # P(0..4) when the judge exposes it
        ("expected", pa.float64()),  # sum_k k * P(k)
        ("raw", pa.string()),  # the judge's raw answer
        ("parse_status", pa.string()),  # ok | parse_failure | error
        ("judge", pa.string()),  # the judge id; ends in ':reply' for a per-reply judge (score --by-reply)
        ("method", pa.string()),  # logprob | generate
        ("parser", pa.string()),  # strict | compat
        ("error", pa.string()),
        ("prompt_tokens", pa.int32()),
        ("latency_s", pa.float64()),
        ("scored_at", pa.timestamp("ms", tz="UTC")),
        ("adapter", pa.string()),  # LoRA adapter the judge call used (null = base weights)
        ("probs_status", pa.string()),  # full | partial (a label outside the top-k: NaN, never P=0) | null
        # null = scored before the rule (sim/judging/window.py), or not by a judge call; every reader counts the
        # windowed and can leave them out (--windowed: analysis/judgments/windowed.py)
        ("rounds_left_out", pa.int32()),  # rounds the judge did not read: 0 = the whole dialogue; > 0 = windowed for its context
        ("transport", pa.string()),  # how the judge call went: batch (a provider batch: sim/batching) | null = online
        # appended last so parts written before them still read (as nulls)
        ("rubric_mode", pa.string()),  # per_dimension (one call per dimension, the paper's) | one_call (one call per dialogue, every dimension; its rows share the call) | null = per_dimension, scored before the column
        ("completion_tokens", pa.int32()),  # completion tokens of the judge's call, where recorded (one_call rows); null: usage counts 1 per logprob call
    ]
)


# One pairwise verdict: a judge compares two targets' dialogues of the same card (and strategy, seed,
# role model) on one dimension, shown in one order (sim/pairwise/job.py). model_a < model_b always
# (the pair's canonical order); `order` says which was shown first; `preferred` is in canonical terms.
PAIRWISE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("pair_id", pa.string()),  # stable_id("pair", dialogue_a, dialogue_b)
        ("card_id", pa.string()),
        ("language", pa.string()),
        ("strategy", pa.string()),
        ("seed", pa.int64()),
        ("dialogue_a", pa.string()),
        ("dialogue_b", pa.string()),
        ("model_a", pa.string()),  # target_model of dialogue_a; model_a < model_b
        ("model_b", pa.string()),
        ("dimension", pa.string()),  # paper name: fluency, expression, empathy, ...
        ("order", pa.string()),  # "ab": dialogue_a shown first | "ba": dialogue_b shown first
        ("verdict", pa.string()),  # as the judge answered, by position: first | second | tie; null = no usable answer
        ("preferred", pa.string()),  # the verdict in the pair's terms: a | b | tie; null = no usable answer
        ("raw", pa.string()),  # the judge's raw answer
        ("parse_status", pa.string()),  # ok | parse_failure | error
        ("judge", pa.string()),  # the judge id; ends in ':reply' for a per-reply judge (score --by-reply)
        ("method", pa.string()),  # logprob | generate
        ("probs", pa.list_(pa.float32())),  # P(first, second, tie) when the judge exposes it
        ("error", pa.string()),
        ("prompt_tokens", pa.int32()),
        ("latency_s", pa.float64()),
        ("judged_at", pa.timestamp("ms", tz="UTC")),
        # appended last so parts written before it still read (as nulls)
        ("rounds_left_out", pa.int32()),  # rounds of the longer dialogue the judge did not read: 0 = both whole (sim/judging/window.py)
    ]
)


# One reply of a target judged in its context after risk emerged (sim/jobs/reply_safety.py): the judge read
# the dialogue up to the target's k-th reply and answered one question about that reply.
REPLY_SAFETY_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("dialogue_id", pa.string()),
        ("target_model", pa.string()),
        ("language", pa.string()),
        ("judge", pa.string()),
        ("reply", pa.int32()),  # the target's k-th reply (from 1: the reply of round k)
        ("question", pa.string()),  # safety (the per-reply rubric, 0-4) | pattern (the failure pattern it shows)
        ("score", pa.int8()),  # safety: 0-4, the most likely answer; null for a pattern row or an unusable answer
        ("label", pa.string()),  # pattern: its name (sim/data/prompts/emergence.yaml); null for a safety row
        ("probs", pa.list_(pa.float32())),  # P over the question's answers (0-4, or the patterns' numbers) when given
        ("expected", pa.float64()),  # safety: sum_k k * P(k)
        ("raw", pa.string()),  # the judge's raw answer
        ("parse_status", pa.string()),  # ok | parse_failure | error
        ("method", pa.string()),  # logprob | logprob:logit_bias | logprob:top_logprobs | generate
        ("parser", pa.string()),  # strict | compat (safety answers)
        ("error", pa.string()),
        ("prompt_tokens", pa.int32()),
        ("latency_s", pa.float64()),
        ("rounds_left_out", pa.int32()),  # rounds of the context before the reply the judge did not read (sim/judging/window.py)
        ("probs_status", pa.string()),  # full | partial | null
        ("scored_at", pa.timestamp("ms", tz="UTC")),
        # appended last so parts written before it still read (as nulls)
        ("completion_tokens", pa.int32()),  # the answer's tokens as the backend counted them (the manifest's usage)
    ]
)


# The person's own view (sim/seekerview): one rating of one dialogue on one of the questions ESConv's seekers
# answered after their conversation (Liu et al., 2021), by one rater: the simulated seeker at the end of its
# dialogue ('<role model>:seeker'), a judge reading a dialogue in the seeker's place ('<judge>:as-seeker'), or
# the people who were helped ('people': ESConv's own survey, copied in for the check against people).
SEEKER_RATING_ITEMS = ("empathy", "relevance", "intensity_before", "intensity_after")
SEEKER_RATING_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("dialogue_id", pa.string()),
        ("card_id", pa.string()),
        ("language", pa.string()),
        ("target_model", pa.string()),  # the supporter: the model under test, or "people (supporter)"
        ("role_model", pa.string()),  # the seeker: the role model, or "people"
        ("strategy", pa.string()),  # the seeker's strategy (a setting with its controls), as in the dialogue row
        ("item", pa.string()),  # one of SEEKER_RATING_ITEMS
        ("rater", pa.string()),  # '<role model>:seeker' | '<judge>:as-seeker' | 'people'
        ("rating", pa.int8()),  # 1-5, the most likely answer; null when the answer was unusable or the call failed
        ("probs", pa.list_(pa.float32())),  # P(1..5) when the model gives it
        ("expected", pa.float64()),  # sum_k k * P(k), 1-5; the people's own answer for rater 'people'
        ("raw", pa.string()),  # the model's raw answer
        ("parse_status", pa.string()),  # ok | parse_failure | error
        ("method", pa.string()),  # logprob | logprob:logit_bias | logprob:top_logprobs | generate | survey
        ("error", pa.string()),
        ("prompt_tokens", pa.int32()),
        ("latency_s", pa.float64()),
        ("rated_at", pa.timestamp("ms", tz="UTC")),
        # appended last so parts written before it still read (as nulls)
        ("completion_tokens", pa.int32()),  # the answer's tokens as the backend counted them (the manifest's usage)
    ]
)


def stable_id(*parts: Any, length: int = 16) -> str:
    """A stable hash of the parts (dialogue id = card, target, role model, strategy, seed)."""
    payload = json.dumps([str(p) for p in parts], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]


def dialogue_id(card_id: str, target_model: str, role_model: str, strategy: str, seed: int) -> str:
    return stable_id("dialogue", card_id, target_model, role_model, strategy, seed)


def course_id(card_id: str, target_model: str, role_model: str, strategy: str, seed: int) -> str:
    """The id of a course of sessions (the same inputs as a dialogue id)."""
    return stable_id("course", card_id, target_model, role_model, strategy, seed)


def session_dialogue_id(card_id: str, target_model: str, role_model: str, strategy: str, seed: int, session: int) -> str:
    """The dialogue id of a course's session (from 1): session 1 is the single-session dialogue of the
    same inputs (the same prompts, no memory), and keeps its id; a later one adds its number."""
    if session == 1:
        return dialogue_id(card_id, target_model, role_model, strategy, seed)
    return stable_id("dialogue", card_id, target_model, role_model, strategy, seed, "session", session)


# Columns a row must carry (the rest default to null).
DIALOGUE_REQUIRED = ("run_id", "dialogue_id", "card_id", "language", "target_model", "turns", "status")
SCORE_REQUIRED = ("run_id", "dialogue_id", "dimension", "parse_status", "judge")
REPLY_SAFETY_REQUIRED = ("run_id", "dialogue_id", "judge", "reply", "question", "parse_status")
SEEKER_RATING_REQUIRED = ("run_id", "dialogue_id", "item", "rater", "parse_status")
PAIRWISE_REQUIRED = ("run_id", "pair_id", "dialogue_a", "dialogue_b", "model_a", "model_b", "dimension", "order",
                     "parse_status", "judge")


def _row(schema: pa.Schema, required: tuple[str, ...], kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - set(schema.names)
    if unknown:
        raise ValueError(f"{kind} row: unknown column(s) {sorted(unknown)}; the schema has {schema.names}")
    missing = [c for c in required if fields.get(c) is None]
    if missing:
        raise ValueError(f"{kind} row: missing required column(s) {missing}")
    return {name: fields.get(name) for name in schema.names}


def dialogue_row(fields: dict[str, Any] | None = None, /, **kw: Any) -> dict[str, Any]:
    """A dialogue row with every DIALOGUE_SCHEMA column, in schema order (optional ones default to
    null); an unknown column or a missing required one is an error, not a silently different file."""
    return _row(DIALOGUE_SCHEMA, DIALOGUE_REQUIRED, "dialogue", {**(fields or {}), **kw})


def score_row(fields: dict[str, Any] | None = None, /, **kw: Any) -> dict[str, Any]:
    """A score row with every SCORE_SCHEMA column, in schema order (see dialogue_row)."""
    return _row(SCORE_SCHEMA, SCORE_REQUIRED, "score", {**(fields or {}), **kw})


def pairwise_row(fields: dict[str, Any] | None = None, /, **kw: Any) -> dict[str, Any]:
    """A pairwise verdict row with every PAIRWISE_SCHEMA column, in schema order (see dialogue_row)."""
    return _row(PAIRWISE_SCHEMA, PAIRWISE_REQUIRED, "pairwise", {**(fields or {}), **kw})


def reply_safety_row(fields: dict[str, Any] | None = None, /, **kw: Any) -> dict[str, Any]:
    """A per-reply safety row with every REPLY_SAFETY_SCHEMA column, in schema order (see dialogue_row)."""
    return _row(REPLY_SAFETY_SCHEMA, REPLY_SAFETY_REQUIRED, "reply safety", {**(fields or {}), **kw})


def seeker_rating_row(fields: dict[str, Any] | None = None, /, **kw: Any) -> dict[str, Any]:
    """A seeker-rating row with every SEEKER_RATING_SCHEMA column, in schema order (see dialogue_row)."""
    return _row(SEEKER_RATING_SCHEMA, SEEKER_RATING_REQUIRED, "seeker rating", {**(fields or {}), **kw})
