"""`esc-eval bench sim` on the fake backend through the real Ray pool (small sizes)."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from esc_eval.cli.app import app


def test_bench_sim_fake_and_memory_print_the_contract_keys(ray_local, tmp_path):
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(app, ["bench", "sim", "--fake-dialogues", "200", "--fake-latency", "0.3",
                                   "--saturation-latency", "0.01", "--memory-items", "3000",
                                   "--embedded-dialogues", "0", "--workers", "2", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    fake, sat = data["fake"], data["fake_saturated"]
    assert fake["dialogues"] == 200 and fake["failed"] == 0 and fake["model_calls"] == 2000
    assert fake["critical_path_s"] == 3.0
    # every dialogue in flight at once: the balanced fill must not leave a second wave (>= 2x)
    assert 1.0 <= data["critical_path_ratio"] == fake["critical_path_ratio"] < 1.9
    assert data["fake_calls_per_s"] == sat["fake_calls_per_s"] > 0 and sat["latency_s"] == 0.01
    assert sat["turn_checkpoints"] is False and sat["flush_rows"] == 5000
    prod = data["fake_production"]  # the same run with `simulate`'s defaults
    assert prod["turn_checkpoints"] is True and prod["model_calls"] == 2000 and prod["failed"] == 0
    assert data["fake_calls_per_s_production"] == prod["fake_calls_per_s"] > 0
    assert data["memory"]["items"] == 3000
    assert "speedup_vs_reference" not in data  # the embedded part was skipped
