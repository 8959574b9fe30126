"""sim.bench: the benchmarks behind `esc-eval bench sim|score|decode|serve` and the reference loops they
measure against (reference_loop.py: the release's one-dialogue-at-a-time HF `generate` loop).

Layer: part of sim (imports serve and sim, never analysis, train or cli)."""
