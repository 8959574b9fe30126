"""Parse an extraction reply into card fields, normalised to the paper's vocabularies.

Age: teenage / young / middle-aged / old / not mentioned (zh: 少年 / 青年 / 中年 / 老年 / 未提及).
Numbers map to bands: <18 teenage, 18-35 young, 36-59 middle-aged, >=60 old ("in her 40s" ->
middle-aged). Gender: male / female / not mentioned (男 / 女 / 未提及). Values are written in
the card's language whatever language the model answered in. Occupation is free text ("not
mentioned" spellings unified). A reply missing any of the four fields, or with no real problem
text, is rejected with the reason (`CardFieldsError`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from esc_eval.sim.cards.card import parse_card_text

AGE_BANDS = ("teenage", "young", "middle-aged", "old")
AGE_VOCAB = {
    "en": {"teenage": "teenage", "young": "young", "middle-aged": "middle-aged", "old": "old", None: "not mentioned"},
    "zh": {"teenage": "少年", "young": "青年", "middle-aged": "中年", "old": "老年", None: "未提及"},
}
GENDER_VOCAB = {
    "en": {"male": "male", "female": "female", None: "not mentioned"},
    "zh": {"male": "男", "female": "女", None: "未提及"},
}
NOT_MENTIONED = {"en": "not mentioned", "zh": "未提及"}
REQUIRED = ("age", "gender", "occupation", "problem")

_NOT_MENTIONED_RE = re.compile(
    r"^(not\s*(mentioned|specified|given|stated|provided|known|clear)|unknown|unspecified|n/?a|none|no|nil|-+|"
    r"未提及|未提到|未知|不详|不明|未说明|无|没有提及|未给出)$", re.IGNORECASE)
_AGE_WORDS: list[tuple[str, str]] = [
    # order matters: "middle" before "young adult" style overlaps
    (r"middle[\s-]*aged?|midlife|mid[\s-]?life|中年|壮年", "middle-aged"),
    (r"teen|adolescen|high[\s-]*school|child|kid|minor|youth\b|少年|青少年|儿童|未成年|初中|高中", "teenage"),
    (r"elder|old|senior|retire|aged\b|老年|老人|退休", "old"),
    (r"young|twenties|college|university|student|青年|年轻|大学|研究生", "young"),
]
_GENDER_WORDS = [
    (r"\b(female|woman|women|girl|lady|she|her|mother|wife|mom)\b|女", "female"),
    (r"\b(male|man|men|boy|guy|he|his|father|husband|dad)\b|男", "male"),
]


# where a reply starts echoing the prompt (the dialogue, the format line, the input header)
_ECHO_RE = re.compile(r"\b(?:seeker|supporter)\s*:|Please only directly output|Please only output|The following is|"
                      r"求助者[:：]|支持者[:：]|请只直接输出|以下是", re.IGNORECASE)


class CardFieldsError(ValueError):
    """The reply lacks a required field or has no usable problem text; the message says which."""


@dataclass
class CardFields:
    """Normalised card fields parsed from one extraction reply."""

    age: str
    gender: str
    occupation: str
    problem: str
    notes: list[str] = field(default_factory=list)  # normalisation decisions worth a look

    def as_dict(self) -> dict[str, str]:
        return {"age": self.age, "gender": self.gender, "occupation": self.occupation, "problem": self.problem}


def _is_not_mentioned(value: str) -> bool:
    return bool(_NOT_MENTIONED_RE.match(value.strip().strip(".。").strip().lower()))


def age_band(value: str) -> str | None:
    """'23' / 'in her 40s' / 'young adult' / '中年' / '35岁' -> a band key; None if not mentioned/unknown."""
    v = (value or "").strip().lower()
    if not v or _is_not_mentioned(v):
        return None
    m = re.search(r"(\d{1,3})\s*(?:s\b|'s\b|多岁|来岁|几岁)?", v)
    if m:
        n = int(m.group(1))
        if 0 < n < 120:
            decade = bool(re.search(rf"{n}\s*'?s\b|{n}多岁|{n}来岁|{n}几岁", v))
            if decade:
                n += 5
            if n < 18:
                return "teenage"
            if n <= 35:
                return "young"
            if n < 60:
                return "middle-aged"
            return "old"
    for pattern, band in _AGE_WORDS:
        if re.search(pattern, v):
            return band
    return None


def normalize_age(value: str, language: str) -> tuple[str, str | None]:
    """The age in the paper's vocabulary for `language`, and a note if the value was not recognised."""
    band = age_band(value)
    note = None
    if band is None and value.strip() and not _is_not_mentioned(value):
        note = f"age {value!r} not recognised: set to not mentioned"
    return AGE_VOCAB[language][band], note


def normalize_gender(value: str, language: str) -> tuple[str, str | None]:
    v = (value or "").strip().lower()
    if not v or _is_not_mentioned(v):
        return GENDER_VOCAB[language][None], None
    hits = {g for pattern, g in _GENDER_WORDS if re.search(pattern, v)}
    if len(hits) == 1:
        return GENDER_VOCAB[language][hits.pop()], None
    return GENDER_VOCAB[language][None], f"gender {value!r} not one of male/female: set to not mentioned"


def repeated_clause(text: str, times: int = 3) -> str | None:
    """A clause (3+ words, or 6+ CJK characters) repeated `times` or more: a generation loop."""
    clauses = [c.strip().lower() for c in re.split(r"[,.;!?，。；！？\n]+", text)]
    counts: dict[str, int] = {}
    for c in clauses:
        if len(c.split()) >= 3 or len(c) >= 6 and re.search(r"[\u4e00-\u9fff]", c):
            counts[c] = counts.get(c, 0) + 1
    worst = max(counts.items(), key=lambda kv: kv[1], default=(None, 0))
    return worst[0] if worst[1] >= times else None


def _clean_reply(reply: str) -> str:
    text = reply.replace("\\n", "\n")  # literal backslash-n, as the prompts print them
    text = re.sub(r"[*#`]+", "", text)  # markdown emphasis/headers around labels
    text = re.sub(r"(?m)^\s*[-•]\s*", "", text)  # bullets
    text = re.sub(r"(?i)\b(user|seeker|role)\s*card\s*[:：]", "", text)
    return text


def parse_card_fields(reply: str, language: str) -> CardFields:
    """Parse 'Age: .. Gender: .. Occupation: .. Problem: ..' (or 年龄：..) from a model reply."""
    if not reply or not reply.strip():
        raise CardFieldsError("empty reply")
    fields = parse_card_text(_clean_reply(reply))
    missing = [f for f in REQUIRED if not fields.get(f, "").strip()]
    if missing:
        raise CardFieldsError(f"reply lacks field(s) {', '.join(missing)}")
    problem = _ECHO_RE.split(fields["problem"], maxsplit=1)[0]  # the model went on echoing the prompt
    problem = re.sub(r"\s+", " ", problem).strip()
    problem = re.sub(r"(?<=[\u3000-\u9fff\uff00-\uffef]) (?=[\u3000-\u9fff\uff00-\uffef])", "", problem)  # CJK wraps
    problem = problem.strip("'\"“”")
    if _is_not_mentioned(problem) or len(problem) < (8 if language == "zh" else 15):
        raise CardFieldsError(f"problem text too short or empty ({problem!r})")
    loop = repeated_clause(problem)
    if loop:
        raise CardFieldsError(f"problem text is degenerate (repeats {loop!r})")
    notes = []
    age, note = normalize_age(fields["age"], language)
    notes += [note] if note else []
    gender, note = normalize_gender(fields["gender"], language)
    notes += [note] if note else []
    occupation = re.sub(r"\s+", " ", fields["occupation"]).strip()
    if _is_not_mentioned(occupation):
        occupation = NOT_MENTIONED[language]
    return CardFields(age=age, gender=gender, occupation=occupation, problem=problem, notes=notes)
