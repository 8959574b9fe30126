"""analysis.bench: the analysis benchmarks behind `esc-eval bench ...`: the results viewer on a
large run (`viewer.py`), the annotation server under annotators (`annotation.py`), and the trust
pipeline (calibration, PPI, the report) on a fake run of the paper's size (`trust.py`), and seeker
fidelity on 8,500 simulated against 1,300 human dialogues (`fidelity.py`), and Bradley-Terry ratings
with their bootstrap over the paper's 655 cards and 14 targets (`pairwise.py`), and the embedding
model's sentences per second (`embedding.py`).

Layer: the top of analysis."""
import importlib

_NAMES = {"bench_viewer": "viewer", "bench_annotation": "annotation", "bench_trust": "trust",
          "bench_fidelity": "fidelity", "bench_pairwise": "pairwise", "bench_embedding": "embedding"}


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_NAMES)
