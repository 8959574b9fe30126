"""How judge calls go through a provider's batch API (`score --batch`, the scoring config's `batch`),
and the one place that says what a batched token costs."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from esc_eval.serve.config import ConfigModel
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.serve.registry.prices import shipped_list_price

# OpenAI's Batch API and Anthropic's Message Batches both charge half the online list price (their
# pricing pages, 2024-2026): the rule for a price the shipped list does not give a batch price for (a
# config's own `prices`, a model not listed); a listed model's batch price is the list's
# (serve/registry/data/prices.yaml). sim/runs/usage.py prices batched rows by `batch_price`.
BATCH_PRICE_FACTOR = 0.5
DEFAULT_POLL_S = 30.0  # OpenAI and Anthropic suggest polling a batch about twice a minute


class BatchConfig(ConfigModel):
    """Judge calls sent as provider batches (OpenAI's Batch API, Anthropic's Message Batches): half the
    price, answers within 24 hours; the batches in flight are kept in the run folder, so a scoring
    killed and started again picks them up instead of sending them twice."""

    enabled: bool = Field(False, description="Send the judge calls as provider batches instead of one request each "
                          "(API judges: openai/..., litellm/openai/..., litellm/anthropic/...).")
    fallback: Literal["batch", "online"] = Field(
        "batch", description="A request that failed or expired inside a batch: 'batch' sends it again in a new "
        "batch (at most `max_attempts` batches, then its row keeps the error); 'online' scores it with an "
        "ordinary call at the online price.")
    max_attempts: int = Field(3, ge=1, description="Batches a request may go out in before its failure is kept "
                              "as the score row's error (fallback 'batch').")
    poll_s: float = Field(DEFAULT_POLL_S, gt=0, description="Seconds between two looks at the batches in flight.")
    max_requests: int | None = Field(None, ge=1, description="Requests per batch at most (default: the provider's "
                                     "limit, 50,000 for OpenAI and 100,000 for Anthropic; smaller batches end sooner).")
    max_bytes: int | None = Field(None, ge=1024, description="Bytes per batch at most (default: the provider's "
                                  "limit, 200 MB for OpenAI and 256 MB for Anthropic).")


def batch_price(online: TokenPrice | None, spec: str | None = None) -> TokenPrice | None:
    """What a token costs in a batch (None: unknown): the shipped list's batch price of `spec` where its online
    price is the list's (not a config's own), else the online price at BATCH_PRICE_FACTOR."""
    if online is None:
        return None
    listed = shipped_list_price(spec) if spec else None
    if listed is not None and listed.token_price() == online and (batched := listed.token_price(batch=True)) is not None:
        return batched
    return TokenPrice(prompt_per_1m=online.prompt_per_1m * BATCH_PRICE_FACTOR,
                      completion_per_1m=online.completion_per_1m * BATCH_PRICE_FACTOR)
