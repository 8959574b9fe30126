"""The analysis benchmarks (analysis/bench/) at small sizes: each builds distinct inputs with the real
writers, runs the real analysis on them and reports what it ran on; the figures themselves are the
benchmarks' business (`esc-eval bench fidelity|pairwise`), not a timed test's."""
from __future__ import annotations

import json

from esc_eval.analysis.bench.fidelity import bench_fidelity, write_fake_humans
from esc_eval.analysis.bench.pairwise import bench_pairwise


def test_the_fidelity_bench_reads_what_it_wrote():
    out = bench_fidelity(n_simulated=40, n_human=30, n_boot=20)
    assert (out["n_simulated"], out["n_human"], out["role_models"], out["n_boot"]) == (40, 30, 2, 20)
    assert set(out["seconds"]) == {"read_run", "read_humans", "features_and_comparison", "write", "total"}
    assert out["within_target"] == (out["seconds"]["total"] < out["target_s"])


def test_the_fake_human_file_is_esconvs_format_and_distinct(tmp_path):
    records = json.loads(write_fake_humans(tmp_path / "h.json", 20).read_text())
    assert len(records) == 20 and all({"speaker", "content"} <= set(t) for r in records for t in r["dialog"])
    seeker_texts = [t["content"] for r in records for t in r["dialog"] if t["speaker"] == "seeker"]
    assert len(set(seeker_texts)) == len(seeker_texts)  # distinct inputs: no two turns alike


def test_the_pairwise_bench_recovers_the_planted_order():
    out = bench_pairwise(cards=60, targets=4, n_boot=30)
    assert out["pairs_per_card"] == 6 and out["verdict_rows"] > 0 and out["fits"] == 30 * (out["fits"] // 30)
    # strengths planted in order; 60 cards x 6 pairs x 7 dimensions recover it
    assert out["tau_with_true_strengths"] > 0.6
