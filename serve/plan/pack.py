"""Packing Serve deployments onto a node's GPUs by memory (pure; serve/plan/serve_mode.py uses it).

The rule, per phase of a run (the simulation's role and targets; then, separately, the judge):
1. A replica's need on each of its GPUs = weights / tensor_parallel_size + the engine overhead +
   KV cache for `min_tokens` (placement.min_kv_sequences x max_model_len).
2. Tensor-parallel replicas take whole GPUs on one node. Every other replica reserves a fraction of
   one GPU (a Ray placement-group bundle `{"GPU": f}`); its vLLM `gpu_memory_utilization` is f x
   placement.gpu_memory_utilization, so the replicas on a GPU never ask for more than the GPU's
   budget together, wherever Ray puts them. All replicas of a deployment have the same f.
3. Ray, not the plan, picks each replica's GPU: a fraction goes to the GPU it fits best (the least
   left over; Ray's NodeResourceInstanceSet::TryAllocate), a whole GPU to the first free one, the
   replicas in whatever order Serve starts them. So a packing counts as fitting only when Ray's
   best fit places every replica in the largest-first order and in `ORDERS` shuffled ones.
4. GPUs follow the work, before any KV cache grows: each deployment's `load` (its relative work:
   parameters x answer tokens x calls; the role answers every dialogue) over its GPUs (replicas x
   GPUs per replica) is its time; the replicas are chosen for the least time T of the slowest at
   which everything still fits (bisection on T: each deployment gets load / T GPUs, as few replicas
   as give it that, every replica the plan adds more than half a GPU, so two of one model never
   share a GPU, duplicating weights that would otherwise be KV cache). Configured replicas are kept.
5. The replicas the balance added keep their size; every other replica starts again from its
   minimum, then every replica gets the same number of KV tokens beyond that, as many as still fit
   (one alone on a GPU gets the whole GPU), and what is left goes to the slowest deployments first.
6. GPUs still idle get one more replica each of the slowest deployment, unless its replicas were
   configured.
What does not fit at step 1 is reported (`Packing.ok` False, with the GPUs the minimum needs).
"""
from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass, field

ORDERS = 32  # shuffled start orders a packing must survive besides largest-first
WHOLE = 0.95  # a replica needing more of a GPU than this takes the whole GPU
GRAIN = 1e-4  # Ray's resource granularity
COMBOS = 64  # replica counts tried together per step of the balance (deployments with several choices)


@dataclass
class Demand:
    """One deployment to place."""

    name: str
    fixed_gb: float  # on each GPU of a replica: weights / tensor_parallel_size + engine overhead
    kv_gb_per_token: float  # on each GPU of a replica
    min_tokens: int  # KV tokens a replica must hold at least
    tp: int = 1
    replicas: int = 1  # placed at once (min_replicas)
    fill: bool = True  # may get more replicas on idle GPUs (False: replicas as configured)
    load: float = 1.0  # relative work (step 4): GPUs follow it


@dataclass
class Packing:
    ok: bool
    replicas: dict[str, int] = field(default_factory=dict)
    fraction: dict[str, float] = field(default_factory=dict)  # GPU per replica on each of its GPUs (1.0: whole)
    tokens: dict[str, int] = field(default_factory=dict)  # KV tokens per replica
    layout: list[list[tuple[str, float]]] = field(default_factory=list)  # per GPU: (deployment, fraction)
    need_gpus: float = 0.0  # GPUs the replicas need at their minimum (when not ok: how far off)


class Packer:
    def __init__(self, demands: list[Demand], nodes: list[int], budget_gb: float):
        self.demands = {d.name: d for d in demands}
        self.nodes = nodes
        self.budget = budget_gb

    # -- one replica's share at a common token level t
    def cap(self, d: Demand) -> int:
        """KV tokens a replica holds on whole GPUs."""
        return max(int((self.budget - d.fixed_gb) / d.kv_gb_per_token), 0) if d.kv_gb_per_token else 10**9

    def tokens(self, d: Demand, t: int) -> int:
        return max(d.min_tokens, min(t, self.cap(d)))

    def fraction(self, d: Demand, t: int) -> float:
        if d.tp > 1:
            return 1.0
        f = (d.fixed_gb + self.tokens(d, t) * d.kv_gb_per_token) / self.budget
        return 1.0 if f > WHOLE else round(math.ceil(f / GRAIN - 1e-6) * GRAIN, 4)  # Ray's grain, never below the need

    def need(self, d: Demand) -> float:
        return d.tp if d.tp > 1 else (d.fixed_gb + d.min_tokens * d.kv_gb_per_token) / self.budget

    # -- Ray's placement, simulated
    def place(self, items: list[tuple[str, float, int]], rng: random.Random | None) -> list[list[tuple[str, float]]] | None:
        """Per GPU (node by node), what Ray's best fit gives it for replicas started in this order;
        None when one cannot be placed."""
        free = [[1.0] * n for n in self.nodes]
        held: list[list[list[tuple[str, float]]]] = [[[] for _ in range(n)] for n in self.nodes]
        for name, f, tp in items:
            if f >= 1.0:
                options = [k for k, node in enumerate(free) if sum(x >= 1.0 - 1e-9 for x in node) >= tp]
                if not options:
                    return None
                k = rng.choice(options) if rng else options[0]
                for g in [i for i, x in enumerate(free[k]) if x >= 1.0 - 1e-9][:tp]:
                    free[k][g] = 0.0
                    held[k][g].append((name, 1.0))
                continue
            fits = [(free[k][g] - f, k, g) for k in range(len(free)) for g in range(len(free[k])) if free[k][g] >= f - 1e-9]
            if not fits:
                return None
            if rng:  # Ray's scheduler picks the node; best fit within it
                k = rng.choice(sorted({k for _, k, _ in fits}))
                fits = [x for x in fits if x[1] == k]
            _, k, g = min(fits)
            free[k][g] -= f
            held[k][g].append((name, f))
        return [gpu for node in held for gpu in node]

    def fits(self, replicas: dict[str, int], t: int | dict[str, int]) -> list[list[tuple[str, float]]] | None:
        """The largest-first layout when every tried start order places every replica, else None.
        `t`: KV tokens of every replica beyond its minimum, or per deployment."""
        level = t if isinstance(t, dict) else {n: t for n in replicas}
        items = [(n, self.fraction(self.demands[n], level[n]), self.demands[n].tp)
                 for n, c in replicas.items() for _ in range(c)]
        items.sort(key=lambda x: (x[2], x[1]), reverse=True)
        layout = self.place(items, None)
        if layout is None:
            return None
        rng = random.Random(len(items))  # the same orders for every size tried: a search that only moves sizes
        for _ in range(ORDERS):
            shuffled = items[:]
            rng.shuffle(shuffled)
            if self.place(shuffled, rng) is None:
                return None
        return layout

    def most_tokens(self, replicas: dict[str, int], hi: int, level: dict[str, int] | None = None,
                    name: str | None = None) -> int | None:
        """The most KV tokens (at most `hi`) at which the replicas fit, for every deployment (or only
        `name`'s, the others at `level`); None if not even the lowest."""
        def ok(t: int) -> bool:
            return self.fits(replicas, {**level, name: t} if name and level else t) is not None

        lo = level[name] if name and level else 0
        if not ok(lo):
            return None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    # -- GPUs follow the work: replicas and shares chosen together, before any KV growth
    def share(self, d: Demand, n: int, t: int) -> float:
        """GPUs `n` replicas of `d` hold at KV level `t` (fractions included)."""
        return n * (d.tp if d.tp > 1 else self.fraction(d, t))

    def level_for(self, d: Demand, f: float) -> int:
        """The most KV tokens at which one replica needs at most `f` of a GPU (a whole GPU above WHOLE)."""
        if f > WHOLE or d.tp > 1:
            return self.cap(d)
        if not d.kv_gb_per_token:
            return d.min_tokens
        return max(d.min_tokens, min(int((f * self.budget - d.fixed_gb) / d.kv_gb_per_token), self.cap(d)))

    def half_level(self, d: Demand) -> int:
        """The fewest KV tokens at which a replica needs more than half a GPU: replicas the plan adds
        are that big, so Ray never puts two of one model on one GPU (weights twice, KV cache halved)."""
        if not d.kv_gb_per_token or d.tp > 1:
            return d.min_tokens
        return max(d.min_tokens, min(int((0.5 * self.budget - d.fixed_gb) / d.kv_gb_per_token) + 1, self.cap(d)))

    def options(self, d: Demand, s: float) -> list[tuple[int, int]]:
        """(replicas, KV level) that give `d` a share of `s` GPUs, fewest replicas first; the largest
        share it can have when none does (configured replicas, a capped KV cache)."""
        gpus = sum(self.nodes)
        if d.tp > 1:
            n = max(d.replicas, math.ceil(s / d.tp - 1e-9)) if d.fill else d.replicas
            return [(min(n, max(gpus // d.tp, d.replicas)), self.cap(d))]
        if not d.fill:
            return [(d.replicas, self.level_for(d, s / d.replicas))]
        out = []
        for n in range(min(max(d.replicas, math.ceil(s - 1e-9)), max(gpus, d.replicas)), max(gpus, d.replicas) + 1):
            t = self.level_for(d, s / n)
            if n > d.replicas:
                t = max(t, self.half_level(d))
            out.append((n, t))
            if s / (n + 1) <= 0.5:
                break
        return out or [(d.replicas, self.cap(d))]

    def at_time(self, load: dict[str, float], T: float) -> tuple[dict[str, int], dict[str, int]] | None:
        """Replicas and KV levels at which every deployment's work over its share is at most `T` (or
        the most it can have) and everything fits; None when no tried combination fits."""
        choices = [self.options(d, load[n] / T) for n, d in self.demands.items()]
        for k, combo in enumerate(itertools.product(*choices)):
            if k >= COMBOS:
                return None
            replicas = {n: c[0] for n, c in zip(self.demands, combo)}
            level = {n: c[1] for n, c in zip(self.demands, combo)}
            if self.fits(replicas, level) is not None:
                return replicas, level
        return None

    def balance(self, replicas: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
        """The least time T (work over GPU share, the most of any deployment) at which everything
        fits: bisection between all GPUs' share of the work and everything at its minimum."""
        load = {n: max(d.load, 1e-12) for n, d in self.demands.items()}
        low = {n: 0 for n in self.demands}
        best = (replicas, low)
        hi = max(load[n] / self.share(d, replicas[n], 0) for n, d in self.demands.items())
        lo = sum(load.values()) / sum(self.nodes)
        while hi / lo > 1.002:
            mid = math.sqrt(lo * hi)
            found = self.at_time(load, mid)
            if found:
                best, hi = found, mid
            else:
                lo = mid
        return best

    def time(self, d: Demand, replicas: dict[str, int], level: dict[str, int]) -> float:
        return d.load / self.share(d, replicas[d.name], level[d.name])

    def grow(self, replicas: dict[str, int], level: dict[str, int]) -> dict[str, int]:
        """Room left over to KV cache: every replica the same tokens beyond its level, as many as fit;
        then what is still free to the busiest deployments (work over share) first."""
        def common(t: int) -> dict[str, int]:
            return {n: max(v, t) for n, v in level.items()}

        lo, hi = 0, max(self.cap(d) for d in self.demands.values())
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.fits(replicas, common(mid)) is not None else (lo, mid - 1)
        level = common(lo)
        for d in sorted(self.demands.values(), key=lambda d: self.time(d, replicas, level), reverse=True):
            level[d.name] = self.most_tokens(replicas, self.cap(d), level, d.name) or level[d.name]
        return level

    def pack(self) -> Packing:
        replicas = {n: d.replicas for n, d in self.demands.items()}
        need = sum(self.need(d) * d.replicas for d in self.demands.values())
        if self.fits(replicas, 0) is None:
            return Packing(False, replicas, need_gpus=need)
        replicas, balanced = self.balance(replicas)
        # the replicas the balance added keep their size (more than half a GPU, or a whole one); every
        # other replica starts again from its minimum, and the room left grows all KV caches alike
        level = {n: balanced[n] if replicas[n] > d.replicas else 0 for n, d in self.demands.items()}
        level = self.grow(replicas, level if self.fits(replicas, level) is not None else balanced)
        while True:  # GPUs still idle: one more replica of the busiest deployment that fits there
            idle = sum(1 for gpu in self.fits(replicas, level) or [] if not gpu)
            more = None
            for d in sorted((d for d in self.demands.values() if d.fill and d.tp <= idle),
                            key=lambda d: self.time(d, replicas, level), reverse=True):
                trial = {**replicas, d.name: replicas[d.name] + 1}
                t = {**level, d.name: max(level[d.name], self.half_level(d))}
                if self.fits(trial, t) is not None:
                    more = (trial, t)
                    break
            if more is None:
                break
            replicas, level = more[0], self.grow(*more)
        layout = self.fits(replicas, level) or []
        return Packing(True, replicas, {n: self.fraction(d, level[n]) for n, d in self.demands.items()},
                       {n: self.tokens(d, level[n]) for n, d in self.demands.items()}, layout, need)


def pack(demands: list[Demand], nodes: list[int], budget_gb: float) -> Packing:
    """Place `demands` on nodes of `nodes[i]` GPUs with `budget_gb` usable on each (see the module doc)."""
    return Packer(demands, nodes, budget_gb).pack()


def nodes_of(gpus: int, per_node: int | None) -> list[int]:
    """GPUs per node for `gpus` GPUs, `per_node` on each (the last node holding the rest)."""
    per = per_node or gpus
    full, rest = divmod(gpus, per)
    return [per] * full + ([rest] if rest else [])
