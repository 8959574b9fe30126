"""The requests a scoring pass needs, packed into batches within each provider's limits.

One batch holds one judge's requests (OpenAI's Batch API takes one model a batch) and at most
`max_requests` lines and `max_bytes` bytes (the provider's limits, or the config's smaller ones). A
dialogue's requests stay in one batch where they fit together, so its rows come in one piece.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from esc_eval.serve.batches.transport import BatchLimits, BatchTransport
from esc_eval.serve.calls.limits import estimate_prompt_tokens
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.sim.batching.answers import Need
from esc_eval.sim.batching.book import RequestRef, new_name


@dataclass
class PlannedBatch:
    """A batch to send: its name, judge, requests and lines (custom_ids `<name>-<n>`)."""

    name: str
    judge: str
    refs: list[RequestRef] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    bytes: int = 0
    est_usd: float | None = 0.0


def limits_for(transport: BatchTransport, max_requests: int | None, max_bytes: int | None) -> BatchLimits:
    """The provider's limits, lowered by the config's."""
    d = transport.default_limits
    return BatchLimits(max_requests=min(d.max_requests, max_requests or d.max_requests),
                       max_bytes=min(d.max_bytes, max_bytes or d.max_bytes))


def request_cost(need: Need, price: TokenPrice | None) -> float | None:
    """What a request may cost at `price` (its prompt estimated, its answer at max_tokens)."""
    if price is None:
        return None
    return (estimate_prompt_tokens(need.messages) * price.prompt_per_1m
            + need.params.max_tokens * price.completion_per_1m) / 1e6


def pack(judge: str, needs: list[tuple[str, Need]], transport: BatchTransport, limits: BatchLimits,
         price: TokenPrice | None) -> list[PlannedBatch]:
    """`needs` (request key, Need) of one judge as batches within `limits` (see the module docstring)."""
    by_dialogue: dict[str, list[tuple[str, Need]]] = {}
    for key, need in needs:
        by_dialogue.setdefault(need.dialogue_id, []).append((key, need))
    batches: list[PlannedBatch] = []

    def fresh() -> PlannedBatch:
        batches.append(PlannedBatch(new_name(), judge))
        return batches[-1]

    current: PlannedBatch | None = None
    for dialogue_id, group in by_dialogue.items():
        encoded = []
        for key, need in group:
            line = transport.request_line("", need.messages, need.params, need.adapter)  # sized with its custom_id below
            encoded.append((key, need, line))
        size = sum(len(_dump(line, "x" * 40)) + 1 for _, _, line in encoded)

        def fits(b: PlannedBatch, n: int, extra: int) -> bool:
            return (len(b.refs) + n <= limits.max_requests
                    and b.bytes + extra + transport.overhead(len(b.refs) + n) <= limits.max_bytes)

        if current is None or not fits(current, len(encoded), size):
            current = fresh() if current is None or current.refs else current
        for key, need, line in encoded:
            cid = f"{current.name}-{len(current.refs)}"
            data = _dump({**line, "custom_id": cid}, None)
            if current.refs and not fits(current, 1, len(data)):
                current = fresh()
                cid = f"{current.name}-0"
                data = _dump({**line, "custom_id": cid}, None)
            if not fits(current, 1, len(data)):
                raise ValueError(f"judge {judge!r}: one request of dialogue {dialogue_id} is {len(data)} bytes, over "
                                 f"the batch limit of {limits.max_bytes} bytes")
            current.refs.append(RequestRef(cid, key, dialogue_id, judge))
            current.lines.append(data)
            current.bytes += len(data)
            cost = request_cost(need, price)
            current.est_usd = None if cost is None or current.est_usd is None else current.est_usd + cost
    return batches


def _dump(line: dict, custom_id: str | None) -> bytes:
    if custom_id is not None:
        line = {**line, "custom_id": custom_id}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
