"""The arithmetic of the planted models (planted.py): the tags their turns carry, the draws they make
and the distributions they state, as pure functions, so that the models and whoever needs the truth
they plant (sim/bench/planted/truth.py) compute one thing one way.

Tags: a planted target writes `⟦q=2.500 f=a w=87⟧` at the head of each reply (the quality planted
in it, its family, its word count with the tag); a planted seeker `⟦s=3f2a91c0 r=2 h=1⟧` (its card's
key, the round, whether a hard seeker setting is on). A judge reads the tags of what it is shown, so
whatever the judge is not shown (a windowed middle, the other dialogue of a pair) it does not read.

The judge's view of one (dialogue, dimension) prompt: m = the mean quality of the replies it reads,
b = its biases (beta per 100 words of those replies, `self` for its own family, `offset`), u = the
card's effect (N(0, card_sd^2), one draw per card and replicate seed, shared by every judge and by
the people), e = its own noise (N(0, sigma^2), one draw per prompt, judge and seed). It states a
distribution over the labels 0-4 centred on m + b + rho (u + e), spread sqrt(rho sigma^2 +
people_sd^2) with rho = card_sd^2 / (card_sd^2 + sigma^2): P(a person's score = k | what it saw)
when b = 0 (a calibrated judge), sharpened by the temperature T (T < 1: overconfident). Its label
is that distribution's most probable one. People score m + u + people_sd x N(0, 1), rounded and
clipped to 0-4.
"""
from __future__ import annotations

import hashlib
import math
import re
from statistics import NormalDist
from typing import Any, Iterable

import numpy as np
from scipy import stats

LABELS = 5  # 0..4
_STD = NormalDist()
_TAG = re.compile(r"\u27e6([^\u27e7]*)\u27e7")
_WORDS = re.compile(r"[^\W_]+")


def digest(*parts: Any) -> int:
    """A stable 64-bit hash of the parts (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:8], "big")


def uniform(*parts: Any) -> float:
    """A draw in [0, 1), a pure function of the parts."""
    return (digest(*parts) >> 11) / float(1 << 53)


def normal(*parts: Any) -> float:
    """A standard normal draw, a pure function of the parts."""
    return _STD.inv_cdf(min(max(uniform(*parts), 1e-12), 1 - 1e-12))  # scipy's per-call overhead is 50x this


def count_words(text: str) -> int:
    return len(_WORDS.findall(text))


def tag(**fields: Any) -> str:
    return "\u27e6" + " ".join(f"{k}={v}" for k, v in fields.items()) + "\u27e7"


def read_tags(text: str) -> list[dict[str, str]]:
    """Every tag in `text`, in order, as {field: value}."""
    return [dict(part.split("=", 1) for part in body.split() if "=" in part) for body in _TAG.findall(text)]


_JUDGED = re.compile(r"\u27e6(?:q=(?P<q>[^ \u27e7]+) f=(?P<f>[^ \u27e7]*) w=(?P<w>\d+)|s=(?P<s>\w+) r=(?P<r>\d+) h=\d)\u27e7")


def judged_tags(text: str) -> list[dict[str, str]]:
    """read_tags of the tags a judge uses (the targets' and the seekers' as tag() writes them), at a
    fraction of its cost: a judge reads thousands of prompts a second in a planted run."""
    out = []
    for m in _JUDGED.finditer(text):
        q, f, w, s, r = m.groups()
        out.append({"q": q, "f": f, "w": w} if s is None else {"s": s, "r": r})
    return out


def split_dialogues(tags: Iterable[dict[str, str]]) -> list[list[dict[str, str]]]:
    """The tags of each dialogue shown: a seeker tag of round 1 after the first starts the next one
    (a pairwise prompt shows two dialogues; round 1 is never windowed out)."""
    out: list[list[dict[str, str]]] = [[]]
    for t in tags:
        if t.get("r") == "1" and "s" in t and any("s" in x for x in out[-1]):
            out.append([])
        out[-1].append(t)
    return out if out[0] else []


def dialogue_view(tags: list[dict[str, str]]) -> dict[str, Any]:
    """What a judge reads of one dialogue: the card key, the replies' mean quality and words, their
    family, and how many replies it read."""
    q = [float(t["q"]) for t in tags if "q" in t]
    w = [float(t.get("w", 0)) for t in tags if "q" in t]
    return {"card": next((t["s"] for t in tags if "s" in t), ""), "n": len(q),
            "q": sum(q) / len(q) if q else float("nan"), "w": sum(w) / len(w) if w else 0.0,
            "family": next((t["f"] for t in tags if "q" in t and t.get("f")), None)}


def card_effect(card: str, seed: int, card_sd: float) -> float:
    """The card's effect u, shared by every judge and the people of one replicate."""
    return card_sd * normal("card", seed, card) if card_sd else 0.0


def shrink(card_sd: float, sigma: float) -> float:
    """rho: how much of what the judge saw beyond m is the card's (the rest is its own noise)."""
    total = card_sd ** 2 + sigma ** 2
    return card_sd ** 2 / total if total > 0 else 1.0


def stated_spread(card_sd: float, sigma: float, people_sd: float) -> float:
    return math.sqrt(shrink(card_sd, sigma) * sigma ** 2 + people_sd ** 2)


def scalar_probs(center: float, spread: float, temperature: float = 1.0) -> list[float]:
    """label_probs for one centre in plain floats (a judge call's: numpy's and scipy's per-call overhead
    would be most of a planted run's time)."""
    if spread <= 0:
        k = min(max(math.floor(center + 0.5), 0), LABELS - 1)
        return [1.0 if i == k else 0.0 for i in range(LABELS)]
    cdf = [0.0] + [0.5 * (1 + math.erf((k + 0.5 - center) / (spread * math.sqrt(2)))) for k in range(LABELS - 1)] + [1.0]
    p = [max(cdf[i + 1] - cdf[i], 1e-300) for i in range(LABELS)]
    if temperature != 1.0:
        p = [x ** (1.0 / temperature) for x in p]
    total = sum(p)
    return [x / total for x in p]


def label_probs(center, spread: float, temperature: float = 1.0) -> np.ndarray:
    """P(clip(round(center + spread Z)) = k), k = 0..4, along a new last axis; sharpened (T < 1) or
    softened (T > 1) by P^(1/T), renormalised."""
    c = np.asarray(center, dtype=float)[..., None]
    edges = np.array([-np.inf, 0.5, 1.5, 2.5, 3.5, np.inf])
    if spread <= 0:
        p = ((c >= edges[:-1]) & (c < edges[1:])).astype(float)
    else:
        cdf = stats.norm.cdf((edges - c) / spread)
        p = np.diff(cdf, axis=-1)
    if temperature != 1.0:
        p = np.power(np.clip(p, 1e-300, 1.0), 1.0 / temperature)
    return p / p.sum(axis=-1, keepdims=True)


def argmax_label(center, spread: float) -> np.ndarray:
    return np.argmax(label_probs(center, spread), axis=-1)


def label_thresholds(spread: float) -> np.ndarray:
    """The centres at which the most probable label steps from k to k + 1 (k = 0..3): where the two
    labels are equally probable (found by bisection; k + 0.5 where the clipping does not reach)."""
    from scipy.optimize import brentq

    def gap(c: float, k: int) -> float:
        p = label_probs(c, spread)
        return float(p[k + 1] - p[k])

    out = []
    for k in range(LABELS - 1):
        lo, hi = k - 1.0, k + 1.5
        out.append(brentq(gap, lo, hi, args=(k,), xtol=1e-10) if spread > 0 and gap(lo, k) < 0 < gap(hi, k) else k + 0.5)
    return np.array(out)


def label_at_least(center, thresholds: np.ndarray, center_sd: float) -> np.ndarray:
    """P(argmax label >= k), k = 0..5, along a new last axis, when the stated centre is N(center, center_sd^2)
    (1 at k = 0, 0 at k = 5; a step at each of label_thresholds' in between)."""
    c = np.asarray(center, dtype=float)[..., None]
    inner = stats.norm.cdf((c - thresholds) / center_sd) if center_sd > 0 else (c >= thresholds).astype(float)
    return np.concatenate([np.ones(c.shape), inner, np.zeros(c.shape)], axis=-1)


def expected_label(mean, center_sd: float, spread: float) -> np.ndarray:
    """E[argmax label] when the stated centre is N(mean, center_sd^2), for each mean (exact: the
    label is a step function of the centre, label_thresholds)."""
    return label_at_least(mean, label_thresholds(spread), center_sd)[..., 1:-1].sum(axis=-1)


def card_key(problem: str) -> str:
    """The key a planted seeker tags its card with: its problem's text, hashed."""
    return f"{digest(problem.strip()):016x}"[:8]


def center_sd(card_sd: float, sigma: float) -> float:
    """The sd of the stated centre rho (u + e) around m + b."""
    return shrink(card_sd, sigma) * math.sqrt(card_sd ** 2 + sigma ** 2)


def expected_person(mean: float, card_sd: float, people_sd: float) -> float:
    """E[clip(round(mean + u + people_sd Z))] over the card effect and the person's noise."""
    sd = math.sqrt(card_sd ** 2 + people_sd ** 2)
    edges = np.array([0.5, 1.5, 2.5, 3.5])
    return float(stats.norm.sf((edges - mean) / sd).sum()) if sd > 0 else float(np.clip(np.floor(mean + 0.5), 0, 4))


def person_score(latent: float, *parts: Any, people_sd: float) -> int:
    """One person's score of one dimension: clip(round(latent + people_sd Z)), Z a pure function of the parts."""
    return int(np.clip(np.floor(latent + people_sd * normal("person", *parts) + 0.5), 0, 4))
