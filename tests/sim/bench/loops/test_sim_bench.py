"""`esc-eval bench sim` on the fake backend through the real Ray pool (small sizes)."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from esc_eval.cli.app import app


@pytest.mark.slow  # a local Ray and its worker actors: 57 s on the AVX2 EPYC
def test_bench_sim_fake_and_memory_print_the_contract_keys(s3_uri, ray_local, tmp_path):
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


def test_the_prefix_cache_hit_rate_sums_the_engines_counts():
    from esc_eval.sim.bench.loops.simulation import prefix_cache

    counts = {"/m/role": {"prompt_tokens": 1000, "cached_prompt_tokens": 900, "recomputed_prompt_tokens": 5,
                          "preemptions": 1},
              "/m/target": {"prompt_tokens": 3000, "cached_prompt_tokens": 2100}}
    assert prefix_cache(counts) == {"prompt_tokens": 4000, "cached_prompt_tokens": 3000, "hit_rate": 0.75,
                                    "recomputed_prompt_tokens": 5, "preemptions": 1}
    assert prefix_cache(None) is None  # an engine that kept no counts: no rate, not a zero
    assert prefix_cache({"/m": {"prompt_tokens": 0, "cached_prompt_tokens": 0}})["hit_rate"] is None
