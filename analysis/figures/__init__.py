"""analysis.figures: every figure (matplotlib, headless): the report's plots (`plots.py`: dimension
bars, radar, score distributions, card categories, win rates) and the benchmarks' (`bench_plots.py`).

Layer: above results; beside annotation and textmetrics. matplotlib loads on first use of a name
from this package."""
import importlib

_NAMES = {"NothingToPlot": "plots", "card_categories": "plots", "dimension_bars": "plots", "radar_plot": "plots",
          "score_distributions": "plots", "win_rate_plot": "plots", "bench_serve_plots": "bench_plots"}


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_NAMES)
