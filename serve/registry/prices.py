"""The list prices esc-eval ships (data/prices.yaml): per provider and model, dollars per 1M input and
output tokens online and through the provider's batch API, with the date they were read and their
source. The one home of shipped prices: the spend cap and the manifest's usage
(sim/driver/calls.py, sim/runs/usage.py), the dry run (sim/launch/dry_run.py) and batch scoring read
them through `shipped_price`.

A spec names its provider and model: `openai/<model>` is OpenAI's (`openai/gpt-4`), `litellm/<provider>/
<model>` the provider's (`litellm/anthropic/claude-sonnet-4-5`, `litellm/openai/gpt-4o`). Other
backends (vllm/, serve/, fake/) are self-hosted: no list price, their cost is engine time.
"""
from __future__ import annotations

import datetime as dt
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import Field

from esc_eval.serve.config.base import ConfigModel, validate_config
from esc_eval.serve.registry.entry import TokenPrice

PRICES_PATH = Path(__file__).parent / "data" / "prices.yaml"


class ListPrice(ConfigModel):
    """One model's list price as shipped (data/prices.yaml), online and batch."""

    provider: str = Field(description="The provider (openai, anthropic, ...), as LiteLLM names it.")
    model: str = Field(description="The provider's model name (gpt-4o, claude-sonnet-4-5, ...).")
    input: float = Field(ge=0, description="US dollars per 1M input (prompt) tokens, online.")
    output: float = Field(ge=0, description="US dollars per 1M output (completion) tokens, online.")
    batch_input: float | None = Field(None, ge=0, description="US dollars per 1M input tokens through the batch API (None: no batch API).")
    batch_output: float | None = Field(None, ge=0, description="US dollars per 1M output tokens through the batch API.")
    read_on: dt.date = Field(description="The date the prices were read.")
    source: str = Field(description="Where they were read.")
    page: str = Field(description="The provider's pricing page (the source's own source).")
    batch_terms: str | None = Field(None, description="The batch API's limits and turnaround, as the provider states them.")
    note: str | None = Field(None, description="What differs for this model (e.g. a batch price read from a dated snapshot).")

    def token_price(self, batch: bool = False) -> TokenPrice | None:
        """As a TokenPrice (what usage and the spend cap compute with); batch: the batch API's (None without one)."""
        if not batch:
            return TokenPrice(prompt_per_1m=self.input, completion_per_1m=self.output)
        if self.batch_input is None or self.batch_output is None:
            return None
        return TokenPrice(prompt_per_1m=self.batch_input, completion_per_1m=self.batch_output)


class _Provider(ConfigModel):
    page: str = Field(description="The provider's pricing page.")
    read_on: dt.date = Field(description="The date its prices were read.")
    source: str = Field(description="Where they were read.")
    batch_terms: str | None = Field(None, description="Its batch API's limits and turnaround.")
    models: dict[str, dict] = Field(description="Model -> {input, output, batch_input, batch_output, note}.")


@lru_cache(maxsize=None)
def list_prices(path: str | None = None) -> dict[str, ListPrice]:
    """Every shipped list price by '<provider>/<model>' (validated at the door: a bad field names itself)."""
    file = Path(path) if path else PRICES_PATH
    data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    out: dict[str, ListPrice] = {}
    for provider, raw in (data.get("providers") or {}).items():
        p = validate_config(_Provider, raw, f"{file.name}: providers.{provider}")
        for model, fields in p.models.items():
            out[f"{provider}/{model}"] = validate_config(ListPrice, {
                "provider": provider, "model": model, "read_on": p.read_on, "source": p.source, "page": p.page,
                "batch_terms": p.batch_terms, **fields}, f"{file.name}: providers.{provider}.models.{model}")
    return out


def price_key(spec: str) -> str | None:
    """'<provider>/<model>' of an API spec (openai/gpt-4 -> openai/gpt-4; litellm/anthropic/x -> anthropic/x);
    None for a self-hosted one."""
    backend, _, rest = spec.partition("/")
    if backend == "openai" and rest:
        return f"openai/{rest}"
    if backend == "litellm" and "/" in rest:
        return rest
    return None


def shipped_list_price(spec: str) -> ListPrice | None:
    """The shipped entry of an API spec (None: not listed, or self-hosted)."""
    key = price_key(spec)
    return list_prices().get(key) if key else None


def shipped_price(spec: str, batch: bool = False) -> TokenPrice | None:
    """The shipped list price of an API spec, online or (batch) through its batch API; None when not listed."""
    entry = shipped_list_price(spec)
    return entry.token_price(batch) if entry is not None else None
