"""Packing Serve deployments onto a node's GPUs by memory (pure; serve/plan_serve.py uses it).

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
4. Every replica gets the same number of KV tokens beyond its minimum, as many as still fit (the
   fractions grow with it; one alone on a GPU gets the whole GPU); what is left over then goes to
   the busiest deployments first (step 5's order), each growing while everything still fits.
5. GPUs still idle get one more replica each of the busiest deployment (most work per replica: the
   role serves every dialogue, a target its own, the judge every score), unless its replicas were
   configured.
What does not fit at step 1 is reported (`Packing.ok` False, with the GPUs the minimum needs).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

ORDERS = 32  # shuffled start orders a packing must survive besides largest-first
WHOLE = 0.95  # a replica needing more of a GPU than this takes the whole GPU
GRAIN = 1e-4  # Ray's resource granularity


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
    load: float = 1.0  # relative work; idle GPUs go to the most load per replica


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

    def _batch(self, replicas: dict[str, int], idle: int) -> dict[str, int]:
        """The replicas after giving each idle GPU (tensor-parallel groups: several) to the busiest
        deployment in turn, each addition lowering its load per replica."""
        out = dict(replicas)
        while True:
            fillable = [d for d in self.demands.values() if d.fill and d.tp <= idle and out[d.name]]
            if not fillable:
                return out
            d = max(fillable, key=lambda d: d.load / out[d.name])
            out[d.name] += 1
            idle -= d.tp

    def pack(self) -> Packing:
        replicas = {n: d.replicas for n, d in self.demands.items()}
        need = sum(self.need(d) * d.replicas for d in self.demands.values())
        top = max((self.cap(d) for d in self.demands.values()), default=0)
        t = self.most_tokens(replicas, top)
        if t is None:
            return Packing(False, replicas, need_gpus=need)
        while True:  # idle GPUs: one more replica of the busiest deployment that fits
            layout = self.fits(replicas, t) or []
            idle = sum(1 for gpu in layout if not gpu)
            batch = self._batch(replicas, idle)
            if batch != replicas and self.fits(batch, t) is not None:
                replicas = batch  # every idle GPU filled at once, nothing else moved
                continue
            grown = False
            for d in sorted((d for d in self.demands.values() if d.fill and d.tp <= idle),
                            key=lambda d: d.load / replicas[d.name], reverse=True):
                more = {**replicas, d.name: replicas[d.name] + 1}
                t_more = t if self.fits(more, t) is not None else self.most_tokens(more, t)
                if t_more is not None:
                    replicas, t, grown = more, t_more, True
                    break
            if not grown:
                break
        level = {n: t for n in self.demands}
        for d in sorted(self.demands.values(), key=lambda d: d.load / max(replicas[d.name], 1), reverse=True):
            level[d.name] = self.most_tokens(replicas, self.cap(d), level, d.name) or level[d.name]  # room left over
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
