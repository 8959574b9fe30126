"""`esc-eval bench sim` through the real Ray pool (small sizes): (a) and (c) on the fake backend, then (b)
30-round dialogues on the embedded model with the prefix cache's hit rate from vLLM's own counts."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from esc_eval.cli.app import app


@pytest.mark.slow  # a local Ray and its worker actors: 57 s on the AVX2 EPYC; then (b), an engine in one worker
def test_bench_sim_prints_the_contract_keys_and_the_hit_rate_of_30_rounds(s3_uri, ray_local, tmp_path):
    # s3_uri first: the local Ray started by ray_local gives its workers this process's AWS_* settings
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(app, ["bench", "sim", "--fake-dialogues", "200", "--fake-latency", "0.3",
                                   "--saturation-latency", "0.01", "--memory-items", "3000",
                                   "--embedded-dialogues", "0", "--workers", "2", "--out", str(out),
                                   "--via-driver", "--storage-uri", s3_uri, "--rounds", "4"])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    fake, sat = data["fake"], data["fake_saturated"]
    # 4 rounds (--rounds): 8 calls a dialogue, a critical path of 2 x 4 x 0.3 s
    assert fake["dialogues"] == 200 and fake["failed"] == 0 and fake["model_calls"] == 1600 and data["rounds"] == 4
    assert fake["critical_path_s"] == 2.4
    # every dialogue in flight at once: the balanced fill must not leave a second wave (>= 2x)
    assert 1.0 <= data["critical_path_ratio"] == fake["critical_path_ratio"] < 1.9
    assert data["fake_calls_per_s"] == sat["fake_calls_per_s"] > 0 and sat["latency_s"] == 0.01
    assert sat["turn_checkpoints"] is False and sat["flush_rows"] == 5000
    prod = data["fake_production"]  # the same run with `simulate`'s defaults
    assert prod["turn_checkpoints"] is True and prod["model_calls"] == 1600 and prod["failed"] == 0
    assert data["fake_calls_per_s_production"] == prod["fake_calls_per_s"] > 0
    for key, writes in (("fake_production_via_driver", "via_driver"), ("fake_production_uri", "auto")):
        # the same production run, rows shipped to the driver's node / written to the S3 server
        assert data[key]["model_calls"] == 1600 and data[key]["failed"] == 0 and data[key]["worker_writes"] == writes
    assert data["fake_production_uri"]["run_folder"].startswith(s3_uri)
    assert data["memory"]["items"] == 3000
    assert "speedup_vs_reference" not in data  # the embedded part was skipped

    # (b) on the same Ray: 2 dialogues of 30 rounds on the embedded model in one worker's engine, ours alone
    # (no reference loop); the prefix cache's hit rate from vLLM's own counts of the run's requests
    rounds, turn, dialogues = 30, 16, 2
    res = CliRunner().invoke(app, ["bench", "sim", "--fake-dialogues", "0", "--memory-items", "0", "--rounds", str(rounds),
                                   "--embedded-dialogues", str(dialogues), "--concurrency", str(dialogues),
                                   "--reference-dialogues", "0", "--max-tokens", str(turn), "--engines", "1",
                                   "--eager", "--kv-cache-gb", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    ours, cache = data["embedded"]["ours"], data["embedded"]["ours"]["prefix_cache"]
    assert ours["dialogues"] == dialogues and ours["failed"] == 0 and data["embedded"]["reference"] is None
    assert data["speedup_vs_reference"] is None and data["rounds"] == rounds
    # the engine's counts are this run's calls, each once (not the warm-up's): two a round, and exactly the
    # prompt tokens the dialogues' rows say they sent (the engine was given those token ids)
    assert cache["requests"] == ours["model_calls"] == dialogues * 2 * rounds
    assert cache["prompt_tokens"] == ours["prompt_tokens_sent"] > 0
    assert 0 <= cache["cached_prompt_tokens"] <= cache["prompt_tokens"]
    assert data["prefix_cache_hit_rate"] == cache["hit_rate"] == round(cache["cached_prompt_tokens"] / cache["prompt_tokens"], 4)
    # the floor any 30-round dialogue reaches: each call re-sends its side's previous prompt, of which the
    # cache lacks at most the last partial KV block, so it misses at most a block plus what was added since
    # (two turns of at most `turn` tokens and their template, 16 tokens); a side's first call misses all it
    # sends: a side's whole prompt at the end is at most its system prompt (300) and every turn
    block = ours["kv_block_size"]
    missed = cache["requests"] * block + 2 * dialogues * (300 + rounds * (2 * turn + 16))
    floor = 1 - missed / cache["prompt_tokens"]
    assert 0.5 < floor <= cache["hit_rate"] <= 1, (floor, cache, block)
    print(f"30 rounds: prefix-cache hit rate {cache['hit_rate']} (floor {floor:.3f}, KV block {block}), {cache}")


def test_the_prefix_cache_hit_rate_sums_the_engines_counts():
    from esc_eval.sim.bench.loops.simulation import prefix_cache

    counts = {"/m/role": {"prompt_tokens": 1000, "cached_prompt_tokens": 900, "recomputed_prompt_tokens": 5,
                          "preemptions": 1},
              "/m/target": {"prompt_tokens": 3000, "cached_prompt_tokens": 2100}}
    assert prefix_cache(counts) == {"requests": 0, "prompt_tokens": 4000, "cached_prompt_tokens": 3000, "hit_rate": 0.75,
                                    "recomputed_prompt_tokens": 5, "preemptions": 1}
    assert prefix_cache(None) is None  # an engine that kept no counts: no rate, not a zero
    assert prefix_cache({"/m": {"prompt_tokens": 0, "cached_prompt_tokens": 0}})["hit_rate"] is None
