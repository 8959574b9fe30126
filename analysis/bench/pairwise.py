"""How long the pairwise ratings take at the paper's scale (`esc-eval bench pairwise`).

Fake verdicts (analysis.pairwise.fake_verdicts: 655 cards x 14 targets = 91 pairs per card, seven
dimensions, both orders, with a little position bias, ties and failures) are written to a run folder
with the real writer, then timed in this process, each step once: reading them (load_pairwise),
combining the orders, the position-bias audit, and the bootstrap Bradley-Terry fit (1,000 resamples
of the cards for every dimension and the pooled ratings; the target: under 30 s on 2 cores). The
pooled ratings are checked against the strengths the verdicts were drawn from (Kendall's tau).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy import stats

from esc_eval.analysis.pairwise.bradley_terry import bt_ratings
from esc_eval.analysis.pairwise.fake_verdicts import write_fake_verdicts
from esc_eval.analysis.pairwise.position_bias import POOLED, position_bias
from esc_eval.analysis.pairwise.verdicts import combine_orders
from esc_eval.analysis.results.loaders import load_pairwise


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, round(time.perf_counter() - t0, 3)


def bench_pairwise(cards: int = 655, targets: int = 14, n_boot: int = 1000, seed: int = 0,
                   folder: Path | None = None) -> dict[str, Any]:
    """Time each step (see the module docstring); the fake run folder goes in `folder` (default: a temporary one)."""
    models = [f"target-{i:02d}" for i in range(targets)]
    strengths = np.linspace(-1, 1, targets)
    with tempfile.TemporaryDirectory(prefix="esc-eval-pairwise-bench-") as tmp:
        path = Path(folder or Path(tmp) / "run")
        t: dict[str, float] = {}
        _, t["write_fake_verdicts"] = _timed(lambda: write_fake_verdicts(
            path, cards, models, strengths, position_bias=0.1, tie_rate=0.1, failure_rate=0.01, seed=seed))
        rows, t["load_pairwise"] = _timed(lambda: load_pairwise([path]))
        outcomes, t["combine_orders"] = _timed(lambda: combine_orders(rows))
        _, t["position_bias"] = _timed(lambda: position_bias(rows))
        ratings, t["bootstrap_bradley_terry"] = _timed(lambda: bt_ratings(outcomes.table, n_boot=n_boot, seed=seed))
        t["analysis_total"] = round(t["load_pairwise"] + t["combine_orders"] + t["position_bias"]
                                    + t["bootstrap_bradley_terry"], 3)
        pooled = ratings.ratings[ratings.ratings["dimension"] == POOLED].set_index("model").loc[models]
        return {
            "bench": "pairwise", "cards": cards, "targets": targets, "pairs_per_card": targets * (targets - 1) // 2,
            "verdict_rows": int(len(rows)), "outcomes": int(len(outcomes.table)), "n_boot": n_boot,
            "fits": n_boot * (outcomes.table["dimension"].nunique() + 1), "seconds": t,
            "target": {"bootstrap_bradley_terry_s": 30.0},
            "tau_with_true_strengths": float(stats.kendalltau(pooled["theta"], strengths).statistic),
            "notes": "bootstrap_bradley_terry = win matrices per card, 1,000 multinomial resamples of the cards, "
                     "a batched Newton fit per dimension and pooled, intervals and ranks; write_fake_verdicts "
                     "(building the rows) is not part of the analysis.",
        }
