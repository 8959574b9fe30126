"""How far the panel's judges agree: per dimension (and the seven pooled, "all"), Krippendorff's alpha
(ordinal) over dialogues x judges with a percentile bootstrap interval resampling cards (a card's
dialogues together, _card_draws); the quadratic-weighted kappa of every judge pair
(analysis.annotation.agreement.pairwise_kappa); and the judge that stands out (3+ judges): each judge's
leave-one-out gain (the pooled alpha without it minus with it) gets a one-sided lower bound at 5% / k
(Bonferroni over the k judges): the gain less the t(K - 1) quantile times the sd of its bootstrap (the
same resamples as the interval; K cards); a judge is named only when its bound is above 0 (of several,
the largest gain), else none stands out. With equal judges one judge's leaving always raises alpha a
little, so the largest gain alone names someone every time (the validity bench measured 100% false
positives, docs/guides/validity.md).

The point estimates are the `krippendorff` package's. The bootstrap is written here: alpha is a
function of the coincidence matrix, which is a sum of one matrix per unit (Krippendorff 2011), so a
resample's matrix is its unit counts times the per-unit matrices, one matrix product for all draws;
calling the package per draw would take about 25 ms x 200 draws x 8 scopes on 8,500 dialogues. The
tests hold the two equal. Items are the judges' labels (0-4), each judge's latest row per dialogue.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.annotation.agreement import pairwise_kappa
from esc_eval.analysis.checks.floors import NOT_SHOWN, caveat, gate
from esc_eval.analysis.panels.panel_scores import N_LABELS, latest_rows
from esc_eval.analysis.panels.panel_spec import PanelSpec
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

ALPHA_COLUMNS = ["dimension", "n_dialogues", "n_pairable", "alpha", "alpha_lo", "alpha_hi", "mean_kappa", "note"]
OUTLIER_COLUMNS = ["judge", "alpha_without", "alpha_change", "change_lo", "stands_out", "mean_kappa_with_others"]
CHECK = "panel-agreement"  # its planted-truth check (panel_checks.py)
ALPHA_BOOT = 1000  # alpha's resamples: with 200 its 2.5% and 97.5% percentiles covered 93.5-95% of 400 planted
# panels of 655 cards (the end resamples are noisy), with 1,000 95.5-96% (docs/guides/validity.md)
OUTLIER_LEVEL = 0.05  # the family-wise level of naming a judge that stands out (Bonferroni over the judges)


def alpha_ordinal(data: np.ndarray) -> float:
    """The package's ordinal alpha of a judges x units array (NaN = missing) on the labels 0-4; NaN when undefined."""
    import krippendorff

    values = data[~np.isnan(data)]
    if data.shape[0] < 2 or np.unique(values).size < 2 or not ((~np.isnan(data)).sum(axis=0) >= 2).any():
        return float("nan")
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal",
                                    value_domain=list(range(N_LABELS))))


def unit_coincidences(data: np.ndarray) -> np.ndarray:
    """units x 5 x 5: each unit's share of the coincidence matrix, n_uc n_uk / (m_u - 1) off the diagonal
    and n_uc (n_uc - 1) / (m_u - 1) on it (m_u = the unit's values; units with fewer than 2 add nothing)."""
    present = ~np.isnan(data)
    counts = np.zeros((data.shape[1], N_LABELS))
    for k in range(N_LABELS):
        counts[:, k] = ((data == k) & present).sum(axis=0)
    m = counts.sum(axis=1)
    c = counts[:, :, None] * counts[:, None, :] - counts[:, :, None] * np.eye(N_LABELS)[None]
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.where((m >= 2)[:, None, None], c / (m - 1)[:, None, None], 0.0)
    return c


def alpha_from_coincidence(o: np.ndarray) -> np.ndarray:
    """Ordinal alpha of coincidence matrices o[..., 5, 5]: 1 - (n - 1) sum o_ck d_ck / sum n_c n_k d_ck with
    d_ck = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2 from the matrix's own marginals n_c (NaN when undefined)."""
    n_c = o.sum(axis=-1)
    n = n_c.sum(axis=-1)
    cum = np.cumsum(n_c, axis=-1)
    c, k = np.indices((N_LABELS, N_LABELS))
    lo, hi = np.minimum(c, k), np.maximum(c, k)
    # sum_{g=lo..hi} n_g = cum[hi] - cum[lo] + n_lo
    span = cum[..., hi] - cum[..., lo] + n_c[..., lo]
    d = (span - (n_c[..., c] + n_c[..., k]) / 2) ** 2
    observed = (o * d).sum(axis=(-2, -1))
    expected = (n_c[..., :, None] * n_c[..., None, :] * d).sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = 1 - (n - 1) * observed / expected
    return np.where(expected > 0, out, np.nan)


def _draw_counts(n_units: int, n_boot: int, seed: int) -> np.ndarray:
    """n_boot x n_units: how often each unit (dialogue) is drawn in each resample with replacement."""
    idx = np.random.default_rng(seed).integers(0, n_units, size=(n_boot, n_units))
    flat = idx + (np.arange(n_boot) * n_units)[:, None]
    return np.bincount(flat.ravel(), minlength=n_boot * n_units).reshape(n_boot, n_units).astype(float)


def _card_draws(scores: pd.DataFrame, ids: list[str], n_boot: int, seed: int) -> tuple[np.ndarray, int]:
    """(n_boot x dialogues, the number of cards K): each dialogue's weight in each resample of cards (a card's dialogues of every target
    together, drawn with replacement; a dialogue without a card is its own). Resampling dialogues alone
    ignored that one card's dialogues share its difficulty: the planted check found the interval covering
    75% and a judge named in 12% of null panels at 25 cards."""
    cards = pd.Series(ids, index=ids)
    if "card_id" in scores.columns:
        known = scores.drop_duplicates("dialogue_id").set_index("dialogue_id")["card_id"]
        known = known[known.notna()].astype(str)
        cards = cards.where(~cards.index.isin(known.index), known.reindex(cards.index))
    unique, inverse = np.unique(cards.to_numpy(str), return_inverse=True)
    return _draw_counts(len(unique), n_boot, seed)[:, inverse], len(unique)


def label_cube(scores: pd.DataFrame, judges: list[str]) -> tuple[np.ndarray, list[str]]:
    """judges x dialogues x 7 labels (NaN = none) from each judge's latest rows, and the dialogue ids."""
    rows = latest_rows(scores, judges)
    wide = rows.pivot_table(index="dialogue_id", columns=["dimension", "judge"], values="score", aggfunc="first",
                            dropna=False)
    cols = pd.MultiIndex.from_product([DIMENSION_NAMES, judges])
    wide = wide.reindex(columns=cols)
    cube = wide.to_numpy(dtype=float).reshape(len(wide), len(DIMENSION_NAMES), len(judges)).transpose(2, 0, 1)
    return cube, [str(d) for d in wide.index]


def panel_agreement(scores: pd.DataFrame, spec: PanelSpec, n_boot: int = ALPHA_BOOT, seed: int = 0,
                    confidence: float = 0.95) -> dict:
    """{"alpha": DataFrame ALPHA_COLUMNS per dimension and "all", "pairs": pairwise kappas (judge_a, judge_b,
    dimension, n, kappa, note), "outliers": OUTLIER_COLUMNS per judge (3+ judges), "most_disagreeing":
    {judge, alpha_without, alpha_change, ...} or None, "note": why none}."""
    judges = spec.names
    cube, ids = label_cube(scores, judges)  # judges x dialogues x 7
    n_dlg = cube.shape[1]
    per_dim = np.stack([unit_coincidences(cube[:, :, d]) for d in range(len(DIMENSION_NAMES))], axis=1) \
        if n_dlg else np.zeros((0, len(DIMENSION_NAMES), N_LABELS, N_LABELS))
    draws, n_cards = _card_draws(scores, ids, n_boot, seed) if n_boot > 0 and n_dlg >= 2 else (None, 0)
    long = latest_rows(scores, judges).rename(columns={"judge": "annotator"})
    long = long[long["score"].notna()][["annotator", "dialogue_id", "dimension", "score"]]
    pairs = pairwise_kappa(long).rename(columns={"annotator_a": "judge_a", "annotator_b": "judge_b"}) if not long.empty \
        else pd.DataFrame(columns=["judge_a", "judge_b", "dimension", "n", "kappa", "note"])
    tail = (1 - confidence) / 2
    rows = []
    for i, dim in enumerate([*DIMENSION_NAMES, "all"]):
        data = cube[:, :, i] if dim != "all" else cube.reshape(len(judges), -1)
        units = per_dim[:, i] if dim != "all" else per_dim.sum(axis=1)  # "all": a dialogue's seven units together
        pairable = int(((~np.isnan(data)).sum(axis=0) >= 2).sum())
        alpha = alpha_ordinal(data)
        lo = hi = float("nan")
        note = "" if pairable else "no item scored by 2 or more judges"
        if alpha != alpha and pairable:
            note = "every label the same: alpha undefined"
        if draws is not None and alpha == alpha:
            boot = alpha_from_coincidence(np.einsum("bu,ucK->bcK", draws, units, optimize=True))
            boot = boot[~np.isnan(boot)]
            if len(boot):
                lo, hi = float(np.quantile(boot, tail)), float(np.quantile(boot, 1 - tail))
        k = pairs.loc[pairs["dimension"] == dim, "kappa"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean_kappa = float(k.mean()) if k.notna().any() else float("nan")
        rows.append({"dimension": dim, "n_dialogues": int((~np.isnan(data).all(axis=0)).sum()) if dim != "all" else n_dlg,
                     "n_pairable": pairable, "alpha": alpha, "alpha_lo": lo, "alpha_hi": hi, "mean_kappa": mean_kappa,
                     "note": note})
    unchecked = caveat(CHECK, n_cards) if n_cards >= 2 else ""
    for r in rows:
        if unchecked and r["alpha_lo"] == r["alpha_lo"]:
            r["note"] = "; ".join(filter(None, [r["note"], f"interval {unchecked}"]))
    table = pd.DataFrame(rows, columns=ALPHA_COLUMNS)
    outliers, worst, note = _outliers(cube, judges, pairs, float(table.loc[table["dimension"] == "all", "alpha"].iloc[0]),
                                      draws if n_cards >= 2 else None, n_cards)
    if worst is not None or note.startswith("no judge stands out"):  # a verdict was reached: the floors' say on it
        shown, why = gate(CHECK, n_cards, worst["judge"] if worst is not None else "none", finds=worst is not None)
        if shown == NOT_SHOWN:
            worst, note = None, f"no judge named: {why}"
        elif why:
            note = f"{note} ({why})"
    return {"alpha": table, "pairs": pairs, "outliers": outliers, "most_disagreeing": worst, "note": note}


def _outliers(cube: np.ndarray, judges: list[str], pairs: pd.DataFrame, alpha_all: float, draws: np.ndarray | None,
              n_cards: int):
    """Per judge: the pooled alpha without it, its change, the change's one-sided lower bound (module doc),
    whether it stands out, its mean kappa with the others ("all"); the judge named (or None) and why."""
    if len(judges) < 3:
        return (pd.DataFrame(columns=OUTLIER_COLUMNS), None,
                "2 judges: removing one leaves no agreement to compare, so no judge is singled out")
    level = OUTLIER_LEVEL / len(judges)
    boot_all = _boot_alpha(cube, draws)
    rows = []
    allp = pairs[pairs["dimension"] == "all"]
    for i, j in enumerate(judges):
        rest = np.delete(cube, i, axis=0)
        without = alpha_ordinal(rest.reshape(len(judges) - 1, -1))
        lo = float("nan")
        if boot_all is not None and without == without:
            gain = _boot_alpha(rest, draws) - boot_all
            gain = gain[~np.isnan(gain)]
            if len(gain) >= 2:  # the gain less t(K - 1) x the bootstrap's sd (small-sample corrected), K cards:
                # the percentile bound named a judge in 15% of null panels at 25 cards (self_preference.py's
                # did_estimate was fixed the same way)
                half = stats.t.ppf(1 - level, n_cards - 1) * gain.std(ddof=1) * np.sqrt(n_cards / (n_cards - 1))
                lo = float(without - alpha_all - half)
        k = allp.loc[(allp["judge_a"] == j) | (allp["judge_b"] == j), "kappa"]
        rows.append({"judge": j, "alpha_without": without, "alpha_change": without - alpha_all, "change_lo": lo,
                     "stands_out": bool(lo > 0), "mean_kappa_with_others": float(k.mean()) if k.notna().any() else float("nan")})
    table = pd.DataFrame(rows, columns=OUTLIER_COLUMNS)
    if table["alpha_change"].isna().all():
        return table, None, "alpha undefined with a judge left out: no judge singled out"
    if table["change_lo"].isna().all():
        return table, None, "no bootstrap of the leave-one-out gains (too few dialogues or no resamples): no judge singled out"
    out = table[table["stands_out"]]
    if out.empty:
        return table, None, (f"no judge stands out: no judge's leave-one-out gain in alpha is above 0 at "
                             f"{OUTLIER_LEVEL:.0%} (one-sided bootstrap bound, Bonferroni over {len(judges)} judges)")
    worst = out.sort_values("alpha_change", ascending=False, kind="stable").iloc[0].to_dict()
    return table, worst, ""


def _boot_alpha(cube: np.ndarray, draws: np.ndarray | None) -> np.ndarray | None:
    """The pooled alpha of a judges x dialogues x 7 cube under each resample of dialogues (None: no draws)."""
    if draws is None:
        return None
    units = sum(unit_coincidences(cube[:, :, d]) for d in range(cube.shape[2]))
    return alpha_from_coincidence(np.einsum("bu,ucK->bcK", draws, units, optimize=True))
