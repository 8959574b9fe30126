"""sim.bench: the benchmarks behind `esc-eval bench sim|score|decode|serve` and the reference loops they
measure against (reference_loop.py: the release's one-dialogue-at-a-time HF `generate` loop).

Layer: the top of sim: may import every sub-package of sim and serve; only the CLI imports it."""

__all__: list[str] = []  # the benchmarks are called by module from cli/bench.py
