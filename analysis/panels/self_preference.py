"""Self-preference of any judge of a target's own family, one judge or many (the panel section's
rank changes need two or more judges; this needs one): a judge may favour the models of its own
base-model lineage (a lab scoring its Qwen model with a Qwen judge; the demo's smollm judging smollm).

Families: the manifests' `families` (the scoring job writes the registry's family of every target and
judge; a panel judge's own `family` first) and the caller's (`--family MODEL=FAM`), as the panel
code reads them (panel_spec.py).

The size, where something allows it: a reference reads the same dialogues: the judges of other
families in the runs (their mean per dialogue), or people's scores (`--humans`, each dialogue's mean
over its annotators). Per dialogue, the judge's Average (the seven dimensions' mean x 25) minus the
reference's; the estimate is that gap on the target's dialogues minus the gap on the dialogues of
targets of other families (which removes the judge's leniency towards everyone), with a 95% interval
from a bootstrap resampling cards (a card's dialogues of every target together; did_estimate). Verdict:
"favours its family" (interval above 0), "disfavours" (below), "no evidence" (across 0); "n/a" below
MIN_CARDS cards or without a target of another family (the gap is then shown, leniency and
self-preference mixed). Against judges of other families the estimate is relative: it cannot tell this
judge favouring its family from those judges favouring theirs (two judges, two families: each gets the
same estimate), which people's scores can. Where nothing allows an estimate (one judge, no people), a
plain warning.
The planted checks: tests/analysis/panels/test_analysis_self_preference.py.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.checks.floors import gate
from esc_eval.analysis.panels.panel_spec import manifest_families, manifest_panel, score_judges, target_families
from esc_eval.analysis.results.blocks import Section, notice, section, table, text
from esc_eval.analysis.results.section_registry import ReportContext, register_section
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, TABLE_SCALE

MIN_CARDS = 10  # below: no verdict (a cluster bootstrap over fewer cards under-covers)
SELF_COLUMNS = ["language", "model", "judge", "family", "reference", "n_dialogues", "n_control", "n_cards", "gap",
                "estimate", "ci_low", "ci_high", "verdict", "note"]
PEOPLE = "people"
CHECK_PEOPLE, CHECK_PANEL = "self-preference-one", "self-preference"  # their checks: ranking/self_preference_check.py, panel_checks.py


def judge_families(manifests: Mapping[str, dict] | None, families: Mapping[str, str] | None = None) -> dict[str, str]:
    """Judge id -> family: the manifests' families, a panel entry's own, the caller's (which wins)."""
    _, entries = manifest_panel(manifests)
    return {**manifest_families(manifests, "judges"), **{e["judge"]: e["family"] for e in entries if e.get("family")},
            **dict(families or {})}


def family_pairs(scores: pd.DataFrame, manifests: Mapping[str, dict] | None,
                 families: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(target, judge, family) for every judge in the rows (no recalibrated copy, no panel) of a target's family."""
    judges, targets = judge_families(manifests, families), target_families(manifests, families)
    models = sorted(scores["target_model"].dropna().astype(str).unique()) if not scores.empty else []
    same = lambda a, b: bool(a) and bool(b) and str(a).lower() == str(b).lower()  # noqa: E731
    return [(m, j, str(judges[j])) for j in score_judges(scores) for m in models if same(judges.get(j), targets.get(m))]


def dialogue_averages(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (dialogue, judge): its Average x 25 over the dimensions scored, with language, target and card."""
    s = scores[scores["dimension"].isin(DIMENSION_NAMES) & scores["score"].notna()]
    card = s["card_id"].fillna(s["dialogue_id"]) if "card_id" in s.columns else s["dialogue_id"]
    s = s.assign(card_id=card.astype(str))
    keys = ["dialogue_id", "judge", "language", "target_model", "card_id"]
    return s.groupby(keys, dropna=False)["score"].mean().mul(TABLE_SCALE).rename("value").reset_index()


def _people(humans: Any) -> pd.Series:
    """Each human-scored dialogue's mean over its annotators and the seven dimensions, x 25."""
    means = getattr(humans, "means", None)
    if means is None or means.empty:
        return pd.Series(dtype=float)
    return means.reindex(columns=DIMENSION_NAMES).mean(axis=1, skipna=True).mul(TABLE_SCALE).dropna()


def did_estimate(gaps: pd.DataFrame, n_boot: int, seed: int) -> tuple[float, float, float]:
    """(estimate, lo, hi): mean gap of the target's dialogues (`own` True) minus the others', with a 95%
    interval from a cluster bootstrap over cards (the bootstrap's sd, a t quantile with K - 1 df)."""
    cards, inverse = np.unique(gaps["card_id"].to_numpy(str), return_inverse=True)
    own = gaps["own"].to_numpy(bool)
    sums, counts = np.zeros((len(cards), 2)), np.zeros((len(cards), 2))
    np.add.at(sums, (inverse, (~own).astype(int)), gaps["gap"].to_numpy(float))
    np.add.at(counts, (inverse, (~own).astype(int)), 1.0)
    est = sums[:, 0].sum() / counts[:, 0].sum() - sums[:, 1].sum() / counts[:, 1].sum()
    if n_boot <= 0 or len(cards) < 2:
        return float(est), math.nan, math.nan
    w = np.random.default_rng(seed).multinomial(len(cards), np.full(len(cards), 1 / len(cards)), size=n_boot)
    with np.errstate(invalid="ignore", divide="ignore"):
        b = (w @ sums) / (w @ counts)
    b = (b[:, 0] - b[:, 1])[~np.isnan(b).any(axis=1)]
    # est +- t(K-1) x the bootstrap's sd (small-sample corrected): the percentile interval under-covered (its
    # planted false-positive rate was 9.7% at 10 cards, 7.2% at 40; this one's 4.5% and 5.1%, 5.6% at 100)
    half = stats.t.ppf(0.975, len(cards) - 1) * b.std(ddof=1) * math.sqrt(len(cards) / (len(cards) - 1))
    return float(est), float(est - half), float(est + half)


def self_preference(scores: pd.DataFrame, manifests: Mapping[str, dict] | None, humans: Any = None,
                    families: Mapping[str, str] | None = None, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """One row per (language, target, judge of its family, reference) (SELF_COLUMNS; module doc); a row
    with reference "none" and a warning where no judge of another family and no people scored its dialogues."""
    pairs = family_pairs(scores, manifests, families)
    if not pairs:
        return pd.DataFrame(columns=SELF_COLUMNS)
    avg = dialogue_averages(scores)
    fams, targets = judge_families(manifests, families), target_families(manifests, families)
    people = _people(humans)
    rows = []
    for model, judge, family in pairs:
        others = [j for j in score_judges(scores) if fams.get(j) and str(fams[j]).lower() != family.lower()]
        for language in sorted(avg.loc[(avg["judge"] == judge) & (avg["target_model"] == model), "language"].unique()):
            a = avg[(avg["language"] == language)]
            mine = a[a["judge"] == judge].set_index("dialogue_id")
            base = {"language": language, "model": model, "judge": judge, "family": family}
            refs = []
            if others:
                refs.append((f"judges of other families ({', '.join(others)})",
                             a[a["judge"].isin(others)].groupby("dialogue_id")["value"].mean()))
            if len(people):
                refs.append((PEOPLE, people))
            if not refs:
                rows.append({**base, "reference": "none", "n_dialogues": int((mine["target_model"] == model).sum()),
                             "verdict": "unchecked", "note": f"judge {judge} is of {model}'s family ({family}) and "
                             "nothing here can size its self-preference (no judge of another family, no human scores): "
                             "its scores of this target may be inflated"})
                continue
            for name, ref in refs:
                relative = "" if name == PEOPLE else ("relative to those judges, who may favour their own family in "
                                                      "turn: human scores (--humans) tell the two apart")
                rows.append({**base, "reference": name, **size_self_preference(
                    mine, ref, model, family, targets, n_boot, seed, relative,
                    CHECK_PEOPLE if name == PEOPLE else CHECK_PANEL)})
    return pd.DataFrame(rows, columns=SELF_COLUMNS)


def size_self_preference(mine: pd.DataFrame, ref: pd.Series, model: str, family: str, targets: Mapping[str, str], n_boot: int,
           seed: int, note: str = "", check: str = CHECK_PEOPLE) -> dict[str, Any]:
    both = mine.join(ref.rename("ref"), how="inner")
    other = both["target_model"].map(lambda t: str(targets.get(t) or "").lower() != family.lower())
    gaps = both.assign(gap=both["value"] - both["ref"], own=both["target_model"] == model)[lambda f: f["own"] | other]
    n_own, n_other = int(gaps["own"].sum()), int((~gaps["own"]).sum())
    out = {"n_dialogues": n_own, "n_control": n_other, "n_cards": int(gaps["card_id"].nunique())}
    if not n_own:
        return {**out, "verdict": "n/a", "note": "the reference read none of this target's dialogues"}
    gap = float(gaps.loc[gaps["own"], "gap"].mean())
    if not n_other:
        return {**out, "gap": gap, "verdict": "n/a", "note": "no target of another family read by both: the gap mixes "
                "self-preference with the judge's leniency"}
    est, lo, hi = did_estimate(gaps, n_boot, seed)
    if out["n_cards"] < MIN_CARDS:
        return {**out, "gap": gap, "estimate": est, "ci_low": lo, "ci_high": hi, "verdict": "n/a",
                "note": f"{out['n_cards']} cards: a verdict needs at least {MIN_CARDS} (its planted check)"}
    verdict = "n/a" if lo != lo else "favours its family" if lo > 0 else "disfavours its family" if hi < 0 else "no evidence"
    # check: its planted-truth check (against people: self-preference-one; against a panel's other judges: self-preference)
    verdict, why = gate(check, out["n_cards"], verdict, finds=verdict != "no evidence")
    return {**out, "gap": gap, "estimate": est, "ci_low": lo, "ci_high": hi, "verdict": verdict,
            "note": "; ".join(filter(None, [note, why]))}


def _num(v: float, sign: str = "+") -> str:
    return "-" if v is None or v != v else f"{v:{sign}.1f}"


def mark_text(r: Mapping) -> str:
    """What a leaderboard row of (target, judge) says: the family, and the size or the warning."""
    head = f"judge of the target's family ({r['family']})"
    if r["reference"] == "none":
        return f"{head}: self-preference unchecked (no judge of another family, no human scores)"
    ci = "" if r["ci_low"] != r["ci_low"] else f" [{r['ci_low']:.1f}, {r['ci_high']:.1f}]"
    size = _num(r["estimate"]) + ci if r["estimate"] == r["estimate"] else f"gap {_num(r['gap'])}"
    return f"{head}: self-preference {size} x25 against {r['reference']}: {r['verdict']}"


def mark_leaderboard(board: pd.DataFrame, marks: pd.DataFrame) -> pd.DataFrame:
    """Table 2 with `self_family` (the family a row's judge shares with its target, else "") and its note."""
    out = board.assign(self_family="")
    for _, r in marks.iterrows():
        at = (out["language"] == r["language"]) & (out["model"] == r["model"]) & (out["judge"] == r["judge"])
        out.loc[at, "self_family"] = r["family"]
        out.loc[at, "notes"] = [f"{n}; {mark_text(r)}" if n else mark_text(r) for n in out.loc[at, "notes"].fillna("")]
    return out


def self_preference_line(marks: pd.DataFrame) -> str:
    """The line beside Table 2 ('' when no judge shares a target's family)."""
    if marks.empty:
        return ""
    said = sorted({f"{r['judge']} judges {r['model']} ({r['family']})" for _, r in marks.iterrows()})
    unchecked = marks["reference"].eq("none")
    return ("Self-preference: " + "; ".join(said) + ", a judge of the target's own family. "
            + (f"Nothing here sizes it{'' if unchecked.all() else ' for some'} (no judge of another family, no human "
               "scores): add a judge of another family (`score --judge` repeated) or human scores (`--humans`). "
               if unchecked.any() else "")
            + "The Notes column says each row's estimate.")


SECTION_HEAD = ["Language", "Target", "Judge", "Family", "Against", "n", "Control n", "Cards", "Self-preference [95% CI]",
                "Verdict", "Note"]


def section_rows(marks: pd.DataFrame) -> list[list]:
    return [[r["language"], r["model"], r["judge"], r["family"], r["reference"], r["n_dialogues"],
             "-" if r["n_control"] != r["n_control"] else int(r["n_control"]),
             "-" if r["n_cards"] != r["n_cards"] else int(r["n_cards"]),
             "-" if r["reference"] == "none" else (_num(r["estimate"]) + ("" if r["ci_low"] != r["ci_low"] else
                                                   f" [{r['ci_low']:.1f}, {r['ci_high']:.1f}]")
                                                   if r["estimate"] == r["estimate"] else f"gap {_num(r['gap'])}"),
             r["verdict"], r["note"]] for _, r in marks.iterrows()]


def self_preference_section(ctx: ReportContext) -> Section:
    s = section("self-preference", "Self-preference: judges of the targets' own family")
    marks = self_preference(ctx.scores, ctx.manifests, ctx.humans, n_boot=ctx.n_boot, seed=ctx.seed)
    s["blocks"].append(text("A judge may favour models of its own base-model family. Where a judge of another family "
                            "or human scores read the same dialogues, the size: the judge's Average minus the "
                            "reference's on this target's dialogues, minus the same on other families' targets (x25, "
                            "bootstrap 95% CI over cards)."))
    for _, r in marks[marks["reference"] == "none"].iterrows():
        s["notices"].append(notice(r["note"], "warning"))
    s["blocks"].append(table(SECTION_HEAD, section_rows(marks), {0, 1, 2, 3, 4, 8, 9, 10}, caption="Self-preference",
                             id="self-preference"))
    s["data"] = {"marks": marks.astype(object).where(marks.notna(), None).to_dict(orient="records")}
    return s


def has_self_family(ctx: ReportContext) -> bool:
    return bool(family_pairs(ctx.scores, ctx.manifests))


# beside Table 2, before the panel's section (analysis/results/section_registry.py)
register_section("self-preference", 260, self_preference_section, when=has_self_family)
