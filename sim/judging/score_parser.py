"""Parsing a judge's answer into a 0-4 score.

strict: the answer must be one score 0-4, allowing surrounding whitespace and trailing
  punctuation ("3", " 3.", "3。"); anything else is a parse failure (null score, raw text kept).
compat: the official score.py rule, for reproducing published numbers: the first of the labels
  "0".."4" (in that order) found anywhere in the reply — so "10" scores 0 and "3/4" scores 3;
  no digit at all is -1 in the release (a parse failure here).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

LABELS = ("0", "1", "2", "3", "4")
_STRICT = re.compile(r"^\s*([0-4])\s*[.。!！,，;；)）\]]?\s*$")


@dataclass(frozen=True)
class ParsedScore:
    score: int | None
    status: str  # ok | parse_failure


def parse_strict(text: str) -> ParsedScore:
    m = _STRICT.match(text or "")
    return ParsedScore(int(m.group(1)), "ok") if m else ParsedScore(None, "parse_failure")


def parse_compat(text: str) -> ParsedScore:
    for label in LABELS:
        if label in (text or ""):
            return ParsedScore(int(label), "ok")
    return ParsedScore(None, "parse_failure")


PARSERS = {"strict": parse_strict, "compat": parse_compat}


def parse_score(text: str, parser: str = "strict") -> ParsedScore:
    try:
        return PARSERS[parser](text)
    except KeyError:
        raise ValueError(f"unknown score parser {parser!r} (strict | compat)") from None


def distribution(top_logprobs: dict[str, float]) -> list[float] | None:
    """P(0..4) from the logprobs of the five label tokens, renormalised over them."""
    lp = {}
    for token, value in top_logprobs.items():
        key = token.strip()
        if not math.isfinite(value) and value != -math.inf:
            continue  # NaN / +inf from a broken backend: no information
        if key in LABELS and (key not in lp or value > lp[key]):
            lp[key] = value
    if not lp or all(v == -math.inf for v in lp.values()):
        return None
    m = max(lp.values())
    weights = [math.exp(lp[k] - m) if k in lp else 0.0 for k in LABELS]
    total = sum(weights)
    return [w / total for w in weights]
