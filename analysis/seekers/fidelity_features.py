"""Features of a seeker that anyone can recompute, per dialogue, read the same way from real
help-seekers (esconv.py) and from simulated ones (a run's dialogue rows).

Seeker turns. A seeker turn is a run of consecutive seeker messages (sim/judging/distress.py
`seeker_runs`): ESConv's seekers often send two or three messages before the supporter answers,
a simulated seeker sends one per round.

Rounds. A simulated dialogue has 5 rounds (5 seeker turns); a human one has 13 seeker turns on
average. Every feature is computed on R aligned seeker turns per dialogue (R = 5 by default), so
a long human dialogue and a short simulated one are compared on the same amount of text:
  relative (default)  R seeker turns spread evenly from the first to the last: turn
                      floor(i x (n-1)/(R-1) + 0.5) for round i+1, so round 1 is the opening and
                      round R the closing turn on both sides (a dialogue of exactly R seeker turns
                      is read as it is). A dialogue with n < R seeker turns puts its turn j at round
                      1 + floor(j x (R-1)/(n-1) + 0.5): first at 1, last at R, rounds between empty.
  first               the first R seeker turns (the opening minutes of a human conversation).
  auto (the default of the comparison, fidelity_report.py)  relative where every simulated
                      dialogue was closed by its seeker (termination reason in SEEKER_CLOSED), else
                      first: a run cut at its round cap has no ending, and relative would set a
                      person's closing turn (thanks, goodbye) beside a cut (FailedESConv's people
                      written as 5-round runs against the other half of them: "closes with thanks
                      less than people" under relative, nothing under first).

Features (one value per dialogue; tokens: lower-cased words in English, Han characters in
Chinese, analysis/textmetrics tokenize):
  words_per_turn      mean tokens per aligned seeker turn
  question_share      share of aligned turns holding a question mark (? or ？)
  first_person_share  first-person singular tokens / all tokens (en: i, me, my, mine, myself, i'm,
                      i've, i'd, i'll; zh: 我)
  distinct_1/2        distinct-n of the aligned turns together, x100 (textmetrics distinct_n)
  repetition          the largest overlap of word bigrams between two aligned turns:
                      |B(a) & B(b)| / min(|B(a)|, |B(b)|) over pairs of turns with a bigram
                      (NaN with fewer than two such turns)
  thanks_early        share of rounds 1..R-1 with thanks or closure words (THANKS_RE)
  thanks_last         1 if round R holds thanks or closure words, else 0
  negativity_start/end  the lexicon's negativity (seekers/roleplay.py, -1..1) at round 1 / round R
  negativity_slope    least-squares slope of negativity over the rounds (< 0: cheers up)
  resolved_round      the first round after the first negative one whose negativity is < 0
                      (more positive than negative words); R + 1 if it never turns; NaN when no
                      round is negative
With a distress judge (its 0-4 rating of every seeker turn, sim/jobs/distress.py), aligned the
same way: distress_start, distress_end, distress_slope.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.seekers.roleplay import negativity
from esc_eval.analysis.textmetrics.metrics import distinct_n, tokenize
from esc_eval.sim.judging.distress_turns import seeker_runs

ROUNDS = 5
ALIGNMENTS = ("auto", "relative", "first")
# Termination reasons of a dialogue its seeker closed (a seeker that can end the conversation); a
# dialogue stopped at its round cap ("completed") was cut, not closed.
SEEKER_CLOSED = frozenset({"seeker_ended"})
KEYS = ["dialogue_id", "role_model", "strategy", "language"]
LEXICAL = ["words_per_turn", "question_share", "first_person_share", "distinct_1", "distinct_2", "repetition"]
COURSE = ["thanks_early", "thanks_last", "negativity_start", "negativity_end", "negativity_slope", "resolved_round"]
DISTRESS = ["distress_start", "distress_end", "distress_slope"]
FEATURES = LEXICAL + COURSE
FIRST_PERSON_EN = frozenset({"i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll"})
FIRST_PERSON_ZH = frozenset({"我"})
THANKS_RE = re.compile(
    r"\bthank|\bthanks\b|\bthx\b|\bappreciate|\bgrateful\b|\bbye\b|\bgoodbye\b|\btake care\b|"
    r"\bhave a (?:good|nice|great|lovely) (?:day|night|evening|one)\b|谢谢|感谢|多谢|谢了|再见|拜拜",
    re.IGNORECASE)
QUESTION_RE = re.compile(r"[?？]")


def resolve_alignment(align: str, simulated: pd.DataFrame, rounds: int = ROUNDS) -> tuple[str, str]:
    """(relative | first, why) for comparing `simulated` (dialogue rows) with people under `align`."""
    if align not in ALIGNMENTS:
        raise AnalysisInputError(f"alignment {align!r}: expected one of {', '.join(ALIGNMENTS)}")
    if align != "auto":
        return align, "as asked"
    reasons = simulated["termination_reason"] if "termination_reason" in simulated.columns else None
    if reasons is not None and len(reasons) and reasons.isin(SEEKER_CLOSED).all():
        return "relative", "auto: every simulated dialogue was closed by its seeker; both sides from the opening to the closing turn"
    return "first", (f"auto: the simulated dialogues stop at the round cap, where no seeker closed them, so people are "
                     f"read by their first {rounds} seeker turns too (an ending is compared only where the seeker ended)")


def aligned_positions(n: int, rounds: int = ROUNDS, align: str = "relative") -> list[tuple[int, int]]:
    """(seeker turn index from 0, round from 1) of the aligned turns of a dialogue with n seeker turns
    (align: relative or first; resolve_alignment turns auto into one of them)."""
    if align not in ("relative", "first"):
        raise AnalysisInputError(f"alignment {align!r}: expected relative or first")
    if n <= 0:
        return []
    if align == "first":
        return [(i, i + 1) for i in range(min(n, rounds))]
    if n == 1 or rounds == 1:
        return [(0, 1)]
    if n >= rounds:
        return [(int(np.floor(r * (n - 1) / (rounds - 1) + 0.5)), r + 1) for r in range(rounds)]
    return [(j, 1 + int(np.floor(j * (rounds - 1) / (n - 1) + 0.5))) for j in range(n)]


def _meta(dialogues: pd.DataFrame) -> pd.DataFrame:
    need = {"dialogue_id", "turns"}
    if need - set(dialogues.columns):
        raise AnalysisInputError(f"dialogue frame lacks columns {sorted(need - set(dialogues.columns))}")
    d = dialogues
    if "status" in d.columns:
        d = d[d["status"] == "ok"]
    d = d.drop_duplicates("dialogue_id")
    out = pd.DataFrame({"dialogue_id": d["dialogue_id"].astype(str).to_numpy()})
    for c, default in (("role_model", "unknown"), ("strategy", "official"), ("language", "en")):
        out[c] = (d[c].fillna(default).astype(str).to_numpy() if c in d.columns else default)
    out["turns"] = d["turns"].to_numpy()
    return out


def round_frame(dialogues: pd.DataFrame, rounds: int = ROUNDS, align: str = "relative") -> pd.DataFrame:
    """One row per aligned seeker turn: KEYS, seeker_turn (from 1, before alignment), n_seeker_turns,
    round, text, and its per-turn values: tokens (list), words, question, first_person, thanks,
    negativity, bigrams (set)."""
    meta = _meta(dialogues)
    rows = []
    for did, role, strat, lang, turns in meta[KEYS + ["turns"]].itertuples(index=False):
        runs = seeker_runs(turns if turns is not None else [])
        for i, r in aligned_positions(len(runs), rounds, align):
            rows.append((did, role, strat, lang, i + 1, len(runs), r, runs[i]))
    f = pd.DataFrame(rows, columns=KEYS + ["seeker_turn", "n_seeker_turns", "round", "text"])
    tok_lang = [lang if lang in ("en", "zh") else "auto" for lang in f["language"]]
    f["tokens"] = [tokenize(t, lang) for t, lang in zip(f["text"], tok_lang)]
    f["words"] = f["tokens"].map(len)
    f["question"] = f["text"].map(lambda t: QUESTION_RE.search(t) is not None)
    f["first_person"] = [sum(1 for w in toks if w in (FIRST_PERSON_ZH if lang == "zh" else FIRST_PERSON_EN))
                         for toks, lang in zip(f["tokens"], f["language"])]
    f["thanks"] = f["text"].map(lambda t: THANKS_RE.search(t) is not None)
    f["negativity"] = f["text"].map(negativity)
    f["bigrams"] = f["tokens"].map(lambda t: set(zip(t, t[1:])))
    return f


def _max_overlap(bigram_sets: list[set]) -> float:
    sets = [b for b in bigram_sets if b]
    if len(sets) < 2:
        return float("nan")
    return max(len(a & b) / min(len(a), len(b)) for i, a in enumerate(sets) for b in sets[i + 1:])


def _slope(f: pd.DataFrame, value: str) -> pd.Series:
    """Least-squares slope of `value` over rounds per dialogue, from grouped sums (NaN under 2 rounds)."""
    g = f.dropna(subset=[value])
    x, y = g["round"].astype(float), g[value].astype(float)
    s = pd.DataFrame({"dialogue_id": g["dialogue_id"], "n": 1.0, "x": x, "y": y, "xy": x * y, "xx": x * x}) \
        .groupby("dialogue_id").sum()
    den = s["n"] * s["xx"] - s["x"] ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((s["n"] * s["xy"] - s["x"] * s["y"]) / den).where((s["n"] >= 2) & (den != 0))


def _resolved_round(f: pd.DataFrame, rounds: int) -> pd.Series:
    """See the module docstring: first round after the first negative one with negativity < 0."""
    neg = f["negativity"].to_numpy()
    first_neg = f.assign(r=np.where(neg > 0, f["round"], np.inf)).groupby("dialogue_id")["r"].min()
    start = f["dialogue_id"].map(first_neg).to_numpy()
    later = f.assign(r=np.where((neg < 0) & (f["round"].to_numpy() > start), f["round"], np.inf))
    turned = later.groupby("dialogue_id")["r"].min()
    out = turned.where(np.isfinite(turned), rounds + 1).astype(float)
    return out.where(np.isfinite(first_neg.reindex(out.index)))


def dialogue_features(dialogues: pd.DataFrame, rounds: int = ROUNDS, align: str = "relative",
                      frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per completed dialogue with a seeker turn: KEYS, n_seeker_turns, the FEATURES.
    frame: round_frame of these dialogues when already built."""
    f = frame if frame is not None else round_frame(dialogues, rounds, align)
    cols = KEYS + ["n_seeker_turns"] + FEATURES
    if f.empty:
        return pd.DataFrame(columns=cols)
    g = f.groupby("dialogue_id", sort=False)
    out = g[KEYS[1:] + ["n_seeker_turns"]].first()
    out["words_per_turn"] = g["words"].mean()
    out["question_share"] = g["question"].mean()
    total = g["words"].sum()
    out["first_person_share"] = (g["first_person"].sum() / total).where(total > 0)
    toks = g["tokens"].agg(list)
    out["distinct_1"] = toks.map(lambda t: distinct_n(t, 1))
    out["distinct_2"] = toks.map(lambda t: distinct_n(t, 2))
    out["repetition"] = g["bigrams"].agg(lambda b: _max_overlap(list(b)))
    last = f["round"] == rounds
    early = f[~last]
    out["thanks_early"] = early.groupby("dialogue_id")["thanks"].mean().reindex(out.index)
    out["thanks_last"] = f[last].groupby("dialogue_id")["thanks"].mean().reindex(out.index)
    out["negativity_start"] = f[f["round"] == 1].set_index("dialogue_id")["negativity"].reindex(out.index)
    out["negativity_end"] = f[last].set_index("dialogue_id")["negativity"].reindex(out.index)
    out["negativity_slope"] = _slope(f, "negativity").reindex(out.index)
    out["resolved_round"] = _resolved_round(f, rounds).reindex(out.index)
    return out.reset_index()[cols].astype({c: float for c in FEATURES})


def add_distress(features: pd.DataFrame, frame: pd.DataFrame, ratings: pd.DataFrame, rounds: int = ROUNDS) -> pd.DataFrame:
    """features with distress_start, distress_end and distress_slope from a judge's ratings
    (dialogue_id, seeker_turn from 1, rating 0-4; NaN = no usable rating), aligned like the rest."""
    need = {"dialogue_id", "seeker_turn", "rating"}
    if need - set(ratings.columns):
        raise AnalysisInputError(f"distress ratings lack columns {sorted(need - set(ratings.columns))}")
    r = ratings.drop_duplicates(["dialogue_id", "seeker_turn"], keep="last")
    f = frame[["dialogue_id", "seeker_turn", "round"]].merge(r[list(need)], on=["dialogue_id", "seeker_turn"], how="left")
    f = f.dropna(subset=["rating"])
    out = features.set_index("dialogue_id")
    out["distress_start"] = f[f["round"] == 1].set_index("dialogue_id")["rating"].reindex(out.index)
    out["distress_end"] = f[f["round"] == rounds].set_index("dialogue_id")["rating"].reindex(out.index)
    out["distress_slope"] = _slope(f, "rating").reindex(out.index)
    return out.reset_index().astype({c: float for c in DISTRESS})


def by_round(frame: pd.DataFrame, features: pd.DataFrame, rounds: int = ROUNDS) -> pd.DataFrame:
    """Per (role_model, strategy, language, round): n, thanks share, mean negativity, and the share of
    the dialogues with a negative round that have turned (resolved_round <= round)."""
    if frame.empty:
        return pd.DataFrame(columns=KEYS[1:] + ["round", "n", "thanks_share", "negativity", "resolved_share"])
    t = frame.groupby(KEYS[1:] + ["round"]).agg(n=("dialogue_id", "size"), thanks_share=("thanks", "mean"),
                                                 negativity=("negativity", "mean")).reset_index()
    res = features.dropna(subset=["resolved_round"])
    shares = [{"role_model": k[0], "strategy": k[1], "language": k[2], "round": r,
               "resolved_share": float((g["resolved_round"] <= r).mean())}
              for k, g in res.groupby(KEYS[1:]) for r in range(1, rounds + 1)]
    cols = KEYS[1:] + ["round", "resolved_share"]
    return t.merge(pd.DataFrame(shares, columns=cols), on=KEYS[1:] + ["round"], how="left")
