"""The validity bench's table (Markdown, for the terminal and docs/guides/validity.md) and its JSON
(what analysis/checks/floors.py reads when shipped as analysis/checks/data/validity.json)."""
from __future__ import annotations

import json
import math
import platform
import re
import time
from pathlib import Path
from typing import Any

from esc_eval.analysis.checks.registry import no_verdicts


def machine() -> dict[str, str]:
    """The CPU (model and the AVX-512 / AMX flags that set this project's CPU speed), cores, Python."""
    model, flags = platform.processor() or "unknown", set()
    try:
        info = Path("/proc/cpuinfo").read_text()
        found = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
        model = found.group(1).strip() if found else model
        flags = set(re.findall(r"\b(avx512_bf16|amx_bf16|avx512f)\b", info))
    except OSError:
        pass
    import os

    return {"cpu": model, "flags": ", ".join(sorted(flags)) or "none of avx512f, avx512_bf16, amx_bf16",
            "cores": str(os.cpu_count()), "python": platform.python_version()}


def _pct(p: float, se: float | None = None) -> str:
    if p is None or not math.isfinite(p):
        return "-"
    return f"{100 * p:.0f}%" + (f" ±{100 * se:.0f}" if se is not None and math.isfinite(se) else "")


def _at(check: dict[str, Any], size: int | None) -> dict[str, Any] | None:
    rows = check["by_size"]
    if not rows:
        return None
    return next((r for r in rows if r["size"] == size), rows[-1]) if size else rows[-1]


def summary_rows(result: dict[str, Any], size: int | None = None) -> list[list[str]]:
    out = []
    for c in result["checks"]:
        r = _at(c, size)
        if r is None:
            out.append([c["id"], c["flag"] or "-", c["interval"] or "-", c["effect_text"], "-", "-", "-", "-", "-", "-",
                        "not run"])
            continue
        out.append([c["id"], c["flag"] or "-", c["interval"] or "-", c["effect_text"], str(r["size"]),
                    _pct(r["fpr"], r["fpr_se"]) if c["flag"] else "-", _pct(r["power"], r["power_se"]) if c["flag"] else "-",
                    _pct(r["coverage"], r["coverage_se"]) if c["interval"] else "-",
                    f"{c['valid_from'] or '-'} / {c['power_from'] or '-'}", _located(c, r), c["status"]])
    return out


def _located(check: dict[str, Any], r: dict[str, Any]) -> str:
    """The planted replicates where the analysis placed the effect where it was planted ('-': it places none)."""
    if not check.get("locate") or not r.get("n_located"):
        return "-"
    return f"{_pct(r['located'], r['located_se'])} ({check['locate']})"


def detail_rows(result: dict[str, Any]) -> list[list[str]]:
    out = []
    for c in result["checks"]:
        for r in c["by_size"]:
            out.append([c["id"], str(r["size"]), _pct(r["fpr"], r["fpr_se"]) if c["flag"] else "-",
                        _pct(r["power"], r["power_se"]) if c["flag"] else "-",
                        _pct(r["coverage"], r["coverage_se"]) if c["interval"] else "-",
                        _located(c, r), f"{r['n_null']}/{r['n_planted']}", "yes" if r["fpr_ok"] is not False and r["coverage_ok"] is not False else "no"])
    return out


def _table(headers: list[str], rows: list[list[str]]) -> str:
    cell = lambda v: str(v).replace("|", "/")  # noqa: E731
    return "\n".join(["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
                     + ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]) + "\n"


SUMMARY_HEADERS = ["Check", "Flag (what it claims)", "Interval (of)", "Planted effect", "Cards", "False positives",
                   "Power", "Coverage", "Valid from / 80% power from", "Located", "Status"]
DETAIL_HEADERS = ["Check", "Cards", "False positives", "Power", "Coverage", "Located", "Replicates (null/planted)", "Holds"]


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    head = (f"Validity of esc-eval's verdicts against planted truth: {result['seeds']} seeds per variant, sizes "
            f"{', '.join(map(str, result['sizes']))} (cards per target), {result['date']}, {m['cpu']} ({m['flags']}), "
            f"{result['seconds']:.0f} s, the analyses' bootstraps at {result.get('n_boot', 1000)} resamples. False "
            "positives: the flag's rate with nothing planted (nominal 5%); power: its rate with the effect planted; "
            "coverage: how often the interval holds the truth (nominal 95%), both variants; ± = one Monte-Carlo "
            "standard error (coverage's over seeds: a seed's two variants share its cards). Located: of the planted "
            "replicates, where the analysis placed the effect where it was planted. A size holds when both stay within z standard errors of their nominal (z: one-sided "
            "5% over the sizes, Bonferroni).\n")
    parts = [head, "## At the largest size\n", _table(SUMMARY_HEADERS, summary_rows(result)),
             "## By size\n", _table(DETAIL_HEADERS, detail_rows(result))]
    unchecked = [u for u in result.get("unchecked", []) if u["prints_verdicts"]]
    if unchecked:
        parts += ["## Printed, not yet checked\n",
                  _table(["Where", "Why"], [[", ".join(u["covers"]), u["reason"]] for u in unchecked])]
    return "\n".join(parts)


def unchecked_list() -> list[dict[str, Any]]:
    seen, out = set(), []
    for nv in no_verdicts().values():
        if nv.covers not in seen:
            seen.add(nv.covers)
            out.append({"covers": list(nv.covers), "reason": nv.reason, "prints_verdicts": nv.prints_verdicts})
    return out


def write_json(result: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_plain(result), indent=1) + "\n", encoding="utf-8")
    return path


def _plain(v: Any) -> Any:
    """JSON's values: NaN as null, numpy scalars as Python's."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M %Z")
