"""Distances between two sets of embeddings (unit vectors), and the claim built on them.

  nn_cosine   for each row of A, the cosine of its nearest row of B, averaged: how close what A says
              comes to something B said (1 = each has a copy in B)
  mmd         maximum mean discrepancy with a Gaussian kernel exp(-|x - y|^2 / (2 s^2)), the biased
              (V-statistic) estimate, square-rooted: 0 = the same sample; s is the median distance
              between the pooled rows (set once per comparison, so every permutation uses it)
  frechet     the Frechet distance between Gaussians fitted to A and to B (the FID formula):
              |mu_A - mu_B|^2 + tr(S_A) + tr(S_B) - 2 tr((S_A S_B)^1/2); the last trace is the nuclear
              norm of Ac Bc^T / sqrt((n_A - 1)(n_B - 1)) (Ac, Bc centred), exact without a d x d square root
  mmd_test    the MMD's permutation p-value: the pooled rows' labels shuffled n_perm times,
              p = (1 + #{permuted >= observed}) / (1 + n_perm); exact under exchangeability (the two sets
              drawn from one distribution), whatever the sizes

`unlike_people` is the verdict "unlike people by embedding": the simulated dialogues' vectors against
people's, flagged when the MMD test's p is below alpha. A plain function of two arrays, so a registry
of verdicts checks it against planted truth (tests/analysis/realism: people against people is flagged
at about alpha; a shifted set is flagged).
"""
from __future__ import annotations

import numpy as np

from esc_eval.analysis.checks.registry import VerdictCheck, register_check

PERM_BATCH = 256  # permutations per matrix product (memory: pooled rows x this many floats)


def nn_cosine(a: np.ndarray, b: np.ndarray, chunk: int = 2048) -> float:
    """Mean over A's rows of the largest cosine to a row of B (NaN when either is empty)."""
    if not len(a) or not len(b):
        return float("nan")
    best = [np.max(a[i:i + chunk] @ b.T, axis=1) for i in range(0, len(a), chunk)]
    return float(np.mean(np.concatenate(best)))


def _sq_dists(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    d = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * (x @ y.T)
    return np.clip(d, 0.0, None)


def bandwidth(z: np.ndarray) -> float:
    """The median distance between distinct rows of z (1 when all rows coincide)."""
    d = np.sqrt(_sq_dists(z, z))[np.triu_indices(len(z), 1)]
    d = d[d > 1e-9]
    return float(np.median(d)) if len(d) else 1.0


def _kernel(x: np.ndarray, y: np.ndarray, s: float) -> np.ndarray:
    return np.exp(-_sq_dists(x, y) / (2.0 * s * s))


def mmd(x: np.ndarray, y: np.ndarray, s: float | None = None) -> float:
    """The biased MMD estimate between x and y (see the module docstring); NaN when either is empty."""
    if not len(x) or not len(y):
        return float("nan")
    s = s or bandwidth(np.vstack([x, y]))
    v = _kernel(x, x, s).mean() + _kernel(y, y, s).mean() - 2.0 * _kernel(x, y, s).mean()
    return float(np.sqrt(max(v, 0.0)))


def mmd_test(x: np.ndarray, y: np.ndarray, n_perm: int = 1000, seed: int = 0) -> tuple[float, float]:
    """(MMD of x against y, its permutation p-value); p NaN when either side is empty or n_perm is 0."""
    if not len(x) or not len(y):
        return float("nan"), float("nan")
    z = np.vstack([x, y])
    n, total = len(x), len(z)
    k = _kernel(z, z, bandwidth(z))
    k_sum = k.sum()

    def stat(a: np.ndarray) -> np.ndarray:
        """MMD^2 for each column of the 0/1 matrix a (1 = in the first set)."""
        ka = k @ a
        sxx = (a * ka).sum(0)
        sxy = ((1.0 - a) * ka).sum(0)
        syy = k_sum - sxx - 2.0 * sxy
        m = total - n
        return sxx / n ** 2 + syy / m ** 2 - 2.0 * sxy / (n * m)

    first = np.zeros((total, 1))
    first[:n] = 1.0
    observed = float(stat(first)[0])
    if not n_perm:
        return float(np.sqrt(max(observed, 0.0))), float("nan")
    rng = np.random.default_rng(seed)
    above = 0
    for start in range(0, n_perm, PERM_BATCH):
        p = min(PERM_BATCH, n_perm - start)
        a = np.zeros((total, p))
        for j in range(p):
            a[rng.choice(total, n, replace=False), j] = 1.0
        above += int((stat(a) >= observed - 1e-12).sum())
    return float(np.sqrt(max(observed, 0.0))), (1 + above) / (1 + n_perm)


def frechet(x: np.ndarray, y: np.ndarray) -> float:
    """The Frechet distance between Gaussians fitted to x and y (NaN with fewer than 2 rows a side)."""
    if len(x) < 2 or len(y) < 2:
        return float("nan")
    mx, my = x.mean(0), y.mean(0)
    xc, yc = x - mx, y - my
    tr_x = float((xc * xc).sum() / (len(x) - 1))
    tr_y = float((yc * yc).sum() / (len(y) - 1))
    cross = float(np.linalg.svd(xc @ yc.T, compute_uv=False).sum() / np.sqrt((len(x) - 1) * (len(y) - 1)))
    return max(0.0, float(((mx - my) ** 2).sum()) + tr_x + tr_y - 2.0 * cross)


def unlike_people(simulated: np.ndarray, people: np.ndarray, *, alpha: float = 0.05, n_perm: int = 1000,
                  seed: int = 0) -> dict:
    """The verdict "unlike people by embedding": one vector per simulated dialogue against one per
    person's dialogue (rows: unit vectors). flagged = the MMD permutation test's p < alpha."""
    value, p = mmd_test(np.asarray(simulated, dtype=np.float64), np.asarray(people, dtype=np.float64), n_perm, seed)
    return {"flagged": bool(p < alpha) if p == p else False, "p": p, "mmd": value, "alpha": alpha,
            "n_simulated": int(len(simulated)), "n_people": int(len(people))}


SHIFT = 0.3  # the planted shift of the check below, in the draws' sd along one direction
DIM = 16


def _planted_check(r):
    """One planted replicate (analysis/checks), on data drawn here, not through the jobs or an embedding
    model (the scenario "drawn"): `size` simulated and `size` people's vectors, each a normal draw in 16
    dimensions around a common direction, normalised to unit length; null: both sides from one
    distribution; planted: the simulated side's draws moved by SHIFT sd along another direction. The
    verdict "unlike people" is the flag (its permutation test at n_perm = n_boot)."""
    from esc_eval.analysis.checks.registry import PLANTED, Outcome

    rng = np.random.default_rng([r.seed, r.size, 13])
    centre = np.zeros(DIM)
    centre[0] = 2.0

    def draw(shift: float) -> np.ndarray:
        x = centre + rng.normal(size=(r.size, DIM))
        x[:, 1] += shift
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    out = unlike_people(draw(SHIFT if r.variant == PLANTED else 0.0), draw(0.0), n_perm=r.n_boot, seed=r.seed)
    return Outcome(flag=bool(out["flagged"]))


register_check(VerdictCheck(
    "realism-unlike", "Seeker realism by embedding: 'unlike people'", "esc_eval.analysis.realism.distances.unlike_people",
    ("section:seeker_realism",), "drawn", "embedding_shift", _planted_check,
    flag="unlike people by embedding (MMD permutation test, p < 0.05)",
    unit="dialogues a side; drawn directly, not through the jobs or the embedding model"))
