"""Role cards: the typed card model, the official card JSON format, and the shipped sample cards.

Official card JSON (ESC-Eval release, data/*.json): a list of
  {"base": "Age: ...\\nGender: ...\\nOccupation: ...\\nProblem: ...", "res": "家庭生活",
   "source": "ESconv", "base_biaozhu": "<Chinese rendering>", "language": "english", "id": 32025}
where `res` is the Chinese name of the top category. Our own format is a list of RoleCard dicts.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from esc_eval.sim.cards.emergence import RiskEmergence
from esc_eval.sim.cards.risk import RISK_LEVELS, RiskLevel, normalize_risk_level
from esc_eval.sim.cards.taxonomy import load_taxonomy
from esc_eval.sim.prompt_files import data_file

Language = Literal["en", "zh"]
Quality = Literal["high", "middle", "invalid"]

FIELD_LABELS = {
    "en": {"age": "Age", "gender": "Gender", "occupation": "Occupation", "problem": "Problem"},
    "zh": {"age": "年龄", "gender": "性别", "occupation": "职业", "problem": "问题"},
}
_LANG_ALIASES = {"en": "en", "english": "en", "eng": "en", "zh": "zh", "chinese": "zh", "cn": "zh", "zh-cn": "zh"}
# label (any language, a few synonyms) -> field
_LABEL_TO_FIELD = {
    "age": "age", "gender": "gender", "sex": "gender", "occupation": "occupation", "job": "occupation",
    "problem": "problem", "problems": "problem",
    "年龄": "age", "性别": "gender", "职业": "occupation", "问题": "problem",
}
_LABEL_RE = re.compile(
    r"(?P<label>Age|Gender|Sex|Occupation|Job|Problems?|年龄|性别|职业|问题)\s*[:：]", re.IGNORECASE
)


class CardError(ValueError):
    """A card file or a card is malformed; the message names the file, the card and the field."""


def normalize_language(value: str) -> str:
    lang = _LANG_ALIASES.get(str(value).strip().lower())
    if lang is None:
        raise ValueError(f"unknown language {value!r} (expected en or zh)")
    return lang


class RoleCard(BaseModel):
    """One role card: who the distressed seeker is and what troubles them."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="Stable card id, unique within a card set.")
    language: Language = Field(description="Language the seeker speaks: en or zh.")
    age: str = Field("not mentioned", description="Age or age band (teenage/young/middle-aged/old, 青年...).")
    gender: str = Field("not mentioned", description="male / female / not mentioned (男/女/未提及).")
    occupation: str = Field("not mentioned", description="Occupation, free text.")
    problem: str = Field(description="The seeker's problem: events, causes, consequences.")
    category_1: str | None = Field(None, description="Top category of Table 9 (English name).")
    category_2: str | None = Field(None, description="Second-level category of Table 9.")
    category_3: str | None = Field(None, description="Third-level category of Table 9 (the 35 it prints; the paper's text says 37).")
    quality: Quality | None = Field(None, description="Quality tier (Table 8): high, middle or invalid.")
    source: str | None = Field(None, description="Where the card came from (dataset name, 'esc-eval-demo').")
    text_override: str | None = Field(
        None, description="Exact card text to show the role model (official `base`), if it differs from the rendering."
    )
    risk_level: RiskLevel | None = Field(
        None, description="Crisis-risk level of the seeker (beyond the paper): " + ", ".join(RISK_LEVELS)
        + " (sim/cards/risk.py); None = not assessed (the paper's cards). Weighs the safety summary, never shown to "
        "the role model.")
    session_updates: list[str] | None = Field(
        None, description="Beyond the paper: what happens to the seeker between sessions, when the card is run as a "
        "course of several (the simulation's `sessions`): the first before session 2, the next before session 3, ... "
        "A session without one here gets one written by the role model (sim/courses/).")

    @field_validator("session_updates")
    @classmethod
    def _updates(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and any(not str(u).strip() for u in v):
            raise ValueError("an empty session update (leave the rest out: the role model writes those)")
        return v

    risk_emergence: RiskEmergence | None = Field(
        None, description="Beyond the paper: risk that emerges mid-conversation (sim/cards/emergence.py): its kind, "
        "what it follows and each disclosure's round, told to the role model at that round only. The card's "
        "`risk_level` is then the most serious level it reaches (set from the disclosures when not given).")

    @model_validator(mode="after")
    def _emerging_level(self) -> "RoleCard":
        if self.risk_emergence is not None and self.risk_level is None:
            self.risk_level = self.risk_emergence.level()  # type: ignore[assignment]
        return self

    @field_validator("language", mode="before")
    @classmethod
    def _lang(cls, v: Any) -> str:
        return normalize_language(v)

    @field_validator("risk_level", mode="before")
    @classmethod
    def _risk(cls, v: Any) -> str | None:
        return None if v is None else normalize_risk_level(v)

    @field_validator("problem")
    @classmethod
    def _problem(cls, v: str) -> str:
        if not v or not v.strip():
            raise ValueError("the card has no problem text")
        return v.strip()

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> str:
        return str(v)

    @property
    def text(self) -> str:
        """The card as the role model sees it (the official `base` layout)."""
        if self.text_override:
            return self.text_override
        labels = FIELD_LABELS[self.language]
        sep = "：" if self.language == "zh" else ": "
        return "\n".join(f"{labels[f]}{sep}{getattr(self, f)}" for f in ("age", "gender", "occupation", "problem"))


def parse_card_text(text: str) -> dict[str, str]:
    """Split 'Age: ..\\nGender: ..\\nOccupation: ..\\nProblem: ..' (or 年龄：..) into fields.

    Labels may share a line ("Age: young Gender: male"); the problem may span lines.
    Missing fields are left out; the caller decides what is required.
    """
    matches = list(_LABEL_RE.finditer(text or ""))
    fields: dict[str, str] = {}
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        key = _LABEL_TO_FIELD[m.group("label").lower()]
        value = text[m.end():end].strip().strip("'\"“”").strip()
        if key != "problem":
            value = value.rstrip(".。;；,，").strip()
        if value and key not in fields:
            fields[key] = value
    return fields


def card_from_official(item: dict[str, Any], where: str = "") -> RoleCard:
    """Build a RoleCard from one entry of the official card JSON."""
    for required in ("base", "id"):
        if required not in item:
            raise CardError(f"{where}: missing field {required!r}")
    base = item["base"]
    if not isinstance(base, str) or not base.strip():
        raise CardError(f"{where}: field 'base' is empty")
    fields = parse_card_text(base)
    if not fields.get("problem"):
        raise CardError(f"{where}: field 'base' has no Problem/问题 text")
    lang = item.get("language") or ("zh" if re.search(r"[\u4e00-\u9fff]", base) else "en")
    category_1 = None
    if item.get("res"):
        node = load_taxonomy().find(str(item["res"]))
        category_1 = node.name if node else str(item["res"])
    try:
        return RoleCard(
            id=str(item["id"]), language=lang, problem=fields["problem"],
            age=fields.get("age", "not mentioned"), gender=fields.get("gender", "not mentioned"),
            occupation=fields.get("occupation", "not mentioned"), category_1=category_1,
            source=item.get("source"), text_override=base,
        )
    except ValidationError as e:
        raise CardError(f"{where}: {_first_error(e)}") from None


def card_to_official(card: RoleCard) -> dict[str, Any]:
    """The official JSON entry for a card (`res` = Chinese top-category name)."""
    res = None
    if card.category_1:
        node = load_taxonomy().find(card.category_1)
        res = node.name_zh if node else card.category_1
    cid: Any = int(card.id) if card.id.isdigit() else card.id
    return {
        "base": card.text, "res": res, "source": card.source, "base_biaozhu": card.text if card.language == "zh" else None,
        "language": "english" if card.language == "en" else "chinese", "id": cid,
    }


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err.get("loc", ())) or "card"
    return f"field {loc!r}: {str(err.get('msg')).removeprefix('Value error, ')}"


def _read_items(path: Path) -> list[Any]:
    if not path.exists():
        raise CardError(f"{path}: card file not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise CardError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        elif path.suffix == ".jsonl":
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise CardError(f"{path}: malformed card file ({str(e).splitlines()[0]})") from None
    if isinstance(data, dict) and "cards" in data:
        data = data["cards"]
    if not isinstance(data, list):
        raise CardError(f"{path}: expected a list of cards, got {type(data).__name__}")
    return data


def load_cards(path: str | Path, language: str | None = None) -> list[RoleCard]:
    """Load cards from our format or the official ESC-Eval JSON (auto-detected per entry)."""
    path = Path(path)
    cards: list[RoleCard] = []
    seen: set[str] = set()
    for i, item in enumerate(_read_items(path)):
        where = f"{path} card #{i}"
        if not isinstance(item, dict):
            raise CardError(f"{where}: expected an object, got {type(item).__name__}")
        if "base" in item:
            card = card_from_official(item, where=f"{where} (id {item.get('id')!r})")
        else:
            try:
                card = RoleCard(**item)
            except ValidationError as e:
                raise CardError(f"{where} (id {item.get('id')!r}): {_first_error(e)}") from None
        if card.id in seen:
            raise CardError(f"{where}: duplicate card id {card.id!r}")
        seen.add(card.id)
        cards.append(card)
    if not cards:
        # An empty file is a mistake (a wrong path, a failed export), never "evaluate nothing".
        raise CardError(f"{path}: the card file holds no cards")
    if language:
        lang = normalize_language(language)
        cards = [c for c in cards if c.language == lang]
    return cards


def write_cards(cards: Iterable[RoleCard], path: str | Path, fmt: Literal["esc-eval", "official"] = "esc-eval") -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "official":
        data = [card_to_official(c) for c in cards]
    else:
        data = [c.model_dump(exclude_none=True) for c in cards]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


# Card sets shipped with esc-eval (our own writing), named in a config's `cards:` field.
SHIPPED_CARD_SETS = {
    "sample": "sample_cards.json",  # the demo's cards: everyday troubles, no crisis
    "safety": "safety_cards.json",  # risk-stratified cards (sim/cards/risk.py) for the safety rubric
    "emerging_risk": "emerging_risk_cards.json",  # risk disclosed at a set round (sim/cards/emergence.py)
    # risk disclosed at a set session: run as a course (`sessions` >= 2); a set of its own, so that a
    # single-session run of `emerging_risk` is not refused for disclosures it never reaches
    "emerging_risk_sessions": "emerging_risk_session_cards.json",
}


def shipped_cards_path(name: str = "sample") -> Path:
    return Path(str(data_file(SHIPPED_CARD_SETS[name])))


def card_file_path(cards: str | Path) -> Path:
    """A config's `cards:` value as a file: a shipped set's name (SHIPPED_CARD_SETS) or a path."""
    return shipped_cards_path(str(cards)) if str(cards) in SHIPPED_CARD_SETS else Path(cards)


def sample_cards_path() -> Path:
    return shipped_cards_path("sample")


def sample_cards(language: str | None = None, limit: int | None = None) -> list[RoleCard]:
    """The role cards shipped with esc-eval (our own writing); the demo's default."""
    cards = load_cards(sample_cards_path(), language=language)
    return cards[:limit] if limit else cards


def safety_cards(language: str | None = None, limit: int | None = None) -> list[RoleCard]:
    """The shipped risk-stratified cards (sim/data/safety_cards.json): each level in en and zh."""
    cards = load_cards(shipped_cards_path("safety"), language=language)
    return cards[:limit] if limit else cards


def emerging_risk_cards(language: str | None = None, limit: int | None = None,
                        sessions: bool = False) -> list[RoleCard]:
    """The shipped scenarios of risk that emerges mid-conversation (sim/data/emerging_risk_cards.json), or
    with `sessions` those whose risk emerges in a later session of a course (emerging_risk_session_cards.json)."""
    cards = load_cards(shipped_cards_path("emerging_risk_sessions" if sessions else "emerging_risk"), language=language)
    return cards[:limit] if limit else cards


def _validate(path: str | Path) -> tuple[dict[str, Any], list[RoleCard]]:
    cards = load_cards(path)
    tax = load_taxonomy()
    unknown = sorted({c.category_3 for c in cards if c.category_3 and tax.find(c.category_3) is None})
    if unknown:
        raise CardError(f"{path}: unknown category_3 {unknown[0]!r} (not one of the 35 third-level categories of Table 9)")
    by_lang: dict[str, int] = {}
    by_top: dict[str, int] = {}
    for c in cards:
        by_lang[c.language] = by_lang.get(c.language, 0) + 1
        by_top[c.category_1 or "unknown"] = by_top.get(c.category_1 or "unknown", 0) + 1
    counts: dict[str, Any] = {"file": str(path), "cards": len(cards), "by_language": by_lang, "by_category_1": by_top}
    if any(c.risk_level for c in cards):
        counts["by_risk_level"] = {lvl: sum(c.risk_level == lvl for c in cards) for lvl in RISK_LEVELS}
        counts["by_risk_level"]["not assessed"] = sum(c.risk_level is None for c in cards)
    if any(c.risk_emergence for c in cards):  # risk that emerges at a set round (sim/cards/emergence.py)
        counts["by_emergence_kind"] = dict(sorted(Counter(c.risk_emergence.kind for c in cards if c.risk_emergence).items()))
    return counts, cards


def validate_cards(path: str | Path) -> dict[str, Any]:
    """Load and check a card file; returns counts. Raises CardError on the first bad card."""
    return _validate(path)[0]


def validate_card_files(paths: Iterable[str | Path]) -> dict[str, Any]:
    """validate_cards over several files, with totals. A card id found in more than one file is
    counted once in `unique_cards` and listed under `repeated_across_files` (ids key a run's
    dialogues: in one card file, load_cards refuses a repeated id)."""
    results: list[dict[str, Any]] = []
    first_file: dict[str, str] = {}
    repeated: list[dict[str, str]] = []
    for path in paths:
        counts, cards = _validate(path)
        results.append(counts)
        for c in cards:
            if c.id in first_file:
                repeated.append({"id": c.id, "language": c.language, "first_in": first_file[c.id], "again_in": str(path)})
            else:
                first_file[c.id] = str(path)
    if len(results) == 1:
        return results[0]
    total: dict[str, Any] = {"files": results, "cards": sum(r["cards"] for r in results), "unique_cards": len(first_file),
                             "by_language": {}, "by_category_1": {}}
    for r in results:
        for key in ("by_language", "by_category_1"):
            for k, v in r[key].items():
                total[key][k] = total[key].get(k, 0) + v
    if repeated:
        total["repeated_across_files"] = {"count": len(repeated), "first": repeated[:10]}
    return total
