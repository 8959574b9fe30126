"""Who sits on a judge panel: its judges (as named in the score rows' `judge` column), their weights
and base-model families, the rule that combines them and the quorum, read from the run folders'
manifests or named by the caller.

The scoring job writes (for a panel run) manifest["scoring"]["panel"] = {"rule": ..., "judges":
[{"judge", "weight", "family", "model"}, ...]} and (for every scoring run) manifest["families"] =
{"targets": {model: family}, "judges": {judge: family}}. Without a panel entry the panel is every
judge in the score rows with weight 1; recalibrated judges (`<judge>+cal:<method>`) and panels
(`panel:<rule>`) are left out of that default, since they repeat a judge already on it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

import pandas as pd

from esc_eval.analysis.results.leaderboard import CALIBRATED_TAG
from esc_eval.analysis.results.loaders import AnalysisInputError

# the scoring config's rules (sim/judging/panel.py PANEL_RULES; not imported: it would bring serve into
# analysis; a test holds the two equal)
RULES = ("mean", "median", "majority", "trimmed_mean")
PANEL_PREFIX = "panel:"


@dataclass(frozen=True)
class PanelJudge:
    """One judge of the panel."""

    judge: str  # the id in the score rows' `judge` column
    weight: float = 1.0
    family: str | None = None  # base-model lineage (the registry's `family`), for self-preference
    model: str | None = None  # the model name or spec behind the judge, when the manifest says


@dataclass(frozen=True)
class PanelSpec:
    """The panel: its judges in order, the rule and the quorum (min_judges None = every judge)."""

    judges: tuple[PanelJudge, ...]
    rule: str = "mean"
    min_judges: int | None = None

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise AnalysisInputError(f"--rule {self.rule!r}: expected one of {', '.join(RULES)}")
        names = [j.judge for j in self.judges]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise AnalysisInputError(f"judge {twice[0]} is named twice on the panel")
        if len(names) < 2:
            raise AnalysisInputError(f"a panel needs at least 2 judges, got {len(names)} ({', '.join(names) or 'none'})")
        for j in self.judges:
            if not (isinstance(j.weight, (int, float)) and math.isfinite(j.weight) and j.weight > 0):
                raise AnalysisInputError(f"--weight {j.judge}={j.weight}: a weight must be a positive number")
        if self.min_judges is not None and not 1 <= self.min_judges <= len(names):
            raise AnalysisInputError(f"--min-judges {self.min_judges}: expected 1 to {len(names)} (the panel's judges)")

    @property
    def names(self) -> list[str]:
        return [j.judge for j in self.judges]

    @property
    def weights(self) -> list[float]:
        return [float(j.weight) for j in self.judges]

    @property
    def quorum(self) -> int:
        """How many of the judges must have scored an item for the panel to score it."""
        return self.min_judges if self.min_judges is not None else len(self.judges)

    @property
    def judge_id(self) -> str:
        """The panel's rows' `judge`: panel:<rule>."""
        return f"{PANEL_PREFIX}{self.rule}"

    def family_of(self, judge: str) -> str | None:
        return next((j.family for j in self.judges if j.judge == judge), None)

    def with_rule(self, rule: str) -> "PanelSpec":
        return replace(self, rule=rule)


def parse_assignments(values: Iterable[str] | None, option: str) -> dict[str, str]:
    """['a=1.5', 'b=2'] -> {'a': '1.5', 'b': '2'}; a malformed or repeated name is a one-line error."""
    out: dict[str, str] = {}
    for v in values or []:
        name, sep, value = str(v).rpartition("=")
        if not sep or not name.strip() or not value.strip():
            raise AnalysisInputError(f"{option} {v!r}: expected NAME=VALUE")
        if name.strip() in out:
            raise AnalysisInputError(f"{option}: {name.strip()} is named twice")
        out[name.strip()] = value.strip()
    return out


def parse_weights(values: Iterable[str] | None) -> dict[str, float]:
    """--weight ID=W values as floats (a non-number is a one-line error; positivity is PanelSpec's check)."""
    out = {}
    for name, value in parse_assignments(values, "--weight").items():
        try:
            out[name] = float(value)
        except ValueError:
            raise AnalysisInputError(f"--weight {name}={value}: a weight must be a positive number") from None
    return out


def score_judges(scores: pd.DataFrame) -> list[str]:
    """The judges of the score rows that can sit on a default panel (no recalibrated judge, no panel)."""
    if scores.empty or "judge" not in scores.columns:
        return []
    return sorted(j for j in scores["judge"].dropna().astype(str).unique()
                  if CALIBRATED_TAG not in j and not j.startswith(PANEL_PREFIX))


def manifest_panel(manifests: Mapping[str, dict] | None) -> tuple[str | None, list[dict]]:
    """(rule, judge entries) of the manifests' panels, the first folder's entry for a judge named by several."""
    rule, entries, seen = None, [], set()
    for m in (manifests or {}).values():
        panel = ((m or {}).get("scoring") or {}).get("panel") or {}
        rule = rule or panel.get("rule")
        for e in panel.get("judges") or []:
            if isinstance(e, dict) and e.get("judge") and e["judge"] not in seen:
                seen.add(e["judge"])
                entries.append(e)
    return rule, entries


def manifest_families(manifests: Mapping[str, dict] | None, kind: str) -> dict[str, str]:
    """manifest["families"][kind] ("targets" or "judges") of every folder merged (the first folder wins), nulls left out."""
    out: dict[str, str] = {}
    for m in (manifests or {}).values():
        for name, fam in (((m or {}).get("families") or {}).get(kind) or {}).items():
            if fam and name not in out:
                out[str(name)] = str(fam)
    return out


def target_families(manifests: Mapping[str, dict] | None, families: Mapping[str, str] | None = None) -> dict[str, str]:
    """Target model -> family: the manifests' and the caller's (`--family MODEL=FAM`, which wins)."""
    return {**manifest_families(manifests, "targets"), **dict(families or {})}


def panel_spec(scores: pd.DataFrame, manifests: Mapping[str, dict] | None = None, *, judges: list[str] | None = None,
               weights: Mapping[str, float] | None = None, families: Mapping[str, str] | None = None,
               rule: str | None = None, min_judges: int | None = None) -> PanelSpec:
    """The panel over `scores`: the judges named (else the manifests' panel, else every judge in the rows),
    their weights (the caller's, else the manifest's, else 1) and families (the caller's `--family`, the
    panel entry's, the manifests' families). Bad input is one AnalysisInputError line: a judge named
    twice or absent from the rows, a weight not positive or for a judge off the panel, fewer than 2 judges."""
    judges = list(judges or [])
    twice = sorted({j for j in judges if judges.count(j) > 1})
    if twice:
        raise AnalysisInputError(f"--judge {twice[0]} is named twice")
    m_rule, entries = manifest_panel(manifests)
    by_name = {e["judge"]: e for e in entries}
    present = sorted(scores["judge"].dropna().astype(str).unique()) if "judge" in scores.columns else []
    names = judges or [e["judge"] for e in entries] or score_judges(scores)
    absent = [n for n in names if n not in present]
    if absent:
        raise AnalysisInputError(f"judge {absent[0]}: not in the runs' score rows (judges there: "
                                 f"{', '.join(present) or 'none'})")
    weights = dict(weights or {})
    stray = [w for w in weights if w not in names]
    if stray:
        raise AnalysisInputError(f"--weight {stray[0]}: not a judge of the panel ({', '.join(names)})")
    judge_fams = {**manifest_families(manifests, "judges"),
                  **{n: e["family"] for n, e in by_name.items() if e.get("family")}, **dict(families or {})}
    panel = tuple(PanelJudge(judge=n, weight=_weight(n, weights, by_name.get(n, {})), family=judge_fams.get(n),
                             model=by_name.get(n, {}).get("model")) for n in names)
    return PanelSpec(judges=panel, rule=rule or m_rule or "mean", min_judges=min_judges)


def _weight(judge: str, weights: Mapping[str, float], entry: dict) -> float:
    """The caller's weight, else the manifest entry's (a 0 there is an error too, not a default), else 1."""
    w = weights.get(judge, entry.get("weight"))
    try:
        return 1.0 if w is None else float(w)
    except (TypeError, ValueError):
        raise AnalysisInputError(f"judge {judge}: weight {w!r} is not a positive number") from None
