"""How much work is in flight: per worker, per Serve replica, and the CPUs a worker gets.

CPU engines, and models without an engine in the worker (API, Serve handles, fakes): the job's
defaults as measured on CPUs (notes/cpu-stack.md) - 32 dialogues per worker when simulating, 8
dialogues per worker when scoring, 1 CPU per worker - unchanged.

GPU engines: what the engine can hold, as it reports it after it started (vLLM: KV cache blocks x
block size, and its max_num_seqs):

    items in flight = min over the worker's GPU engines of
                      min(KV tokens // (sequences per item x tokens per sequence),
                          max_num_seqs // sequences per item),  at most MAX_AUTO_CONCURRENCY

The demand of one item (`Demand`: sequences in flight on an engine, tokens each) is the job's to
say (`Job.demands`; jobs/simulation_items.py for a dialogue, jobs/scoring.py for a dialogue to
score), estimated from the config before any call (`estimate_tokens`: text at 3 UTF-8 bytes per
token; English runs about 4, a Chinese character is 3 bytes and about one token, so it errs high).

An explicit `execution.concurrency` (or `num_cpus_per_worker`, or a Serve field) wins. The GPU
sizing is arithmetic on what the engine reports; it has not yet run on a GPU.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Literal

from esc_eval.serve.engines.args import EngineCapacity
from esc_eval.serve.plan.text import tokens_k

MAX_AUTO_CONCURRENCY = 1024  # items per worker the sizing never passes (vLLM's largest default max_num_seqs)
GPU_WORKER_CPUS = 8.0  # measured on one H100: 8 CPUs and 128 in flight gave 788 tok/s, 1 CPU and 32 gave 357
CPU_WORKER_CPUS = 1.0  # measured on the 2-core CPU machines
BYTES_PER_TOKEN = 3


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)


@dataclass(frozen=True)
class Demand:
    """What one item asks of one model's engine: sequences in flight there at once, KV tokens each."""

    model: str  # the model as the config names it
    seqs_per_item: int
    tokens_per_seq: int

    def capped(self, max_model_len: int | None) -> "Demand":
        if not max_model_len or self.tokens_per_seq <= max_model_len:
            return self
        return Demand(self.model, self.seqs_per_item, max_model_len)


@dataclass(frozen=True)
class Concurrency:
    """Items in flight per worker, and why (for the manifest and the progress line)."""

    value: int
    source: Literal["explicit", "default", "kv_cache"]
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def items_in_flight(cap: EngineCapacity, demand: Demand) -> tuple[int, bool]:
    """(items the engine holds at once, whether max_num_seqs rather than the KV cache bounds it)."""
    d = demand.capped(cap.max_model_len)
    by_kv = (cap.kv_tokens or 0) // (d.seqs_per_item * d.tokens_per_seq)
    by_seqs = cap.max_num_seqs // d.seqs_per_item if cap.max_num_seqs else MAX_AUTO_CONCURRENCY
    return max(1, min(by_kv, by_seqs, MAX_AUTO_CONCURRENCY)), by_seqs < by_kv


def choose_concurrency(explicit: int | None, default: int, engines: Iterable[tuple[EngineCapacity, Demand]],
                       unit: str = "dialogue") -> Concurrency:
    """Items in flight per worker (see the module doc): `explicit` if set, else sized by the GPU
    engines among `engines` (capacity, demand), else `default` (the CPU figure)."""
    if explicit is not None:
        return Concurrency(explicit, "explicit", f"concurrency {explicit} per worker: execution.concurrency")
    sized = [(c, d, *items_in_flight(c, d)) for c, d in engines if c.device == "gpu" and c.kv_tokens]
    if not sized:
        return Concurrency(default, "default", f"concurrency {default} per worker: the CPU default (no GPU engine here)")
    cap, demand, n, by_seqs = min(sized, key=lambda s: s[2])
    d = demand.capped(cap.max_model_len)
    per = f"{d.seqs_per_item} x ~{tokens_k(d.tokens_per_seq)}" if d.seqs_per_item > 1 else f"~{tokens_k(d.tokens_per_seq)}"
    reason = (f"concurrency {n} per worker: {demand.model}'s KV cache {tokens_k(cap.kv_tokens or 0)} tokens / {per} tokens "
              f"per {unit}")
    if by_seqs:
        reason += f", capped by max_num_seqs {cap.max_num_seqs}"
    elif n == MAX_AUTO_CONCURRENCY:
        reason += f", capped at {MAX_AUTO_CONCURRENCY}"
    return Concurrency(n, "kv_cache", reason)


def worker_cpus(explicit: float | None, gpus_per_worker: float, cluster_cpus: float | None, workers: int) -> float:
    """Ray CPUs per worker: `explicit` if set; 1 (as measured) for CPU workers; GPU_WORKER_CPUS for
    workers holding GPU engines (their engine loops and front-ends), within the cluster's CPUs."""
    if explicit is not None:
        return explicit
    if not gpus_per_worker:
        return CPU_WORKER_CPUS
    if not cluster_cpus:
        return GPU_WORKER_CPUS
    return max(CPU_WORKER_CPUS, min(GPU_WORKER_CPUS, math.floor(cluster_cpus / max(workers, 1))))


def serve_capacity_fields(kv_tokens: int | None, seq_tokens: int | None, *, set_fields: Iterable[str] = ()) -> dict[str, Any]:
    """ServeModelConfig fields of a GPU replica sized by its planned KV cache over the run's expected
    sequence length: max_num_seqs = the sequences the KV cache holds (at most MAX_AUTO_CONCURRENCY),
    target_ongoing_requests the same (autoscale past what one replica holds), max_ongoing_requests
    twice that (a queue behind a full batch). Fields in `set_fields` (the user's) are left out."""
    if not kv_tokens or not seq_tokens:
        return {}
    n = max(1, min(kv_tokens // seq_tokens, MAX_AUTO_CONCURRENCY))
    fields = {"max_num_seqs": n, "target_ongoing_requests": n, "max_ongoing_requests": 2 * n}
    return {k: v for k, v in fields.items() if k not in set(set_fields)}


def size_serve_replicas(plan: Any, seq_tokens: Callable[[], dict[str, int]], placement: Any) -> None:
    """The hook into a run's plan (serve/plan/planner.py Plan): each GPU deployment's max_num_seqs,
    target_ongoing_requests and max_ongoing_requests from its planned KV cache over the longest
    expected sequence of the configured models it serves (`seq_tokens()`: ref key -> tokens, asked
    only when there is a GPU deployment); fields the user set (placement.models, or the model's
    options) stay; a note on the deployment says what was chosen."""
    import json

    gpu_deployments = [e for e in plan.engines if e.where == "serve deployment" and e.device == "gpu"]
    expected = seq_tokens() if gpu_deployments else {}
    for e in gpu_deployments:
        seq = max((expected.get(r, 0) for r in e.refs), default=0)
        user: set[str] = set()
        for ref in e.refs:
            model, _, options = ref.partition("|")
            user |= set(placement.models.get(model, {})) | set(json.loads(options or "{}"))
        fields = serve_capacity_fields(e.kv_tokens, seq, set_fields=user)
        if fields:
            e.serve.update(fields)
            e.notes.append(", ".join(f"{k} {v}" for k, v in fields.items())
                           + f": KV cache {tokens_k(e.kv_tokens)} tokens per replica / ~{tokens_k(seq)} tokens per sequence")


def serve_worker_shares(plan: Any, workers: int, targets: int = 1) -> dict[str, dict[str, Any]]:
    """What one pool worker may keep busy on each GPU deployment the plan sized (size_serve_replicas),
    by the ref keys of the configured models it serves, as EngineCapacity fields: the deployment's KV
    tokens and max_num_seqs at max_replicas, split among the `workers`. A target deployment counts
    `targets` times that: the pool gives the run's targets their dialogues in turn, so each sees one
    in `targets` of them. The workers size their items in flight from it as from an engine of their
    own (choose_concurrency); a deployment the plan did not size (CPU replicas) gets nothing."""
    out: dict[str, dict[str, Any]] = {}
    for e in plan.engines:
        seqs = e.serve.get("max_num_seqs") if e.where == "serve deployment" and e.device == "gpu" else None
        if not seqs or not e.kv_tokens:
            continue
        only_target = "target" in e.uses and not {"role", "judge"} & set(e.uses)
        share = (e.replicas or (1, 1))[1] * (max(targets, 1) if only_target else 1) / max(workers, 1)
        cap = {"model": e.name, "device": "gpu", "kv_tokens": max(1, int(e.kv_tokens * share)),
               "max_num_seqs": max(1, int(seqs * share)), "max_model_len": e.max_model_len}
        out.update({ref: cap for ref in e.refs})
    return out


__all__ = ["Concurrency", "Demand", "GPU_WORKER_CPUS", "MAX_AUTO_CONCURRENCY", "choose_concurrency",
           "estimate_tokens", "items_in_flight", "serve_capacity_fields", "serve_worker_shares", "size_serve_replicas",
           "worker_cpus"]
