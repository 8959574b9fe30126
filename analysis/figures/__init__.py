"""analysis.figures: every figure (matplotlib, headless): the report's plots (`plots.py`: dimension
bars, radar, score distributions, card categories, win rates) and the benchmarks' (`bench_plots.py`).

Layer: above results; beside annotation and textmetrics. Importing this package loads matplotlib:
every module that imports one of its figures draws with plots.py anyway."""
from esc_eval.analysis.figures.bench_plots import bench_serve_plots
from esc_eval.analysis.figures.plots import (NothingToPlot, card_categories, dimension_bars, radar_plot,
                                             score_distributions, win_rate_plot)

__all__ = ["NothingToPlot", "bench_serve_plots", "card_categories", "dimension_bars", "radar_plot", "score_distributions",
           "win_rate_plot"]
