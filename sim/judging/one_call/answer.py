"""Reading a one-call answer: each dimension's score from the JSON object, and P(0..4) at the position
of its digit in the answer where the backend gave log-probabilities.

A dimension whose value is missing, not an integer 0-4, or an answer that is no JSON object at all,
is a parse failure of that row (null score, the raw answer kept): never a zero. The score is the
digit the judge wrote; its probabilities are read at that digit's token, among the alternatives the
backend reported there that differ from it only in the digit (' 3' and ' 2', '3' and '2'), and
renormalised over the five labels as the per-dimension method does (a label outside the reported
alternatives: NaN, `probs_status` partial).
"""
from __future__ import annotations

import json
import re
from typing import Any, Sequence

from esc_eval.serve.chat.interface import ChatResult
from esc_eval.sim.judging.score_parser import LABELS, distribution


def parse_object(text: str) -> dict[str, Any] | None:
    """The answer's JSON object: the whole text, else the span from its first '{' to its last '}'; None if neither parses."""
    for candidate in (text.strip(), text[text.find("{"): text.rfind("}") + 1] if "{" in text else ""):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _score(value: Any) -> int | None:
    """An integer 0-4 (or a one-digit string of one, as free answers write it); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and 0 <= value <= 4:
        return value
    if isinstance(value, str) and value.strip() in LABELS:
        return int(value.strip())
    return None


def _label_of(alternative: str, prefix: str, suffix: str) -> str | None:
    """The label an alternative token stands for at a digit's position: the token with its digit replaced
    (whitespace around it aside), else None."""
    for cand in (alternative, alternative.lstrip()):
        for pre in (prefix, prefix.lstrip()):
            if cand.startswith(pre):
                rest = cand[len(pre):]
                if rest[:1] in LABELS and rest[1:].strip() == suffix.strip():
                    return rest[:1]
    return None


def digit_probs(tokens: Sequence[str], top: Sequence[dict[str, float]], key: str) -> dict[str, Any] | None:
    """P(0..4) at the digit of `key`'s value in the answer whose tokens are `tokens`; None when the key's digit
    cannot be found among the tokens or no alternative there is a label."""
    text = "".join(tokens)
    m = re.search(re.escape(json.dumps(key)) + r'\s*:\s*"?([0-4])(?![0-9])', text)
    if m is None:
        return None
    at = m.start(1)
    start = 0
    for i, tok in enumerate(tokens):
        if start <= at < start + len(tok):
            if i >= len(top):
                return None
            j = at - start
            lps: dict[str, float] = {}
            for alt, lp in top[i].items():
                label = _label_of(alt, tok[:j], tok[j + 1:])
                if label is not None and lp > lps.get(label, float("-inf")):
                    lps[label] = lp
            probs = distribution(lps) if lps else None
            if probs is None:
                return None
            if len(lps) == len(LABELS):
                return {"probs": probs, "expected": sum(k * p for k, p in enumerate(probs)), "probs_status": "full"}
            return {"probs": [p if lab in lps else float("nan") for lab, p in zip(LABELS, probs)], "expected": None,
                    "probs_status": "partial"}
        start += len(tok)
    return None


def read_rubric_answer(result: ChatResult, dimensions: Sequence[str], reads_logprobs: bool) -> dict[str, dict[str, Any]]:
    """dimension -> its row fields (score, parse_status, probs, expected, probs_status) from one answer."""
    obj = parse_object(result.text or "")
    out: dict[str, dict[str, Any]] = {}
    for d in dimensions:
        score = _score(obj.get(d)) if obj is not None else None
        fields: dict[str, Any] = {"score": score, "parse_status": "ok" if score is not None else "parse_failure",
                                  "probs": None, "expected": None, "probs_status": None}
        if score is not None and reads_logprobs and result.tokens and result.top_logprobs:
            fields.update(digit_probs(result.tokens, result.top_logprobs, d) or {})
        out[d] = fields
    return out
