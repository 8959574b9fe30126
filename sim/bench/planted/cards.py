"""The cards of the planted runs: synthetic ones, as many as a run asks for, each with its own
problem (a planted seeker talks about it, and its card's effect is drawn from its text); and, for the
people scenario, cards of real help-seekers (ESConv's situations) whose own seeker turns are replayed.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from esc_eval.sim.cards.card import RoleCard, write_cards

_WHO = ["nurse", "teacher", "student", "driver", "accountant", "cook", "engineer", "cashier", "designer", "farmer"]
_WHAT = ["my manager keeps piling work on me", "my partner and I argue about money every week",
         "I failed an exam I studied months for", "my father is ill and lives far away",
         "I moved to a new city and know nobody", "my best friend stopped answering my messages",
         "I was passed over for a promotion again", "my landlord wants us out by next month",
         "I cannot sleep since the accident", "my sister blames me for our mother's debts"]
_HOW = ["and I cannot stop thinking about it", "and I feel I am failing everyone", "and I snap at people I love",
        "and I have stopped eating properly", "and I do not know who to talk to"]


def synthetic_cards(n: int) -> list[RoleCard]:
    """n English cards, each with a distinct problem (numbered, so no two share a text)."""
    out = []
    for i in range(n):
        a, b, c = _WHAT[i % len(_WHAT)], _HOW[(i // len(_WHAT)) % len(_HOW)], _WHO[(i * 7) % len(_WHO)]
        out.append(RoleCard(id=f"c{i:04d}", language="en", occupation=c, source="planted",
                            problem=f"Since week {i + 1} of this year {a}, {b}."))
    return out


def write_chunk_cards(cards: list[RoleCard], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_cards(cards, path)
    return path


@lru_cache(maxsize=2)
def _pool(source: str, rounds: int) -> tuple[dict[str, Any], ...]:
    return tuple(read_people(source, rounds))


def people_pool(source: str | Path, rounds: int = 5) -> list[dict[str, Any]]:
    """read_people's pool, read once per file."""
    return list(_pool(str(source), rounds))


def read_people(source: str | Path, rounds: int = 5) -> list[dict[str, Any]]:
    """The real help-seekers of an ESConv-format file with at least `rounds` seeker turns (runs of
    consecutive seeker messages, as the fidelity features read them): {id, problem, lines}, `lines`
    their first `rounds` seeker turns. The id is the one analysis reads the file with."""
    from esc_eval.sim.cardbuild.sources.readers import load_records, read_esconv
    from esc_eval.sim.judging.distress_turns import seeker_runs

    records, _ = load_records(Path(source))
    out = []
    for i, record in enumerate(records):
        try:
            item = read_esconv(record, Path(source), i)
        except (ValueError, AttributeError, TypeError):
            continue
        runs = seeker_runs([{"speaker": "seeker" if t.speaker == "seeker" else "assistant", "text": t.text}
                            for t in item.turns])
        problem = " ".join(str(record.get("situation") or "").split())
        if len(runs) >= rounds and len(problem.split()) >= 3:
            out.append({"id": item.id, "problem": problem, "lines": runs[:rounds]})
    return out


def split_people(pool: list[dict[str, Any]], seed: int) -> tuple[list[dict[str, Any]], list[str]]:
    """One replicate's halves: the people replayed as the seeker, and the ids of the other half (the
    people the fidelity analysis compares them with)."""
    order = np.random.default_rng([seed, 11]).permutation(len(pool))
    half = len(pool) // 2
    return [pool[i] for i in order[:half]], [pool[i]["id"] for i in order[half:]]


def people_cards(people: list[dict[str, Any]]) -> list[RoleCard]:
    return [RoleCard(id=f"p{i:04d}-{p['id'][:8]}", language="en", problem=p["problem"], source="people")
            for i, p in enumerate(people)]


def write_replay(people: list[dict[str, Any]], path: Path) -> Path:
    """The replay file a planted seeker reads: [{key, lines}], the key a text its system prompt holds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"key": p["problem"][:120], "lines": p["lines"]} for p in people], ensure_ascii=False),
                    encoding="utf-8")
    return path
