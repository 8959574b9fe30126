"""Which dialogues a pairwise judge compares: the pairs plan, known before any call.

Two dialogues are comparable when they differ only in the target: the same card, language,
strategy, seed and role model (a "card group"). From a run's completed dialogues, grouped so, each
plan picks the pairs of targets present in a group:
- all          every pair of the targets present: n(n-1)/2 per group.
- round_robin  one round of the circle method per group: the targets (all of the run's, sorted;
               a "bye" added when their number is odd) sit in a circle whose first seat is fixed
               and the rest rotate one seat per round; seat i meets seat n-1-i. Group k (groups in
               sorted order) plays round k mod (n-1), so each target meets one other per group and
               over any n-1 consecutive groups every pair meets exactly once: equally often across
               cards (to within one when the number of groups is not a multiple of n-1). A pair whose
               other target has no dialogue in the group is skipped there.
- reference    every other target present against the reference model.
Each pair is judged on every dimension in both orders, so the judge calls are pairs x dimensions x 2.
A pair is in canonical order: model_a < model_b; pair_id = stable_id("pair", dialogue_a, dialogue_b).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Iterable

from esc_eval.sim.runs.records import stable_id

ORDERS = ("ab", "ba")  # each pair shown both ways: dialogue a first, then dialogue b first
GROUP_KEY = ("card_id", "language", "strategy", "seed", "role_model")


@dataclass(frozen=True)
class Pair:
    """Two dialogues of one card group, in canonical order (model_a < model_b)."""

    pair_id: str
    card_id: str
    language: str
    strategy: str | None
    seed: int | None
    role_model: str | None
    dialogue_a: str
    dialogue_b: str
    model_a: str
    model_b: str


@dataclass
class PairsPlan:
    """The pairs of a plan and what they cost before anything runs."""

    plan: str
    targets: list[str]
    groups: int  # card groups with two or more targets present
    cards: int  # distinct cards among them
    dimensions: int
    pairs: list[Pair] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.pairs) * self.dimensions * len(ORDERS)

    def summary(self) -> dict[str, Any]:
        return {"plan": self.plan, "targets": self.targets, "cards": self.cards, "card_groups": self.groups,
                "pairs": len(self.pairs), "dimensions": self.dimensions, "orders": len(ORDERS), "judge_calls": self.calls}


def card_groups(dialogues: Iterable[dict[str, Any]]) -> dict[tuple, dict[str, str]]:
    """Completed dialogues by card group: group key -> {target_model: dialogue_id} (a target with two
    dialogues in a group, which ids never make, keeps the smaller id: the same choice on every run)."""
    groups: dict[tuple, dict[str, str]] = {}
    for d in dialogues:
        if d.get("status") != "ok":
            continue
        by_target = groups.setdefault(tuple(d.get(k) for k in GROUP_KEY), {})
        t = d["target_model"]
        if t not in by_target or d["dialogue_id"] < by_target[t]:
            by_target[t] = d["dialogue_id"]
    return groups


def circle_round(targets: list[str], r: int) -> list[tuple[str, str]]:
    """Round r (mod n-1) of the circle method over `targets`: the pairs that meet, byes left out."""
    seats: list[str | None] = list(targets) + ([None] if len(targets) % 2 else [])
    n = len(seats)
    if n < 2:
        return []
    rest = seats[1:]
    k = r % (n - 1)
    line = [seats[0], *rest[len(rest) - k:], *rest[:len(rest) - k]]
    return [(line[i], line[n - 1 - i]) for i in range(n // 2) if line[i] is not None and line[n - 1 - i] is not None]


def _key_order(key: tuple) -> tuple:
    return tuple((v is None, str(v)) for v in key)  # None sorts last, mixed types never compared


def plan_pairs(dialogues: Iterable[dict[str, Any]], plan: str = "all", reference: str | None = None,
               dimensions: int = 7) -> PairsPlan:
    """The pairs of `plan` over a run's dialogues (rows with dialogue_id, target_model, status and the
    group columns). Bad input is one line (ValueError): an unknown plan, fewer than two targets, no
    card played by two of them, a reference model that is not a target of the run."""
    if plan not in ("all", "round_robin", "reference"):
        raise ValueError(f"unknown pairs plan {plan!r} (all | round_robin | reference)")
    groups = card_groups(dialogues)
    targets = sorted({t for g in groups.values() for t in g})
    if len(targets) < 2:
        raise ValueError(f"pairwise judging needs completed dialogues of at least 2 targets; the run has "
                         f"{len(targets)}{': ' + targets[0] if targets else ''}")
    shared = {k: g for k, g in groups.items() if len(g) >= 2}
    if not shared:
        raise ValueError(f"no card was played by two targets (same card, language, strategy, seed and role model) "
                         f"among the run's {len(targets)} targets: nothing to compare")
    if plan == "reference":
        if reference not in targets:
            raise ValueError(f"reference model {reference!r} is not a target of the run; its targets: {', '.join(targets)}")
        if not any(reference in g for g in shared.values()):
            raise ValueError(f"no card was played by both the reference {reference!r} and another target")
    pairs: list[Pair] = []
    for k, key in enumerate(sorted(shared, key=_key_order)):
        present = shared[key]
        if plan == "all":
            met = list(combinations(sorted(present), 2))
        elif plan == "round_robin":
            met = [(x, y) for x, y in circle_round(targets, k) if x in present and y in present]
        else:
            met = [(reference, t) for t in sorted(present) if t != reference] if reference in present else []
        for x, y in met:
            a, b = sorted((x, y))
            card, language, strategy, seed, role = key
            pairs.append(Pair(stable_id("pair", present[a], present[b]), card, language, strategy, seed, role,
                              present[a], present[b], a, b))
    return PairsPlan(plan, targets, len(shared), len({k[0] for k in shared}), dimensions, pairs)
