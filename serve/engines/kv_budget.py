"""A GPU engine's KV cache as it came out, against what the plan gave it.

vLLM sizes its KV cache while it starts: it profiles the device's memory, counting what grew during the
profile as its own. Replicas that share a GPU (Ray Serve LLM's fractional GPUs, serve/app/application.py
`gpu_fraction`) start together, and one replica loading its weights while another profiles is counted
by the other as its own: that replica's cache comes out smaller than its share, or none at all. Ray's
guide calls fractional-GPU serving lightly tested. So each GPU replica compares the cache its engine
reports (vllm_compat.kv_cache_blocks) with the plan's figure (serve/plan: the KV tokens of its share):
- below `floor` (replicas sharing a GPU; 0.5 by default): its start fails with one line naming both
  figures. Serve starts the replica again; the replicas' failures are spread over a few seconds so that
  each retry profiles while its neighbours sit still (their memory taken, nothing growing); a shortfall
  that survives Serve's retries stops the deploy with that line (serve/app/deploy.py);
- below WARN_FRACTION: a warning in the replica's log (the plan's batch sizes assume the full cache).
The figures travel to the replica in its runtime environment (EXPECTED_KV_ENV, KV_FLOOR_ENV).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EXPECTED_KV_ENV = "ESC_EVAL_EXPECTED_KV_TOKENS"  # the plan's KV tokens for one replica
KV_FLOOR_ENV = "ESC_EVAL_KV_FLOOR"  # the fraction of them below which the replica's start fails (0: never)
WARN_FRACTION = 0.9
RETRY_SPREAD_S = 20.0  # a short replica fails after a random wait up to this: its neighbours retry apart


@dataclass(frozen=True)
class KvVerdict:
    """What the engine reported against the plan: ok, a warning, or a shortfall that fails the start."""

    level: str  # ok | warn | short | unknown
    line: str = ""

    @property
    def short(self) -> bool:
        return self.level == "short"


def check_kv(model: str, reported: dict[str, Any], expected_tokens: int, floor: float = 0.0) -> KvVerdict:
    """`reported`: vllm_compat.kv_cache_blocks(engine) (blocks, block_size, tokens)."""
    tokens = reported.get("tokens")
    if not isinstance(tokens, int) or expected_tokens <= 0:
        return KvVerdict("unknown", f"the vLLM engine for {model} did not report its KV cache; the plan gave it "
                                    f"{expected_tokens:,} tokens")
    share = tokens / expected_tokens
    if share >= WARN_FRACTION:
        return KvVerdict("ok")
    blocks = f" ({reported['blocks']:,} blocks of {reported['block_size']})" if reported.get("blocks") else ""
    line = (f"the vLLM engine for {model} sized its KV cache at {tokens:,} tokens{blocks}, {share:.0%} of the "
            f"{expected_tokens:,} the plan gave it")
    if share < floor:
        return KvVerdict("short", line + ": replicas sharing its GPU profiled the GPU's memory at once and took "
                         "each other's for their own (Serve starts it again, apart from them); if this stays: "
                         "placement.mode in_process (engines started one after another), or placement.kv_floor 0 to "
                         "run with the smaller cache")
    return KvVerdict("warn", line + ": fewer sequences fit than the plan's max_num_seqs assumes (preemptions)")


__all__ = ["EXPECTED_KV_ENV", "KV_FLOOR_ENV", "KvVerdict", "RETRY_SPREAD_S", "WARN_FRACTION", "check_kv"]
