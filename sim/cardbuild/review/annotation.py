"""Human annotation (Appendix A.2): sheets for two annotators, the correction rules, a reviewer.

Flow: `export_card_annotation_sheets` writes annotation/<annotator>.csv (one row per card, columns to
fill: quality = high | middle | invalid, category_3 = a Table 9 leaf by number, id, English or
Chinese name) and annotation/instructions.md (Table 7/8 rules + the numbered leaves). Filled
sheets are read back with `read_annotator_sheet`; `apply_correction_rules` applies A.2:
  * a card either annotator marked invalid is discarded;
  * both said the same tier -> that tier; one high and one middle -> the third reviewer decides
    (high or middle). The paper adds "the remaining role cards were considered middle-quality":
    `unreviewed_tier="middle"` applies that to disagreements the reviewer left blank; the
    default "pending" waits for the reviewer;
  * (for high/middle cards) both gave the same third-level category -> accepted; they differ ->
    the reviewer's category.
`export_reviewer_sheet` lists what needs the reviewer with both annotators' answers;
`read_reviewer_sheet` reads the decisions back. `agreement` gives Cohen's kappa on the tier
(three labels, over cards both annotated) and percent agreement on the category (over cards
both gave a category). Bad cells never crash: they are reported as `SheetError`s and the row
counts as not annotated.
"""
from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal

from esc_eval.sim.cardbuild.checkpoint import atomic_write_text
from esc_eval.sim.cards.card import RoleCard
from esc_eval.sim.cards.taxonomy import load_taxonomy

TIERS = ("high", "middle", "invalid")
_TIER_ALIASES = {
    "high": "high", "h": "high", "高": "high", "高质量": "high",
    "middle": "middle", "medium": "middle", "mid": "middle", "m": "middle", "中": "middle", "中等": "middle",
    "invalid": "invalid", "i": "invalid", "discard": "invalid", "无效": "invalid", "低": "invalid",
}
ANNOTATOR_COLUMNS = ["card_id", "language", "source", "age", "gender", "occupation", "problem",
                     "llm_category_3", "quality", "category_3", "comment"]
REVIEWER_COLUMNS = ["card_id", "language", "problem", "needs", "annotator_a", "quality_a", "category_3_a",
                    "annotator_b", "quality_b", "category_3_b", "quality", "category_3", "comment"]

INSTRUCTIONS = """# Role-card annotation instructions (ESC-Eval, Appendix A.2, Tables 7-8)

For every row fill two cells: **quality** and **category_3**. Leave `llm_category_3` alone (a
machine suggestion, possibly wrong; `keyword-fallback` marks a keyword guess).

## quality: one of `high`, `middle`, `invalid` (Table 8)

- **invalid**: (1) the card only holds subjective emotions and thoughts, with no event that
  causes them; or (2) there are events, but no suitable fine-grained category fits them.
- **middle**: (1) events occur and fit a fine-grained category; (2) the causes of the events and
  their consequences are NOT presented; (3) for interpersonal problems, the other person's image
  is absent.
- **high**: (1) events occur and fit a fine-grained category; (2) the causes and the
  consequences are presented; (3) for interpersonal problems, the other person in the
  relationship is portrayed, introduced and described.

There is no absolute boundary: valid vs invalid depends on whether the events can be
classified; high vs middle on whether event, cause, result and details can be identified.

## category_3: the third-level category (Table 9)

Write the number, the id, or the name (English or Chinese) of one category below. Leave it
empty for invalid cards.

{leaves}

## What happens next (correction rules)

A card either annotator marks invalid is discarded. If one says high and the other middle, a
third reviewer decides. If the two categories differ, the reviewer decides the category.
"""


@dataclass
class Vote:
    """One annotator's answer for one card."""

    quality: str | None
    category_3: str | None  # leaf id


@dataclass
class SheetError:
    sheet: str
    row: int
    card_id: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.sheet} row {self.row} (card {self.card_id}): field {self.field!r}: {self.message}"


@dataclass
class CardDecision:
    card_id: str
    status: Literal["accepted", "discarded", "needs_review", "pending"]
    quality: str | None = None
    category_3: str | None = None
    needs: list[str] = field(default_factory=list)  # "tier", "category"
    reason: str = ""


@dataclass
class AnnotationOutcome:
    decisions: dict[str, CardDecision]
    errors: list[SheetError] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        c = Counter(d.status for d in self.decisions.values())
        c.update(f"accepted_{d.quality}" for d in self.decisions.values() if d.status == "accepted")
        return dict(c)


def leaf_listing() -> list[tuple[int, str, str, str]]:
    """(number, id, English name, Chinese name) of the third-level categories, in Table 9 order."""
    return [(i, leaf.id, leaf.name, leaf.name_zh) for i, leaf in enumerate(load_taxonomy().leaves(), 1)]


def resolve_leaf(value: str) -> str | None:
    """A category cell (number, id, English or Chinese name) -> leaf id; None if it names no leaf."""
    v = (value or "").strip()
    if not v:
        return None
    if v.isdigit():
        listing = leaf_listing()
        n = int(v)
        return listing[n - 1][1] if 1 <= n <= len(listing) else None
    node = load_taxonomy().find(v)
    return node.id if node is not None and node.level == 3 else None


def _csv_text(columns: list[str], rows: Iterable[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def _read_csv(path: Path) -> list[dict[str, str]]:
    text = path.read_text(encoding="utf-8-sig")
    return list(csv.DictReader(io.StringIO(text)))


def write_instructions(folder: Path) -> Path:
    leaves = "\n".join(f"{n}. `{lid}` - {en} / {zh}" for n, lid, en, zh in leaf_listing())
    return atomic_write_text(folder / "instructions.md", INSTRUCTIONS.replace("{leaves}", leaves))


def export_card_annotation_sheets(cards: list[RoleCard], folder: str | Path, annotators: list[str],
                             llm_labels: dict[str, str] | None = None) -> list[Path]:
    """Write (or extend with new cards, keeping filled rows) one CSV per annotator + instructions.md."""
    folder = Path(folder)
    write_instructions(folder)
    llm_labels = llm_labels or {}
    paths = []
    for name in annotators:
        path = folder / f"{name}.csv"
        rows = _read_csv(path) if path.exists() else []
        have = {r.get("card_id") for r in rows}
        for c in cards:
            if c.id in have:
                continue
            rows.append({"card_id": c.id, "language": c.language, "source": c.source or "", "age": c.age,
                         "gender": c.gender, "occupation": c.occupation, "problem": c.problem,
                         "llm_category_3": llm_labels.get(c.id, ""), "quality": "", "category_3": "", "comment": ""})
        atomic_write_text(path, _csv_text(ANNOTATOR_COLUMNS, rows))
        paths.append(path)
    return paths


def read_annotator_sheet(path: str | Path) -> tuple[dict[str, Vote], list[SheetError]]:
    """Votes by card id (rows with an empty quality are not annotated yet) and the bad cells."""
    path = Path(path)
    votes: dict[str, Vote] = {}
    errors: list[SheetError] = []
    try:
        rows = _read_csv(path)
    except UnicodeDecodeError:
        return votes, [SheetError(path.name, 0, "", "(file)", "not UTF-8 text")]
    for n, row in enumerate(rows, 2):  # row 1 is the header
        cid = (row.get("card_id") or "").strip()
        raw_q = (row.get("quality") or "").strip()
        if not cid or not raw_q:
            continue
        q = _TIER_ALIASES.get(raw_q.lower())
        if q is None:
            errors.append(SheetError(path.name, n, cid, "quality", f"{raw_q!r} is not high, middle or invalid"))
            continue
        raw_c = (row.get("category_3") or "").strip()
        cat = resolve_leaf(raw_c)
        if q != "invalid" and cat is None:
            msg = "empty (required unless invalid)" if not raw_c else f"{raw_c!r} is not a third-level category"
            errors.append(SheetError(path.name, n, cid, "category_3", msg))
            continue
        votes[cid] = Vote(q, cat if q != "invalid" else None)
    return votes, errors


def read_reviewer_sheet(path: str | Path) -> tuple[dict[str, Vote], list[SheetError]]:
    """The reviewer's decisions by card id: quality (high|middle) and/or category_3."""
    path = Path(path)
    out: dict[str, Vote] = {}
    errors: list[SheetError] = []
    if not path.exists():
        return out, errors
    for n, row in enumerate(_read_csv(path), 2):
        cid = (row.get("card_id") or "").strip()
        raw_q = (row.get("quality") or "").strip()
        raw_c = (row.get("category_3") or "").strip()
        if not cid or (not raw_q and not raw_c):
            continue
        q = _TIER_ALIASES.get(raw_q.lower()) if raw_q else None
        if raw_q and q not in ("high", "middle"):
            errors.append(SheetError(path.name, n, cid, "quality", f"{raw_q!r}: the reviewer decides high or middle"))
            q = None
        cat = resolve_leaf(raw_c) if raw_c else None
        if raw_c and cat is None:
            errors.append(SheetError(path.name, n, cid, "category_3", f"{raw_c!r} is not a third-level category"))
        out[cid] = Vote(q, cat)
    return out, errors


def apply_correction_rules(card_ids: Iterable[str], a: dict[str, Vote], b: dict[str, Vote],
                           reviewer: dict[str, Vote] | None = None, *,
                           unreviewed_tier: Literal["pending", "middle"] = "pending") -> AnnotationOutcome:
    """Appendix A.2's rules over two annotators' votes (and the reviewer's decisions, if any)."""
    reviewer = reviewer or {}
    decisions: dict[str, CardDecision] = {}
    for cid in card_ids:
        va, vb, vr = a.get(cid), b.get(cid), reviewer.get(cid)
        if va is None or vb is None:
            if (va and va.quality == "invalid") or (vb and vb.quality == "invalid"):
                decisions[cid] = CardDecision(cid, "discarded", reason="marked invalid by an annotator")
            else:
                decisions[cid] = CardDecision(cid, "pending", reason="not annotated by both annotators")
            continue
        if "invalid" in (va.quality, vb.quality):
            decisions[cid] = CardDecision(cid, "discarded", reason="marked invalid by an annotator")
            continue
        d = CardDecision(cid, "accepted")
        if va.quality == vb.quality:
            d.quality = va.quality
        elif vr and vr.quality:
            d.quality = vr.quality
        else:
            d.needs.append("tier")
            if unreviewed_tier == "middle":
                d.quality = "middle"
        if va.category_3 == vb.category_3:
            d.category_3 = va.category_3
        elif vr and vr.category_3:
            d.category_3 = vr.category_3
        else:
            d.needs.append("category")
        if d.quality is None or d.category_3 is None:
            d.status = "needs_review"
            d.reason = "annotators disagree on " + " and ".join(d.needs)
        decisions[cid] = d
    return AnnotationOutcome(decisions)


def export_reviewer_sheet(outcome: AnnotationOutcome, cards: list[RoleCard], a: dict[str, Vote], b: dict[str, Vote],
                          path: str | Path, names: tuple[str, str] = ("annotator_1", "annotator_2")) -> Path:
    """The cards waiting for the third reviewer, with both answers; keeps decisions already filled."""
    path = Path(path)
    by_id = {c.id: c for c in cards}
    old = {r["card_id"]: r for r in _read_csv(path)} if path.exists() else {}
    rows = []
    for cid, d in outcome.decisions.items():
        if d.status != "needs_review" and cid not in old:
            continue
        card = by_id.get(cid)
        prev = old.get(cid, {})
        rows.append({
            "card_id": cid, "language": card.language if card else "", "problem": card.problem if card else "",
            "needs": "+".join(d.needs) or prev.get("needs", ""),
            "annotator_a": names[0], "quality_a": a[cid].quality if cid in a else "",
            "category_3_a": (a[cid].category_3 or "") if cid in a else "",
            "annotator_b": names[1], "quality_b": b[cid].quality if cid in b else "",
            "category_3_b": (b[cid].category_3 or "") if cid in b else "",
            "quality": prev.get("quality", ""), "category_3": prev.get("category_3", ""), "comment": prev.get("comment", ""),
        })
    return atomic_write_text(path, _csv_text(REVIEWER_COLUMNS, rows))


def cohen_kappa(x: list[str], y: list[str]) -> float | None:
    """Cohen's kappa of two raters' labels (None with no items; 1.0 when both are constant and equal)."""
    if len(x) != len(y):
        raise ValueError("the two label lists differ in length")
    n = len(x)
    if n == 0:
        return None
    po = sum(1 for i, j in zip(x, y) if i == j) / n
    cx, cy = Counter(x), Counter(y)
    pe = sum(cx[k] * cy[k] for k in set(cx) | set(cy)) / (n * n)
    if pe == 1.0:
        return 1.0 if po == 1.0 else 0.0
    return (po - pe) / (1 - pe)


def agreement(a: dict[str, Vote], b: dict[str, Vote]) -> dict[str, float | int | None]:
    """Cohen's kappa on the tier and percent agreement on the third-level category."""
    both = sorted(set(a) & set(b))
    tiers_a = [a[c].quality for c in both]
    tiers_b = [b[c].quality for c in both]
    cats = [c for c in both if a[c].category_3 and b[c].category_3]
    same = sum(1 for c in cats if a[c].category_3 == b[c].category_3)
    return {
        "n_tier": len(both),
        "kappa_tier": None if not both else round(cohen_kappa(tiers_a, tiers_b), 4),
        "tier_percent_agreement": None if not both else round(100 * sum(x == y for x, y in zip(tiers_a, tiers_b)) / len(both), 2),
        "n_category": len(cats),
        "category_percent_agreement": None if not cats else round(100 * same / len(cats), 2),
    }


def finalize_cards(cards: list[RoleCard], outcome: AnnotationOutcome) -> list[RoleCard]:
    """The accepted cards with their corrected quality and category path."""
    tax = load_taxonomy()
    out = []
    for c in cards:
        d = outcome.decisions.get(c.id)
        if d is None or d.status != "accepted":
            continue
        c1, c2, c3 = tax.path(d.category_3)
        out.append(c.model_copy(update={"quality": d.quality, "category_1": c1, "category_2": c2, "category_3": c3}))
    return out
