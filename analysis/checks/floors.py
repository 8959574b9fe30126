"""How many cards a verdict needs, from its check's published run (`esc-eval bench validity`, the
JSON shipped as data/validity.json and shown in docs/guides/validity.md), and what an analysis prints
below that: a verdict from fewer cards than its check shows it needs says so, or is withheld.

Two sizes per check, in its unit (cards per target, unless the check says otherwise):
- valid_from: the smallest size from which its false-positive rate stays within its nominal level
  and its intervals cover at their nominal level (within Monte-Carlo error) at every larger size
  measured. Below it the verdict is withheld ("n/a") and its note says why: the flag would fire
  without an effect, or the interval would miss, more often than it says.
- power_from: the smallest size from which it finds the documented effect 80% of the time. Below
  it a verdict that finds nothing ("holds", "no") says it had too few to find that effect; a verdict
  that finds something stands (its false-positive rate holds).
A check whose run found it invalid at its largest size measured (so at no size does it hold at every
larger one) is printed with a note naming the failure;
a check never run prints as before (no note).
"""
from __future__ import annotations

import contextlib
import json
import os
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

PUBLISHED = Path(__file__).with_name("data") / "validity.json"
FLOORS_ENV = "ESC_EVAL_FLOORS"  # "off": no verdict gated by the shipped floors
NOT_SHOWN = "n/a"
_MEASURING: ContextVar[bool] = ContextVar("measuring", default=False)


@contextlib.contextmanager
def measuring():
    """Inside it, gate() passes every verdict as computed: the validity bench measures the statistic
    itself, not what the floors of an earlier run let through."""
    token = _MEASURING.set(True)
    try:
        yield
    finally:
        _MEASURING.reset(token)


@dataclass(frozen=True)
class Floor:
    """What a check's published run found (see the module doc)."""

    check: str
    unit: str
    effect: str
    smallest: int  # the smallest size measured
    valid_from: int | None
    power_from: int | None
    below: str  # what failed below valid_from ("" when it holds from the smallest size)
    failure: str  # what failed at every size ("" when valid somewhere)


def read_floors(data: dict[str, Any]) -> dict[str, Floor]:
    """The floors of a validity run's JSON (analysis/validity/bench.py writes it)."""
    out = {}
    for c in data.get("checks", []):
        sizes = [r["size"] for r in c.get("by_size", [])]
        if not sizes:
            continue
        out[c["id"]] = Floor(c["id"], c.get("unit", "cards per target"), c.get("effect_text", ""), min(sizes),
                             c.get("valid_from"), c.get("power_from"), c.get("below", ""), c.get("failure", ""))
    return out


@lru_cache(maxsize=1)
def shipped() -> dict[str, Floor]:
    """The shipped run's floors ({} when none is shipped)."""
    if not PUBLISHED.is_file():
        return {}
    return read_floors(json.loads(PUBLISHED.read_text(encoding="utf-8")))


def published() -> dict[str, Floor]:
    """The floors verdicts are gated by: the shipped run's, or none where FLOORS_ENV is "off" (the test
    suite's setting: its fixtures of a few cards test the analyses themselves; the gate's own tests
    give it their floors)."""
    return {} if os.environ.get(FLOORS_ENV, "").strip().lower() == "off" else shipped()


def floor_of(check_id: str) -> Floor | None:
    return published().get(check_id)


def gate(check_id: str, n: int, verdict: str, *, finds: bool, floors: dict[str, Floor] | None = None) -> tuple[str, str]:
    """The verdict to print from `n` (in the check's unit) and the note beside it ("" for none).
    finds: the verdict claims an effect ("degrades", "biased", a flag raised); False for "holds", "no"."""
    f = (floors if floors is not None else published()).get(check_id)
    if f is None or verdict == NOT_SHOWN or _MEASURING.get():
        return verdict, ""
    unit = f.unit.split(" per ")[0]
    if f.valid_from is None:
        # no size from which it holds at every larger one: the largest size measured fails
        return verdict, f"unreliable: its planted-truth check found {f.failure}, the largest size measured"
    if n < f.valid_from:
        why = f.below or (f"{f.smallest} {unit} were the fewest checked" if n < f.smallest else "")
        return NOT_SHOWN, f"withheld from {n} {unit}: its planted-truth check holds from {f.valid_from} {unit}" + (
            f" ({why})" if why else "")
    if not finds and (f.power_from is None or n < f.power_from):
        more = f"80% power from {f.power_from}" if f.power_from else "not 80% power at any size measured"
        return verdict, f"{n} {unit}: too few to find {f.effect or 'the documented effect'} ({more})"
    return verdict, ""


def gated(check_id: str, n: int, verdict: str, *, finds: bool) -> str:
    """`gate`'s verdict with its note in brackets, for one table cell."""
    shown, note = gate(check_id, n, verdict, finds=finds)
    return f"{shown} ({note})" if note else shown


def caveat(check_id: str, n: int, *, floors: dict[str, Floor] | None = None) -> str:
    """The note beside an interval printed whatever its size (Table 2's, a rank-set, alpha's): below the
    size its check holds from, that it is unchecked there; where the check failed at every size, that
    it is unreliable; "" otherwise."""
    shown, note = gate(check_id, n, "interval", finds=True, floors=floors)
    if shown != NOT_SHOWN:
        return note
    f = (floors if floors is not None else published())[check_id]
    unit = f.unit.split(" per ")[0]
    return f"unchecked at {n} {unit}: its planted-truth check holds from {f.valid_from} {unit}"
