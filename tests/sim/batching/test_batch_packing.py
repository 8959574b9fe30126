"""Requests packed into batches within the providers' limits: one judge a batch, a dialogue's requests
together where they fit, no batch over the requests or bytes allowed, the cost estimated at the price."""
from __future__ import annotations

import json

import pytest

from esc_eval.serve.batches.providers import batch_transport
from esc_eval.serve.chat.interface import ChatMessage, GenerationParams
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.sim.batching.answers import Need
from esc_eval.sim.batching.packing import limits_for, pack

PARAMS = GenerationParams(max_tokens=1)


def needs(n_dialogues: int, per_dialogue: int, words: int = 10) -> list[tuple[str, Need]]:
    out = []
    for d in range(n_dialogues):
        for k in range(per_dialogue):
            text = f"dialogue {d} dimension {k} " + "word " * words
            out.append((f"key-{d}-{k}", Need("j", f"d{d}", [ChatMessage(role="user", content=text)], PARAMS, None)))
    return out


@pytest.fixture(scope="module")
def openai():
    return batch_transport("openai/gpt-4", {"base_url": "http://127.0.0.1:9/v1"})


def test_the_providers_limits_and_the_configs_smaller_ones(openai):
    assert limits_for(openai, None, None).max_requests == 50_000 and limits_for(openai, None, None).max_bytes == 200 * 2**20
    anthropic = batch_transport("litellm/anthropic/claude-3-5-haiku-20241022", {})
    assert limits_for(anthropic, None, None).max_requests == 100_000
    assert limits_for(anthropic, 500, 10**9).max_requests == 500  # smaller from the config; never over the provider's
    assert limits_for(anthropic, None, 10**12).max_bytes == 256 * 2**20


def test_batches_hold_whole_dialogues_within_the_request_limit(openai):
    batches = pack("j", needs(10, 7), openai, limits_for(openai, 20, None), None)
    assert [len(b.refs) for b in batches] == [14, 14, 14, 14, 14]  # two dialogues of 7 a batch: a third would pass 20
    for b in batches:
        assert len({r.dialogue_id for r in b.refs}) == 2 and len({r.custom_id for r in b.refs}) == len(b.refs)
        assert all(r.custom_id.startswith(b.name + "-") for r in b.refs)
        assert all(json.loads(line)["custom_id"] == r.custom_id for line, r in zip(b.lines, b.refs))
    assert sorted(r.key for b in batches for r in b.refs) == sorted(k for k, _ in needs(10, 7))


def test_no_batch_over_the_byte_limit_and_a_dialogue_too_big_for_one_is_split(openai):
    lim = limits_for(openai, None, 4096)
    batches = pack("j", needs(6, 7, words=30), openai, lim, None)
    assert len(batches) > 1
    for b in batches:
        payload = openai.payload(b.lines)
        assert len(payload) <= 4096 and b.bytes + openai.overhead(len(b.lines)) == len(payload)
    small = limits_for(openai, 3, None)  # 7 requests of one dialogue cannot share a batch of 3
    assert [len(b.refs) for b in pack("j", needs(1, 7), openai, small, None)] == [3, 3, 1]
    with pytest.raises(ValueError, match="over the batch limit of 1024 bytes"):
        pack("j", needs(1, 1, words=400), openai, limits_for(openai, None, 1024), None)


def test_each_batch_carries_its_cost_estimate_at_the_price_given(openai):
    price = TokenPrice(prompt_per_1m=1.0, completion_per_1m=2.0)
    (b,) = pack("j", needs(1, 2), openai, limits_for(openai, None, None), price)
    assert b.est_usd == pytest.approx(sum((len(n.messages[0].content.encode()) / 4 + 4 + 2) / 1e6 for _, n in needs(1, 2)),
                                      rel=0.2)
    assert pack("j", needs(1, 2), openai, limits_for(openai, None, None), None)[0].est_usd is None
