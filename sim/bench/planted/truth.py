"""The truth a plan plants (scenarios.py), computed from the planted models' own arithmetic
(serve/backends/planted_math.py) and their defaults (a PlantedModel built from the plan's options),
never estimated from the runs the checks read.

Keys (labels on the 0-4 scale; the analyses print x25):
  judge_mean[judge][target]       the judge's expected label of a target's dialogue (card effect,
                                  the judge's noise and the target's lengths integrated out)
  judge_expected[judge][target]   the judge's expected stated score (sum k P(k) of its P(0..4), the value
                                  a panel's mean rule reads), same integration
  people_mean[target]             a person's expected score of a target's dialogue
  length_slope[judge]             the judge's expected label per word of the target's replies,
                                  within a target (the population OLS slope over the lengths drawn)
  first_share[judge]              the pairwise judge's share of picks of the first-shown dialogue
  quality[target]                 the planted quality (what the pairwise judge compares)
  round_mean[target][k]           the expected label of reply k (a per-reply judge) or of the dialogue cut
                                  after round k (a prefix judge)
  change_round[target]            the round its planted change starts (None: nothing changes)
  setting_mean[strategy][target]  the expected label under each seeker setting
  panel_coincidence               the panel's population coincidence matrix (5 x 5, summing to 1): the
                                  share of ordered pairs of two judges' labels of one dialogue that are
                                  (c, k), pooled over the judges' pairs (Krippendorff's alpha is a function
                                  of it; exact, not drawn: the 60,000 draws that gave it before missed
                                  alpha by 0.0025, a sixth of its standard error at 655 cards)
  samples                         large draws from the planted model for statistics with no closed
                                  form: probs/labels (J2's P(0..4) and a person's label of the same units)
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from esc_eval.serve.backends import planted_math as pm
from esc_eval.serve.backends.planted import PlantedModel, quality
from esc_eval.sim.bench.planted.scenarios import HARD_CONTROL, Plan, plan as make_plan

SAMPLE_UNITS = 60000  # the population draws: an ECE of a calibrated judge estimated at about 0.003 from them


def _model(role: str, options: dict[str, Any]) -> PlantedModel:
    return PlantedModel(role, **options)


def _words(target: PlantedModel) -> np.ndarray:
    return np.arange(target.lo, target.hi + 1, dtype=float)  # every length is equally likely


def _bias(judge: PlantedModel, target: PlantedModel, words: np.ndarray) -> np.ndarray:
    own = judge.own if judge.family and judge.family == (target.family or None) else 0.0
    return judge.beta * words / 100.0 + own + judge.offset


def _label(judge: PlantedModel, means: np.ndarray) -> np.ndarray:
    return pm.expected_label(means, pm.center_sd(judge.card_sd, judge.sigma),
                             pm.stated_spread(judge.card_sd, judge.sigma, judge.people_sd))


def judge_mean(judge: PlantedModel, target: PlantedModel, quality: float | None = None) -> float:
    w = _words(target)
    q = target.q if quality is None else quality
    return float(_label(judge, q + _bias(judge, target, w)).mean())


def judge_expected(judge: PlantedModel, target: PlantedModel) -> float:
    """E[sum_k k P(k)] of the judge's stated P(0..4) over the card effect and its noise (the stated centre
    N(m + b, center_sd^2): Gauss-Hermite, 60 nodes) and the target's lengths."""
    z, w = np.polynomial.hermite_e.hermegauss(60)
    w = w / w.sum()
    means = target.q + _bias(judge, target, _words(target))
    centers = means[:, None] + pm.center_sd(judge.card_sd, judge.sigma) * z[None, :]
    p = pm.label_probs(centers, pm.stated_spread(judge.card_sd, judge.sigma, judge.people_sd), judge.T)
    return float(((p * np.arange(p.shape[-1])).sum(axis=-1) * w).sum(axis=-1).mean())


def length_slope(judge: PlantedModel, targets: list[PlantedModel]) -> float:
    """The pooled within-target slope of the expected label on the words per reply."""
    cov = var = 0.0
    for t in targets:
        w = _words(t)
        g = _label(judge, t.q + _bias(judge, t, w))
        cov += float(((w - w.mean()) * (g - g.mean())).sum())
        var += float(((w - w.mean()) ** 2).sum())
    return cov / var if var else 0.0


def panel_coincidence(judges: list[PlantedModel], targets: list[PlantedModel], nodes: int = 80) -> np.ndarray:
    """The population coincidence matrix of the judges' labels (the module doc): per target (equally
    many dialogues each) and length, each judge's P(label = c) given the card effect z (its centre
    m + b + rho (card_sd z + e), e ~ N(0, sigma^2) its own: labels step at label_thresholds), the pairs'
    products integrated over z ~ N(0, 1) by Gauss-Hermite; the judges of a dialogue share z."""
    z, wz = np.polynomial.hermite_e.hermegauss(nodes)
    wz = wz / wz.sum()
    out = np.zeros((pm.LABELS, pm.LABELS))
    pairs = [(a, b) for a in range(len(judges)) for b in range(len(judges)) if a != b]
    for t in targets:
        w = _words(t)
        probs = []
        for j in judges:
            rho = pm.shrink(j.card_sd, j.sigma)
            center = (t.q + _bias(j, t, w))[:, None] + rho * j.card_sd * z[None, :]  # lengths x nodes
            ge = pm.label_at_least(center, pm.label_thresholds(pm.stated_spread(j.card_sd, j.sigma, j.people_sd)),
                                   rho * j.sigma)
            probs.append(ge[..., :-1] - ge[..., 1:])  # P(label = c): lengths x nodes x 5
        weight = wz[None, :] / len(w)
        for a, b in pairs:
            out += np.einsum("wn,wnc,wnk->ck", weight, probs[a], probs[b]) / (len(pairs) * len(targets))
    return out


def _samples(judges: dict[str, PlantedModel], targets: dict[str, PlantedModel]) -> dict[str, Any]:
    """Draws of the duo's units: each a target, its length, a card effect; J2's P(0..4) and a person's
    label (a population: the same for every replicate)."""
    rng = np.random.default_rng(2026)
    names = list(targets)
    pick = rng.integers(0, len(names), SAMPLE_UNITS)
    ref = judges["J2"]
    u = rng.normal(0.0, ref.card_sd, SAMPLE_UNITS)
    q = np.array([targets[names[i]].q for i in pick])
    words = np.array([rng.integers(targets[names[i]].lo, targets[names[i]].hi + 1) for i in pick], dtype=float)
    families = np.array([targets[names[i]].family for i in pick])
    probs = None
    for name, j in judges.items():  # every judge draws its noise, so J2's draws are what they were
        bias = j.beta * words / 100.0 + np.where(families == j.family, j.own, 0.0) * bool(j.family) + j.offset
        center = q + bias + pm.shrink(j.card_sd, j.sigma) * (u + rng.normal(0.0, j.sigma, SAMPLE_UNITS))
        if name == "J2":
            probs = pm.label_probs(center, pm.stated_spread(j.card_sd, j.sigma, j.people_sd), j.T)
    person = np.clip(np.floor(q + u + ref.people_sd * rng.normal(size=SAMPLE_UNITS) + 0.5), 0, 4).astype(int)
    return {"probs": probs, "labels": person}


@lru_cache(maxsize=16)
def scenario_truth(scenario: str, variant: str) -> dict[str, Any]:
    """truth() of a scenario's variant, computed once per process (it is the same for every replicate)."""
    return truth(make_plan(scenario, variant))


def truth(plan: Plan) -> dict[str, Any]:
    """The truth of `plan` (the module doc's keys that apply to it); replicates differ in their draws,
    not in what is planted."""
    targets = {n: _model("target", o) for n, o in plan.targets.items()}
    out: dict[str, Any] = {"quality": {n: t.q for n, t in targets.items()}}
    if plan.judges:
        judges = {n: _model("judge", o) for n, o in plan.judges.items()}
        out["judge_mean"] = {j: {n: judge_mean(m, t) for n, t in targets.items()} for j, m in judges.items()}
        out["judge_expected"] = {j: {n: judge_expected(m, t) for n, t in targets.items()} for j, m in judges.items()}
        out["length_slope"] = {j: length_slope(m, list(targets.values())) for j, m in judges.items()}
        ref = next(iter(judges.values()))
        out["people_mean"] = {n: pm.expected_person(t.q, ref.card_sd, ref.people_sd) for n, t in targets.items()}
        if len(plan.strategies) > 1:
            out["setting_mean"] = {s: {n: judge_mean(ref, t, quality(t, 1, s == HARD_CONTROL)) for n, t in targets.items()}
                                   for s in plan.strategies}
        if "J2" in judges:
            out["samples"] = _samples(judges, targets)
            out["panel_coincidence"] = panel_coincidence(list(judges.values()), list(targets.values()))
    if plan.pairwise is not None:
        out["first_share"] = {"P": _model("judge", plan.pairwise).first}
    if plan.by_round is not None:
        judge = _model("judge", plan.by_round)
        out["round_mean"] = {}
        for n, t in targets.items():
            q = np.array([quality(t, k, False) for k in range(1, 6)])
            # a per-reply judge rates reply k alone; a prefix judge the dialogue cut after round k
            out["round_mean"][n] = {k: judge_mean(judge, t, float(q[k - 1] if judge.reply else q[:k].mean()))
                                    for k in range(1, 6)}
        out["change_round"] = {n: t.from_round if t.drop else None for n, t in targets.items()}
    return out
