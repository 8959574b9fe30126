"""The validity bench (`esc-eval bench validity`): every registered check (analysis/checks) run on
planted runs over seeds and sizes, with no effect planted and with it planted, and what that shows:
per check and size, the false-positive rate of its flag, its power at the planted effect, its
intervals' coverage, each with its Monte-Carlo error; the smallest size from which it holds
(valid_from) and from which it finds the effect 80% of the time (power_from).

The runs come from a runner handed in (analysis cannot import sim's jobs: the CLI passes
sim/bench/planted's `planted_runner`): runner(scenario, variant, seed, sizes, people) is a context
manager yielding {size: mapping} (people: an ESConv-format file of people's dialogues) (analysis.checks.PlantedRuns.from_runner reads the mapping).

"Within Monte-Carlo error": a false-positive rate at most its nominal level plus z times the
nominal's binomial standard error at the replicates run, a coverage at least its nominal minus z
times its standard error, z the one-sided 5% point with Bonferroni over the sizes measured (2.45 for
seven sizes): a check valid at every size fails one of seven plain 2-standard-error tests about one
time in six. A per-item flag (a dialogue's spoiled flag) is a rate per replicate; its error is the
spread of the replicates' rates.
"""
from __future__ import annotations

import math
import time
from collections import defaultdict
from typing import Any, Callable, ContextManager, Iterable

import numpy as np

from esc_eval.analysis.checks.floors import measuring
from esc_eval.analysis.checks.registry import NULL, PLANTED, Outcome, PlantedRuns, VerdictCheck
from esc_eval.analysis.results.loaders import AnalysisInputError

Runner = Callable[[str, str, int, list[int], str], ContextManager[dict[int, dict[str, Any]]]]
POWER = 0.8


def collect(runner: Runner, checks: list[VerdictCheck], seeds: Iterable[int], sizes: list[int],
            say: Callable[[str], None] = lambda _: None, n_boot: int = 1000,
            people: str = "") -> dict[str, dict[str, dict[int, list[Outcome]]]]:
    """check id -> variant -> size -> one Outcome per seed (an analysis that refused the runs: an
    Outcome with nothing in it, counted as an error)."""
    out: dict[str, dict[str, dict[int, list[Outcome]]]] = {c.id: {NULL: defaultdict(list), PLANTED: defaultdict(list)}
                                                            for c in checks}
    errors: dict[str, list[str]] = defaultdict(list)
    scenarios: dict[str, list[VerdictCheck]] = defaultdict(list)
    for c in checks:
        scenarios[c.scenario].append(c)
    seeds = list(seeds)
    for scenario, group in scenarios.items():
        for variant in (NULL, PLANTED):
            started = time.perf_counter()
            for seed in seeds:
                with runner(scenario, variant, seed, sorted(sizes), people) as runs:
                    for size, data in sorted(runs.items()):
                        planted = PlantedRuns.from_runner(data, n_boot)
                        for c in group:
                            out[c.id].setdefault("effect_text", planted.effects.get(c.effect, ""))  # type: ignore[arg-type]
                            try:
                                with measuring():  # the statistic as computed, not as the floors let it through
                                    outcome = c.measure(planted)
                            except Exception as e:  # noqa: BLE001 - a refusal (too few at this size) or a bug: data
                                outcome = Outcome()
                                kind = "" if isinstance(e, (AnalysisInputError, ValueError)) else f"{type(e).__name__}: "
                                errors[c.id].append(f"{variant} seed {seed} size {size}: {kind}{(str(e) or '?').splitlines()[0]}")
                            out[c.id][variant][size].append(outcome)
            say(f"{scenario} {variant}: {len(seeds)} seeds x {len(sizes)} sizes, {time.perf_counter() - started:.0f} s")
    for cid, errs in errors.items():
        out[cid]["errors"] = errs  # type: ignore[assignment]
    return out


def _rate(outcomes: list[Outcome]) -> tuple[float, float, int]:
    """(rate, its Monte-Carlo standard error, replicates) of the flags raised."""
    items = [o.items for o in outcomes if o.items is not None and o.items[1] > 0]
    if items:
        rates = np.array([k / n for k, n in items])
        total = sum(k for k, _ in items) / sum(n for _, n in items)
        se = float(rates.std(ddof=1) / math.sqrt(len(rates))) if len(rates) > 1 else float("nan")
        return total, se, len(rates)
    flags = [o.flag for o in outcomes if o.flag is not None]
    if not flags:
        return float("nan"), float("nan"), 0
    p = float(np.mean(flags))
    return p, math.sqrt(p * (1 - p) / len(flags)), len(flags)


def _held(o: Outcome) -> tuple[int, int]:
    """(intervals holding the truth, intervals printed) of one replicate."""
    if o.intervals is not None:
        return o.intervals
    return (int(o.covered), 1) if o.covered is not None else (0, 0)


def coverage_by_seed(null: list[Outcome], planted: list[Outcome]) -> tuple[float, float, int, float]:
    """(coverage, its Monte-Carlo standard error, intervals, design effect) of both variants together,
    the error taken over seeds: a seed's null and planted replicates share its cards' effects (and a
    replicate's several intervals share its cards), so they are one cluster, not independent draws
    (counted as independent, leaderboard-ci's error was understated). The design effect is the
    clusters' variance over a binomial's at the same coverage (1 where that is 0): the nominal's error
    in the validity test is scaled by its square root."""
    pairs = [(_held(a), _held(b)) for a, b in zip(null, planted)]
    pairs += [(_held(o), (0, 0)) for o in null[len(planted):]] + [((0, 0), _held(o)) for o in planted[len(null):]]
    k = np.array([a[0] + b[0] for a, b in pairs], dtype=float)
    n = np.array([a[1] + b[1] for a, b in pairs], dtype=float)
    k, n = k[n > 0], n[n > 0]
    if not len(n):
        return float("nan"), float("nan"), 0, 1.0
    p = float(k.sum() / n.sum())
    if len(n) < 2:
        return p, float("nan"), int(n.sum()), 1.0
    # the ratio estimator's standard error over clusters (seeds)
    se = float(np.sqrt(((k - p * n) ** 2).sum() / (len(n) * (len(n) - 1))) / n.mean())
    binom = math.sqrt(p * (1 - p) / n.sum())
    return p, se, int(n.sum()), max(1.0, (se / binom) ** 2) if binom > 0 else 1.0


def _coverage(outcomes: list[Outcome]) -> tuple[float, float, int]:
    many = [o.intervals for o in outcomes if o.intervals is not None and o.intervals[1] > 0]
    if many:
        rates = np.array([k / n for k, n in many])
        total = sum(k for k, _ in many) / sum(n for _, n in many)
        se = float(rates.std(ddof=1) / math.sqrt(len(rates))) if len(rates) > 1 else float("nan")
        return total, se, len(rates)
    cov = [o.covered for o in outcomes if o.covered is not None]
    if not cov:
        return float("nan"), float("nan"), 0
    p = float(np.mean(cov))
    return p, math.sqrt(p * (1 - p) / len(cov)), len(cov)


def margin(n_sizes: int, alpha: float = 0.05) -> float:
    """z of "within Monte-Carlo error" (the module doc)."""
    from scipy import stats

    return float(stats.norm.ppf(1 - alpha / max(1, n_sizes)))


def size_row(check: VerdictCheck, null: list[Outcome], planted: list[Outcome], size: int, z: float = 2.0) -> dict[str, Any]:
    """One size of one check: its rates, their errors, and whether it holds there (within z errors)."""
    fpr, fpr_se, n_null = _rate(null)
    power, power_se, n_planted = _rate(planted)
    cov, cov_se, n_cov, deff = coverage_by_seed(null, planted)
    cov_null, _, _ = _coverage(null)
    cov_planted, _, _ = _coverage(planted)
    spots = [o.located for o in planted if o.located is not None]
    located = float(np.mean(spots)) if spots else float("nan")
    located_se = math.sqrt(located * (1 - located) / len(spots)) if spots else float("nan")
    fpr_ok = None if not n_null else fpr <= check.level + z * math.sqrt(check.level * (1 - check.level) / n_null)
    cov_ok = None if not n_cov else cov >= check.confidence - z * math.sqrt(
        deff * check.confidence * (1 - check.confidence) / n_cov)
    return {"size": size, "fpr": fpr, "fpr_se": fpr_se, "n_null": n_null, "power": power, "power_se": power_se,
            "n_planted": n_planted, "coverage": cov, "coverage_se": cov_se, "n_coverage": n_cov,
            "located": located, "located_se": located_se, "n_located": len(spots), "coverage_design_effect": deff, "coverage_null": cov_null, "coverage_planted": cov_planted, "fpr_ok": fpr_ok, "coverage_ok": cov_ok}


def _failure(check: VerdictCheck, r: dict[str, Any]) -> str:
    parts = []
    if r["fpr_ok"] is False:
        parts.append(f"false positives {r['fpr']:.0%} (nominal {check.level:.0%})")
    if r["coverage_ok"] is False:
        parts.append(f"coverage {r['coverage']:.0%} (nominal {check.confidence:.0%})")
    if not parts and not (r["n_null"] or r["n_coverage"]):
        parts.append("no verdict or interval at all")
    return " and ".join(parts) + (f" at {r['size']} {check.unit.split(' per ')[0]}" if parts else "")


def summarize(check: VerdictCheck, outcomes: dict[str, Any]) -> dict[str, Any]:
    """A check's rows by size, valid_from, power_from, what fails below or everywhere, and its status."""
    sizes = sorted(set(outcomes[NULL]) | set(outcomes[PLANTED]))
    z = margin(len(sizes))
    rows = [size_row(check, outcomes[NULL].get(s, []), outcomes[PLANTED].get(s, []), s, z) for s in sizes]
    valid = [r["fpr_ok"] is not False and r["coverage_ok"] is not False and bool(r["n_null"] or r["n_coverage"])
             for r in rows]
    valid_from = next((rows[i]["size"] for i in range(len(rows)) if all(valid[i:])), None)
    powered = [bool(check.flag) and r["n_planted"] > 0 and r["power"] >= POWER for r in rows]
    power_from = next((rows[i]["size"] for i in range(len(rows)) if all(powered[i:])), None) if check.flag else None
    failing = [r for r, ok in zip(rows, valid) if not ok]
    below = _failure(check, failing[-1]) if failing and valid_from is not None else ""
    failure = _failure(check, rows[-1]) if rows and valid_from is None else ""
    if not rows:
        status = "not run"
    elif valid_from is None:
        status = "fails: " + failure
    elif check.flag and power_from is None:
        status = f"holds from {valid_from}; below 80% power at every size measured"
    else:
        status = f"holds from {valid_from}" + (f"; 80% power from {power_from}" if power_from else "")
    return {"id": check.id, "title": check.title, "analysis": check.analysis, "covers": list(check.covers),
            "scenario": check.scenario, "effect": check.effect, "effect_text": outcomes.get("effect_text", ""), "flag": check.flag,
            "interval": check.interval, "locate": check.locate, "level": check.level, "confidence": check.confidence, "unit": check.unit,
            "by_size": rows, "margin_z": z, "valid_from": valid_from, "power_from": power_from, "below": below, "failure": failure,
            "status": status, "errors": list(outcomes.get("errors", []))[:5],
            "n_errors": len(outcomes.get("errors", []))}
