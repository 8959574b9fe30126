"""Near-duplicate removal across sources: character n-gram shingles + Jaccard similarity.

Candidates come from MinHash signatures with LSH banding (numpy), and every candidate pair is
checked with the exact Jaccard of the shingle sets, so the threshold means what it says. Within
a group of near-duplicates the first card in the given order is kept (the pipeline orders by
source as listed in the config, then by item order), the others are reported with the id they
duplicate and the similarity.
"""
from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

import numpy as np

from esc_eval.sim.cardbuild.config import DEDUP_BANDS, DEDUP_NGRAM, DEDUP_NUM_PERM, DEDUP_THRESHOLD

_PRIME = (1 << 31) - 1


@dataclass
class Duplicate:
    id: str
    duplicate_of: str
    similarity: float


def shingles(text: str, n: int = 3) -> set[str]:
    """Character n-grams of the text, lower-cased, whitespace collapsed, punctuation dropped."""
    t = re.sub(r"[^\w\u4e00-\u9fff]+", " ", (text or "").lower()).strip()
    t = re.sub(r"\s+", " ", t)
    if len(t) <= n:
        return {t} if t else set()
    return {t[i:i + n] for i in range(len(t) - n + 1)}


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _minhash(sets: list[set[str]], num_perm: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.integers(1, _PRIME, size=num_perm, dtype=np.int64)
    b = rng.integers(0, _PRIME, size=num_perm, dtype=np.int64)
    sig = np.full((len(sets), num_perm), _PRIME, dtype=np.int64)
    for row, s in enumerate(sets):
        if not s:
            continue
        h = np.fromiter((zlib.crc32(x.encode("utf-8")) % _PRIME for x in s), dtype=np.int64, count=len(s))
        sig[row] = ((np.outer(h, a) + b) % _PRIME).min(axis=0)
    return sig


def find_near_duplicates(
    texts: list[tuple[str, str]], *, ngram: int = DEDUP_NGRAM, threshold: float = DEDUP_THRESHOLD,
    num_perm: int = DEDUP_NUM_PERM, bands: int = DEDUP_BANDS,
    seed: int = 0,
) -> list[Duplicate]:
    """texts: (id, text) in priority order. Returns the ones to drop (Jaccard >= threshold to a kept one)."""
    if not 0 < threshold <= 1:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if num_perm % bands:
        raise ValueError(f"num_perm ({num_perm}) must be a multiple of bands ({bands})")
    ids = [i for i, _ in texts]
    sets = [shingles(t, ngram) for _, t in texts]
    if len(texts) < 2:
        return []
    sig = _minhash(sets, num_perm, seed)
    rows = num_perm // bands
    candidates: dict[int, set[int]] = {}
    for band in range(bands):
        buckets: dict[bytes, list[int]] = {}
        block = sig[:, band * rows:(band + 1) * rows]
        for idx in range(len(texts)):
            buckets.setdefault(block[idx].tobytes(), []).append(idx)
        for members in buckets.values():
            for pos, j in enumerate(members):
                for i in members[:pos]:
                    candidates.setdefault(j, set()).add(i)
    dropped: dict[int, Duplicate] = {}
    for j in range(len(texts)):
        best: tuple[float, int] | None = None
        for i in sorted(candidates.get(j, ())):
            if i in dropped:
                continue  # compare with kept cards only
            sim = jaccard(sets[i], sets[j])
            if sim >= threshold and (best is None or sim > best[0]):
                best = (sim, i)
        if best is not None:
            dropped[j] = Duplicate(ids[j], ids[best[1]], round(best[0], 4))
    return [dropped[j] for j in sorted(dropped)]
