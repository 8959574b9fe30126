"""The shipped list prices (serve/registry/data/prices.yaml): one home, read with their date and source,
online and batch, and what the spend cap and usage price with."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from esc_eval.serve.registry.prices import list_prices, price_key, shipped_list_price, shipped_price


def test_every_entry_has_its_date_source_and_batch_at_or_below_online():
    prices = list_prices()
    assert {"openai/gpt-4", "openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5"} <= set(prices)
    for key, p in prices.items():
        assert isinstance(p.read_on, dt.date) and p.source and p.page.startswith("https://"), key
        assert p.batch_input is not None and p.batch_input <= p.input and p.batch_output <= p.output, key


def test_specs_find_their_provider_and_model():
    assert price_key("openai/gpt-4") == "openai/gpt-4"
    assert price_key("litellm/anthropic/claude-haiku-4-5") == "anthropic/claude-haiku-4-5"
    assert price_key("litellm/openai/gpt-4o") == "openai/gpt-4o"
    assert price_key("vllm/embedded") is None and shipped_price("vllm/embedded") is None
    assert shipped_price("openai/gpt-4").prompt_per_1m == 30.0
    assert shipped_price("openai/gpt-4", batch=True).completion_per_1m == 30.0  # half of 60
    assert shipped_price("litellm/openai/gpt-4o") == shipped_price("openai/gpt-4o")
    assert shipped_list_price("openai/no-such-model") is None


def test_the_list_agrees_with_the_pinned_litellm_wheel():
    """The source the file names: litellm's bundled price list (read offline, as the file says)."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    if spec is None:
        pytest.skip("litellm not installed")
    table = json.loads((Path(spec.origin).parent / "model_prices_and_context_window_backup.json").read_text())
    snapshot = {"gpt-4": "gpt-4-0613", "gpt-3.5-turbo": "gpt-3.5-turbo-0125"}  # batch price of the alias's snapshot
    for key, p in list_prices().items():
        entry = table[p.model]
        assert entry["input_cost_per_token"] * 1e6 == pytest.approx(p.input), key
        assert entry["output_cost_per_token"] * 1e6 == pytest.approx(p.output), key
        batch = table[snapshot.get(p.model, p.model)]
        assert batch["input_cost_per_token_batches"] * 1e6 == pytest.approx(p.batch_input), key
        assert batch["output_cost_per_token_batches"] * 1e6 == pytest.approx(p.batch_output), key


def test_a_bad_field_is_named(tmp_path):
    bad = tmp_path / "prices.yaml"
    bad.write_text("providers:\n  openai:\n    page: https://x\n    read_on: 2026-12-04\n    source: s\n"
                   "    models:\n      gpt-x: {input: -1, output: 2}\n")
    with pytest.raises(ValueError, match="providers.openai.models.gpt-x.*input"):
        list_prices(str(bad))
