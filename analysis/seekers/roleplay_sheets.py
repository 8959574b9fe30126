"""The role-play evaluation workflow of the paper's Section 3 (Table 1, Figure 3) on our runs.

1. export_pairwise_sheets: for two role models that played the same cards (against the same
   target), one CSV row per card with the two dialogues in a random order, blank cells for the
   six Table 1 metrics (0-2) of each dialogue and for the choice "which is more human-like"
   (1, 2 or tie); the order is kept in a separate key file so annotators stay blind.
2. import_pairwise_sheets: the filled sheets + key -> Table 1 judgments (role_model, language,
   metric, score) and Figure 3 comparisons (agent_a, agent_b, winner).
3. win_rates_with_ci: analysis.seekers.roleplay.win_rates plus Wilson 95% intervals per share.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from esc_eval.analysis.annotation.sheets import sheet_dialogue_text
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.seekers.roleplay import ROLEPLAY_METRICS, roleplay_markdown, roleplay_table, win_rates

SHEET_NAME = "roleplay_pairs.csv"
KEY_NAME = "roleplay_pairs_key.csv"
CHOICES = {"1": "first", "2": "second", "tie": "tie"}


def export_pairwise_sheets(dialogues: pd.DataFrame, role_a: str, role_b: str, out: str | os.PathLike[str],
                           seed: int = 0, target: str | None = None) -> dict[str, Path]:
    """The pairwise sheet and its key for role_a vs role_b on the cards both played (ok dialogues)."""
    d = dialogues[dialogues["status"] == "ok"]
    if target is not None:
        d = d[d["target_model"] == target]
    roles = sorted(d["role_model"].dropna().unique())
    for r in (role_a, role_b):
        if r not in roles:
            raise AnalysisInputError(f"no ok dialogue played by role model {r!r} (found {roles})")
    keys = ["language", "card_id", "target_model"]
    first = lambda role: d[d["role_model"] == role].sort_values("seed").drop_duplicates(keys)  # noqa: E731
    pairs = first(role_a).merge(first(role_b), on=keys, suffixes=("_a", "_b"))
    if pairs.empty:
        raise AnalysisInputError(f"role models {role_a!r} and {role_b!r} share no (card, target) pair")
    rng = np.random.default_rng(seed)
    sheet, key = [], []
    for i, p in enumerate(pairs.sort_values(keys).itertuples(index=False)):
        swap = bool(rng.integers(0, 2))
        one, two = ("b", "a") if swap else ("a", "b")
        pid = f"p{i:05d}"
        row = {"pair_id": pid, "language": p.language, "card_id": p.card_id,
               "dialogue_1": sheet_dialogue_text(getattr(p, f"turns_{one}")),
               "dialogue_2": sheet_dialogue_text(getattr(p, f"turns_{two}"))}
        for n in (1, 2):
            row.update({f"d{n}_{m}": "" for m in ROLEPLAY_METRICS})
        row["more_human_like"] = ""  # 1 | 2 | tie
        sheet.append(row)
        key.append({"pair_id": pid, "language": p.language, "card_id": p.card_id,
                    "role_1": getattr(p, f"role_model_{one}"), "role_2": getattr(p, f"role_model_{two}"),
                    "dialogue_id_1": getattr(p, f"dialogue_id_{one}"), "dialogue_id_2": getattr(p, f"dialogue_id_{two}")})
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"sheet": out / SHEET_NAME, "key": out / KEY_NAME}
    pd.DataFrame(sheet).to_csv(paths["sheet"], index=False, encoding="utf-8-sig")
    pd.DataFrame(key).to_csv(paths["key"], index=False, encoding="utf-8")
    return paths



def pairwise_sheets_of_runs(run_dirs: list[str], role_a: str, role_b: str, out: str | os.PathLike[str], seed: int = 0,
                            target: str | None = None) -> dict[str, str]:
    """`esc-eval analysis roleplay-export`: export_pairwise_sheets of the runs' dialogues; the paths."""
    from esc_eval.analysis.results.loaders import load_dialogues

    paths = export_pairwise_sheets(load_dialogues(run_dirs), role_a, role_b, out, seed=seed, target=target)
    return {k: str(v) for k, v in paths.items()}

def import_pairwise_sheets(sheets: list[str | os.PathLike[str]], key: str | os.PathLike[str]
                           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(judgments for roleplay_table, comparisons for win_rates) from filled sheets and the key.
    Several sheets (annotators) give several judgments per dialogue; every bad cell is reported."""
    try:
        k = pd.read_csv(key, dtype=str, keep_default_na=False).set_index("pair_id")
    except (OSError, pd.errors.ParserError, KeyError) as e:
        raise AnalysisInputError(f"{key}: not a role-play key file ({e})") from e
    judgments, comparisons, errors = [], [], []
    for path in sheets:
        try:
            df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        except (OSError, pd.errors.ParserError, UnicodeDecodeError) as e:
            raise AnalysisInputError(f"{path}: cannot read as CSV ({e})") from e
        if "pair_id" not in df.columns:
            raise AnalysisInputError(f"{path}: no pair_id column (not a role-play sheet)")
        for i, r in df.iterrows():
            where = f"{path} row {i + 2} ({r['pair_id']})"
            if r["pair_id"] not in k.index:
                errors.append(f"{where}: pair not in the key file")
                continue
            kk = k.loc[r["pair_id"]]
            for n in (1, 2):
                for m in ROLEPLAY_METRICS:
                    cell = str(r.get(f"d{n}_{m}", "")).strip()
                    if not cell:
                        continue
                    if cell not in ("0", "1", "2"):
                        errors.append(f"{where}: d{n}_{m} must be 0, 1 or 2, got {cell!r}")
                        continue
                    judgments.append({"role_model": kk[f"role_{n}"], "language": kk["language"], "metric": m,
                                      "score": int(cell), "dialogue_id": kk[f"dialogue_id_{n}"],
                                      "annotator": Path(path).stem})
            choice = str(r.get("more_human_like", "")).strip().lower()
            if not choice:
                continue
            if choice not in CHOICES:
                errors.append(f"{where}: more_human_like must be 1, 2 or tie, got {choice!r}")
                continue
            comparisons.append({"agent_a": kk["role_1"], "agent_b": kk["role_2"],
                                "winner": {"1": "a", "2": "b", "tie": "tie"}[choice], "language": kk["language"]})
    if errors:
        raise AnalysisInputError(f"{len(errors)} bad cell(s): " + "; ".join(errors[:5]))
    return (pd.DataFrame(judgments, columns=["role_model", "language", "metric", "score", "dialogue_id", "annotator"]),
            pd.DataFrame(comparisons, columns=["agent_a", "agent_b", "winner", "language"]))


def win_rates_with_ci(comparisons: pd.DataFrame) -> pd.DataFrame:
    """win_rates (shares) plus Wilson 95% intervals of each share (scipy.stats.binomtest)."""
    rates = win_rates(comparisons)
    for c in ("win", "tie", "loss"):
        lo, hi = [], []
        for share, n in zip(rates[c], rates["n"]):
            ci = stats.binomtest(int(round(share * n)), int(n)).proportion_ci(method="wilson")
            lo.append(ci.low)
            hi.append(ci.high)
        rates[f"{c}_lo"], rates[f"{c}_hi"] = lo, hi
    return rates


def win_rate_markdown(rates: pd.DataFrame) -> str:
    lines = ["| Agent | Opponent | n | Win % [95% CI] | Tie % [95% CI] | Loss % [95% CI] |", "|---|---|---:|---|---|---|"]
    for r in rates.itertuples():
        cells = [f"{100 * getattr(r, c):.1f} [{100 * getattr(r, c + '_lo'):.1f}, {100 * getattr(r, c + '_hi'):.1f}]"
                 for c in ("win", "tie", "loss")]
        lines.append(f"| {r.agent} | {r.opponent} | {r.n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def roleplay_results(sheets: list[str | os.PathLike[str]], key: str | os.PathLike[str],
                     out: str | os.PathLike[str]) -> tuple[str, dict[str, str]]:
    """Table 1 (role-play metrics) and Figure 3 (win / tie / loss with Wilson CIs) from filled pairwise
    sheets: the Markdown and the written roleplay.md/.json (and figure3_win_rates.png) in `out`."""
    from esc_eval.analysis.results.outputs import records, write_markdown_json

    judgments, comparisons = import_pairwise_sheets(sheets, key)
    parts, data = [], {}
    if not judgments.empty:
        t1 = roleplay_table(judgments)
        parts.append("## Table 1: role-play metrics\n\n" + roleplay_markdown(t1))
        data["table1"] = records(t1)
    if not comparisons.empty:
        rates = win_rates_with_ci(comparisons)
        parts.append("## Figure 3: which dialogue is more human-like\n\n" + win_rate_markdown(rates))
        data["win_rates"] = records(rates)
        from esc_eval.analysis.figures.plots import win_rate_plot

        data["figure3"] = str(win_rate_plot(rates, Path(out) / "figure3_win_rates.png"))
    if not parts:
        raise AnalysisInputError("the sheets hold no filled cell")
    md = "\n".join(parts)
    return md, write_markdown_json(out, "roleplay", "# Role-play evaluation\n\n" + md, data)
