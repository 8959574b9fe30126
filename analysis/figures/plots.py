"""PNG figures (matplotlib, Agg backend): radar per model, grouped bars with CI error bars,
score distributions, role-card categories (the paper's Figure 5) and throughput over time.

Each function writes one PNG and returns its path; with nothing to draw it raises
NothingToPlot, which the report turns into an in-place notice.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers / CI; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from esc_eval.analysis.results.leaderboard import TITLES  # noqa: E402
from esc_eval.analysis.results.loaders import AnalysisInputError  # noqa: E402
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSION_TITLES  # noqa: E402

DPI = 110
# CJK glyphs for Chinese category names when a CJK font is installed; DejaVu otherwise.
plt.rcParams["font.sans-serif"] = ["Noto Sans CJK SC", "WenQuanYi Zen Hei", "DejaVu Sans"]
plt.rcParams["axes.unicode_minus"] = False


class NothingToPlot(AnalysisInputError):
    pass


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def _languages(lb: pd.DataFrame) -> list[str]:
    return sorted(lb["language"].dropna().unique())


def _label(r) -> str:
    judge = f" ({r['judge']})" if r.get("_multi_judge") else ""
    return f"{r['model']}{judge}"


def _prepared(lb: pd.DataFrame) -> pd.DataFrame:
    if lb is None or lb.empty:
        raise NothingToPlot("the leaderboard is empty")
    return lb.assign(_multi_judge=lb["judge"].nunique() > 1)


def radar_plot(leaderboard: pd.DataFrame, path: str | Path) -> Path:
    """One radar (0-100) per language, a polygon per model over the seven dimensions."""
    lb = _prepared(leaderboard)
    langs = _languages(lb)
    angles = np.linspace(0, 2 * np.pi, len(TITLES), endpoint=False).tolist()
    fig, axes = plt.subplots(1, len(langs), subplot_kw={"projection": "polar"}, figsize=(5.5 * len(langs), 5.5),
                             squeeze=False)
    for ax, lang in zip(axes[0], langs):
        for _, r in lb[lb["language"] == lang].iterrows():
            vals = [r[t] for t in TITLES]
            if all(pd.isna(v) for v in vals):
                continue
            vals = [0 if pd.isna(v) else v for v in vals]
            ax.plot(angles + angles[:1], vals + vals[:1], linewidth=1.5, label=_label(r))
            ax.fill(angles + angles[:1], vals + vals[:1], alpha=0.08)
        ax.set_xticks(angles)
        ax.set_xticklabels(TITLES, fontsize=8)
        ax.set_ylim(0, 100)
        ax.set_title(f"{lang.upper()}: mean score x 25", pad=18)
        ax.legend(loc="upper right", bbox_to_anchor=(1.35, 1.1), fontsize=7)
    return _save(fig, path)


def dimension_bars(leaderboard: pd.DataFrame, path: str | Path) -> Path:
    """Grouped bars: per dimension (and Average) one bar per model, error bars = bootstrap 95% CI."""
    lb = _prepared(leaderboard)
    langs = _languages(lb)
    cols = TITLES + ["Average"]
    fig, axes = plt.subplots(len(langs), 1, figsize=(12, 3.8 * len(langs)), squeeze=False)
    for ax, lang in zip(axes[:, 0], langs):
        sub = lb[lb["language"] == lang].reset_index(drop=True)
        width = 0.8 / max(len(sub), 1)
        x = np.arange(len(cols))
        for i, r in sub.iterrows():
            vals = np.array([r[c] for c in cols], dtype=float)
            lo = np.array([r[f"{c}_lo"] for c in cols], dtype=float)
            hi = np.array([r[f"{c}_hi"] for c in cols], dtype=float)
            # No CI (one dialogue, or bootstrap off): draw the bar without an error bar.
            err = np.vstack([np.nan_to_num(vals - lo), np.nan_to_num(hi - vals)])
            ax.bar(x + (i - (len(sub) - 1) / 2) * width, np.nan_to_num(vals), width, yerr=err, capsize=2,
                   label=_label(r))
        ax.set_xticks(x)
        ax.set_xticklabels(cols)
        ax.set_ylim(0, 100)
        ax.set_ylabel("score x 25")
        ax.set_title(f"{lang.upper()}: per-dimension scores with 95% bootstrap CI")
        ax.legend(fontsize=7, ncol=min(4, max(1, len(sub))))
    return _save(fig, path)


def score_distributions(scores: pd.DataFrame, path: str | Path) -> Path:
    """Per dimension, the share of each score 0-4 (and unparsed) per model."""
    if scores is None or scores.empty:
        raise NothingToPlot("no score rows")
    s = scores.assign(label=scores["target_model"].astype(str) + " / " + scores["language"].fillna("?").astype(str))
    labels = sorted(s["label"].unique())
    cats = ["0", "1", "2", "3", "4", "n/a"]
    colors = ["#b2182b", "#ef8a62", "#fddbc7", "#92c5de", "#2166ac", "#999999"]
    fig, axes = plt.subplots(1, len(DIMENSION_NAMES), figsize=(2.6 * len(DIMENSION_NAMES), 0.5 * len(labels) + 2),
                             sharey=True)
    for ax, dim in zip(axes, DIMENSION_NAMES):
        sub = s[s["dimension"] == dim]
        left = np.zeros(len(labels))
        for cat, color in zip(cats, colors):
            share = []
            for lab in labels:
                g = sub[sub["label"] == lab]["score"]
                n = len(g)
                cnt = g.isna().sum() if cat == "n/a" else (g == float(cat)).sum()
                share.append(cnt / n if n else 0.0)
            ax.barh(labels, share, left=left, color=color, label=cat)
            left += np.array(share)
        ax.set_xlim(0, 1)
        ax.set_title(DIMENSION_TITLES[dim], fontsize=9)
        ax.tick_params(labelsize=7)
    axes[-1].legend(title="score", fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
    return _save(fig, path)


def card_categories(dialogues: pd.DataFrame, path: str | Path) -> Path:
    """Figure 5 style: nested rings of role cards by category_1 (inner) and category_2 (outer),
    counting each card once."""
    if dialogues is None or dialogues.empty or "category_1" not in dialogues.columns:
        raise NothingToPlot("no dialogue rows with categories")
    if dialogues["category_1"].isna().all():
        raise NothingToPlot("the dialogues carry no card categories")
    key = [c for c in ("language", "card_id") if c in dialogues.columns]
    cards = dialogues.drop_duplicates(key) if "card_id" in key else dialogues
    cards = cards.assign(category_1=cards["category_1"].fillna("unknown"), category_2=cards["category_2"].fillna("unknown"))
    if cards.empty:
        raise NothingToPlot("no cards")
    inner = cards.groupby("category_1").size().sort_values(ascending=False)
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(8, 8))
    inner_colors = [cmap(2 * i % 20) for i in range(len(inner))]
    outer_vals, outer_labels, outer_colors = [], [], []
    for i, c1 in enumerate(inner.index):
        sub = cards[cards["category_1"] == c1].groupby("category_2").size().sort_values(ascending=False)
        for c2, n in sub.items():
            outer_vals.append(n)
            outer_labels.append(f"{c2} ({n})")
            outer_colors.append(cmap((2 * i + 1) % 20))
    ax.pie(inner.values, radius=0.65, labels=[f"{c} ({n})" for c, n in inner.items()], labeldistance=0.35,
           colors=inner_colors, wedgeprops=dict(width=0.35, edgecolor="w"), textprops={"fontsize": 8})
    ax.pie(outer_vals, radius=1.0, labels=outer_labels, labeldistance=1.05, colors=outer_colors,
           wedgeprops=dict(width=0.35, edgecolor="w"), textprops={"fontsize": 7})
    ax.set_title(f"Role cards by category ({len(cards)} cards)")
    return _save(fig, path)


def _parse_at(value) -> dt.datetime | None:
    try:
        return pd.Timestamp(value).to_pydatetime()
    except (ValueError, TypeError):
        return None


def throughput_plot(dialogues: pd.DataFrame | None, events: list[dict] | None, path: str | Path) -> Path:
    """Throughput over time: completed dialogues per minute and cumulative (from dialogue
    finished_at), with the manifest's events (simulation/scoring start and end) as markers."""
    have_rows = dialogues is not None and not dialogues.empty and dialogues["finished_at"].notna().any()
    marks = [(e.get("kind", "?"), _parse_at(e.get("at"))) for e in (events or [])]
    marks = [(k, t) for k, t in marks if t is not None]
    if not have_rows and not marks:
        raise NothingToPlot("no finished dialogues and no manifest events")
    if have_rows:
        # Events outside the dialogues' time window (e.g. a later re-score) would squash the
        # curve into a line: keep those within the window, padded by 5 minutes.
        lo = pd.to_datetime(dialogues["started_at"]).min()
        lo = pd.to_datetime(dialogues["finished_at"]).min() if pd.isna(lo) else lo
        hi = pd.to_datetime(dialogues["finished_at"]).max()
        pad = pd.Timedelta(minutes=5)
        marks = [(k, t) for k, t in marks if lo - pad <= pd.Timestamp(t) <= hi + pad]
    fig, ax = plt.subplots(figsize=(10, 4))
    if have_rows:
        fin = dialogues.dropna(subset=["finished_at"]).sort_values("finished_at")
        for status, g in fin.groupby("status"):
            t = pd.to_datetime(g["finished_at"])
            ax.step(t, np.arange(1, len(g) + 1), where="post", label=f"cumulative {status} dialogues")
        ok = fin[fin["status"] == "ok"]
        if len(ok) > 1:
            per_min = pd.Series(1, index=pd.to_datetime(ok["finished_at"])).resample("1min").sum()
            ax2 = ax.twinx()
            ax2.bar(per_min.index, per_min.values, width=1 / 1440 * 0.9, alpha=0.3, color="gray",
                    label="ok dialogues / minute")
            ax2.set_ylabel("dialogues / minute")
    for kind, t in marks:
        ax.axvline(t, color="red" if kind.endswith("end") else "green", linestyle="--", linewidth=0.8)
        ax.annotate(kind, (t, ax.get_ylim()[1]), rotation=90, fontsize=7, va="top")
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel("dialogues")
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("Throughput over time")
    fig.autofmt_xdate()
    return _save(fig, path)


def win_rate_plot(rates: pd.DataFrame, path: str | Path) -> Path:
    """Figure 3 style: per (agent vs opponent) a stacked horizontal bar of win / tie / loss shares
    (input: analysis.seekers.roleplay.win_rates)."""
    if rates is None or rates.empty:
        raise NothingToPlot("no pairwise comparisons")
    labels = [f"{a} vs {o} (n={n})" for a, o, n in zip(rates["agent"], rates["opponent"], rates["n"])]
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rates) + 1.2))
    left = np.zeros(len(rates))
    for col, color in (("win", "#2166ac"), ("tie", "#bbbbbb"), ("loss", "#b2182b")):
        vals = rates[col].to_numpy(dtype=float)
        ax.barh(labels, vals, left=left, color=color, label=col)
        for y, (x0, v) in enumerate(zip(left, vals)):
            if v >= 0.08:
                ax.text(x0 + v / 2, y, f"{100 * v:.0f}%", ha="center", va="center", fontsize=7, color="white")
        left += vals
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("share of judgments")
    ax.legend(ncol=3, fontsize=8, loc="lower right")
    ax.set_title("Which dialogue is more human-like: win rates")
    return _save(fig, path)
