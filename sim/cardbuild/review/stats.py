"""Card statistics in the paper's layouts: Table 6 (stage counts), Table 9 (categories x tier),
and a Figure 5 style chart (nested donut: top categories inside, finest level known outside).

Works on any card file `sim.cards.card.load_cards` reads (the official JSON carries only the top
category `res`, so its Table 9 collapses to the top level) and on a build folder (its
manifest adds the stage counts).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from esc_eval.sim.cards.card import RoleCard, load_cards
from esc_eval.sim.cards.taxonomy import load_taxonomy

TABLE6_COLUMNS = ["Read", "Extract", "LLM_F", "Dedup", "Human_F", "High", "Middle"]
LANG_NAMES = {"en": "English", "zh": "Chinese"}


def stage_table(counts: dict[str, dict[str, int]]) -> pd.DataFrame:
    """Table 6 layout: one row per language, a column per stage (those the build reached)."""
    cols = [c for c in TABLE6_COLUMNS if c in counts]
    rows = []
    for lang in ("en", "zh"):
        rows.append({"Language": LANG_NAMES[lang], **{c: counts[c].get(lang, 0) for c in cols}})
    return pd.DataFrame(rows, columns=["Language", *cols])


def _tier(card: RoleCard) -> str:
    return card.quality or "unrated"


def category_table(cards: list[RoleCard], level: int | None = None) -> pd.DataFrame:
    """Table 9 layout: Category 1 / 2 / 3 with High and Middle counts (plus Unrated, Total).

    level None = the finest level every card has (3 when all cards carry category_3, else 1).
    All taxonomy rows are listed, zeros included; cards without a category go to 'Unknown'.
    """
    tax = load_taxonomy()
    if level is None:
        level = 3 if cards and all(c.category_3 for c in cards) else 1
    key = {1: "category_1", 2: "category_2", 3: "category_3"}[level]
    nodes = tax.level(level)
    table: dict[str, dict[str, int]] = {n.name: {"high": 0, "middle": 0, "unrated": 0, "invalid": 0} for n in nodes}
    for c in cards:
        name = getattr(c, key)
        node = tax.find(name) if name else None
        label = node.name if node is not None else "Unknown"
        table.setdefault(label, {"high": 0, "middle": 0, "unrated": 0, "invalid": 0})[_tier(c)] += 1
    rows = []
    for label, cnt in table.items():
        path = tax.path(label) if label != "Unknown" else ("Unknown", None, None)
        row = {f"Category {i + 1}": path[i] for i in range(level)}
        row.update(High=cnt["high"], Middle=cnt["middle"], Unrated=cnt["unrated"],
                   Total=cnt["high"] + cnt["middle"] + cnt["unrated"])
        rows.append(row)
    df = pd.DataFrame(rows)
    if "Unknown" not in table or table["Unknown"] == {"high": 0, "middle": 0, "unrated": 0, "invalid": 0}:
        df = df[df["Category 1"] != "Unknown"]
    return df.reset_index(drop=True)


def card_summary(cards: list[RoleCard]) -> dict[str, Any]:
    """Counts by language, source, quality, top category, age and gender."""
    def vc(values):
        return {str(k): int(v) for k, v in pd.Series(values, dtype="object").fillna("none").value_counts().items()}
    return {
        "cards": len(cards),
        "by_language": vc([c.language for c in cards]),
        "by_source": vc([c.source for c in cards]),
        "by_quality": vc([c.quality for c in cards]),
        "by_category_1": vc([c.category_1 for c in cards]),
        "by_language_category_1": {lang: vc([c.category_1 for c in cards if c.language == lang])
                                   for lang in sorted({c.language for c in cards})},
        "by_age": vc([c.age for c in cards]),
        "by_gender": vc([c.gender for c in cards]),
    }


def plot_distribution(cards: list[RoleCard], path: str | Path, title: str = "Role cards distribution") -> Path:
    """Figure 5 style: inner ring = top categories, outer ring = the finest level the cards carry."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tax = load_taxonomy()
    tops = tax.level(1)
    level = 3 if cards and all(c.category_3 for c in cards) else (2 if cards and all(c.category_2 for c in cards) else 1)
    inner = [sum(1 for c in cards if c.category_1 == t.name) for t in tops]
    cmaps = [plt.cm.Blues, plt.cm.Oranges, plt.cm.Greens]
    fig, ax = plt.subplots(figsize=(9, 9))
    inner_colors = [cmaps[i](0.7) for i in range(len(tops))]
    ax.pie(inner, radius=0.65, colors=inner_colors, labels=[f"{t.name}\n{n}" if n else "" for t, n in zip(tops, inner)],
           labeldistance=0.45, textprops={"fontsize": 8}, wedgeprops={"width": 0.35, "edgecolor": "white"})
    if level > 1:
        key = "category_3" if level == 3 else "category_2"
        sizes, colors, labels = [], [], []
        for i, t in enumerate(tops):
            kids = [n for n in tax.level(level) if tax.path(n.id)[0] == t.name]
            for j, kid in enumerate(kids):
                n = sum(1 for c in cards if getattr(c, key) == kid.name)
                if n:
                    sizes.append(n)
                    colors.append(cmaps[i](0.3 + 0.5 * j / max(1, len(kids))))
                    # tiny slices stay unlabelled (their labels would overlap); the CSV has every count
                    labels.append(f"{kid.name[:28]} ({n})" if n >= 0.01 * len(cards) else "")
        ax.pie(sizes, radius=1.0, colors=colors, labels=labels, labeldistance=1.05, textprops={"fontsize": 6},
               wedgeprops={"width": 0.35, "edgecolor": "white"})
    ax.set(aspect="equal", title=f"{title} (n={len(cards)})")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def resolve_cards_path(path: str | Path) -> tuple[Path, dict[str, Any] | None]:
    """A card file, or a build folder (final_cards.json if any, else cards.json) + its manifest."""
    path = Path(path)
    if path.is_dir():
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8")) if (path / "manifest.json").exists() else None
        for name in ("final_cards.json", "cards.json"):
            if (path / name).exists():
                return path / name, manifest
        raise FileNotFoundError(f"{path}: no final_cards.json or cards.json in this folder")
    return path, None


def tier_from_file_name(path: str | Path) -> str | None:
    """The release's card_high_*.json files hold only high-quality cards, with no quality field."""
    return "high" if Path(path).name.lower().startswith("card_high_") else None


def _with_tier(cards: list[RoleCard], tier: str | None) -> list[RoleCard]:
    return [c if c.quality or not tier else c.model_copy(update={"quality": tier}) for c in cards]


def write_stats(path: str | Path | list[str | Path], out: str | Path, assume_quality: str | None = None) -> dict[str, Any]:
    """Compute every table for card files or a build folder and write them under `out`.

    Several paths are pooled (e.g. card_high_en.json and card_high_zh.json: Table 9 in one call).
    assume_quality: the tier of cards that carry none; by default cards of the release's
    card_high_*.json files are high-quality (they hold only those, with no quality field).
    """
    if assume_quality not in (None, "high", "middle"):
        raise ValueError(f"assume_quality must be high or middle, got {assume_quality!r}")
    paths = path if isinstance(path, list) else [path]
    cards: list[RoleCard] = []
    sources, manifest = [], None
    for p in paths:
        cards_path, man = resolve_cards_path(p)
        manifest = man if len(paths) == 1 else None  # stage counts belong to one build
        cards += _with_tier(load_cards(cards_path), assume_quality or tier_from_file_name(cards_path))
        sources.append(str(cards_path))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"source": sources[0] if len(sources) == 1 else sources, "summary": card_summary(cards)}
    if manifest and manifest.get("counts"):
        t6 = stage_table(manifest["counts"])
        t6.to_csv(out / "table6_stages.csv", index=False)
        result["table6"] = t6.to_dict(orient="records")
    t9 = category_table(cards)
    t9.to_csv(out / "table9_categories.csv", index=False)
    result["table9"] = t9.to_dict(orient="records")
    top = category_table(cards, level=1)
    top.to_csv(out / "categories_top.csv", index=False)
    result["categories_top"] = top.to_dict(orient="records")
    result["figure"] = str(plot_distribution(cards, out / "figure5_distribution.png"))
    (out / "stats.json").write_text(json.dumps(result, ensure_ascii=False, indent=1, default=str), encoding="utf-8")
    return result
