"""Read dialogues for training from every source format into one shape, `SourceDialogue`.

Sources (pick with `load_dialogues(path, kind=...)`, or let `kind="auto"` decide):

run     our run folder (`sim.runs.runfolder.RunFolder`): dialogue rows whose `turns` are
        {index, speaker: "assistant" | "seeker", text, ...}; only rows with status "ok".
        dialogue_id = the row's dialogue_id; card text from a cards file joined on card_id
        (`cards=`), else none.
official  the ESC-Eval release's dialogue JSON, `{"0": ["AI assistant：...", "ESC-Role：...", ...]}`
        (full-width colon "："; an ASCII ":" is accepted too). The file name is `<model>_<lang>.json`
        (e.g. `llama3_en.json`): target_model = "llama3", language = "en".
        dialogue_id = "<file stem>:<key>" (e.g. "llama3_en:0"). The release's cards file is
        index-aligned with the keys (`cards=` test_en.json: key "0" -> the first card).
esconv  ESConv-format JSON: a list of {problem_type, emotion_type, situation, dialog: [{speaker,
        content, annotation}]}; speaker "seeker"/"supporter" (ESConv.json) or "speaker"/"listener"
        (FailedESConv.json). Consecutive turns of one speaker are merged (joined by a newline).
        dialogue_id = "<file stem>:<index>"; target_model = "human"; card text built from
        `problem_type`, `emotion_type` and `situation` when no cards are given.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

from esc_eval.train.config import SOURCE_KIND
from esc_eval.train.errors import TrainInputError

Speaker = Literal["assistant", "seeker"]
SourceKind = Literal["auto", "run", "official", "esconv"]

ESCONV_SPEAKERS: dict[str, Speaker] = {
    "seeker": "seeker", "usr": "seeker", "speaker": "seeker",
    "supporter": "assistant", "sys": "assistant", "listener": "assistant",
}


@dataclass
class SourceDialogue:
    """One dialogue ready for dataset building: speakers are 'assistant' (the supporter / model
    under test) and 'seeker' (the distressed person ESC-Role plays)."""

    dialogue_id: str
    language: str
    turns: list[tuple[Speaker, str]]
    card_text: str | None = None
    target_model: str = "unknown"
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def _merge_turns(turns: Iterable[tuple[Speaker, str]]) -> list[tuple[Speaker, str]]:
    out: list[tuple[Speaker, str]] = []
    for speaker, text in turns:
        text = (text or "").strip()
        if not text:
            continue
        if out and out[-1][0] == speaker:
            out[-1] = (speaker, out[-1][1] + "\n" + text)
        else:
            out.append((speaker, text))
    return out


def _card_texts(cards: str | Path | None) -> list[tuple[str, str]]:
    """(card id, card text) of a cards file, in file order."""
    if cards is None:
        return []
    from esc_eval.sim.cards.card import load_cards

    return [(c.id, c.text) for c in load_cards(cards)]


def _read_json(path: Path) -> Any:
    if not path.exists():
        raise TrainInputError(f"{path}: dialogue file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TrainInputError(f"{path}: not valid UTF-8 JSON ({e})") from None


# -- official -----------------------------------------------------------------------------------
def load_official_dialogues(path: str | Path, cards: str | Path | None = None,
                            target_model: str | None = None, language: str | None = None) -> list[SourceDialogue]:
    """The release's `{"0": ["AI assistant：...", "ESC-Role：...", ...]}` file (see module doc), read by
    the one official-format adapter (sim.runs.official), so ids match analysis and scoring."""
    from esc_eval.sim.runs.official import OfficialFormatError, read_official_dialogues

    path = Path(path)
    try:
        rows = read_official_dialogues(path, model=target_model, language=language)
    except OfficialFormatError as e:
        raise TrainInputError(str(e)) from None
    card_list = _card_texts(cards)
    out = []
    for row in rows:
        key = row["card_id"]
        card_text = None
        if card_list:
            if not str(key).isdigit() or int(key) >= len(card_list):
                raise TrainInputError(f"{path} dialogue {key!r}: no card #{key} in {cards} ({len(card_list)} cards)")
            card_text = card_list[int(key)][1]
        out.append(SourceDialogue(
            dialogue_id=row["dialogue_id"], language=row["language"],
            turns=_merge_turns((t["speaker"], t["text"]) for t in row["turns"]), card_text=card_text,
            target_model=row["target_model"], source=str(path),
        ))
    return out


# -- ESConv -------------------------------------------------------------------------------------
def esconv_card_text(item: dict[str, Any]) -> str:
    """A card text for an ESConv dialogue without a card: the official layout, Problem from the
    situation (with problem type and emotion)."""
    problem = (item.get("situation") or "").strip()
    extra = ", ".join(x for x in (item.get("problem_type"), item.get("emotion_type")) if x)
    if extra:
        problem = f"{problem} ({extra})" if problem else extra
    return f"Age: not mentioned\nGender: not mentioned\nOccupation: not mentioned\nProblem: {problem or 'not mentioned'}"


def load_esconv_dialogues(path: str | Path, cards: str | Path | None = None, language: str = "en") -> list[SourceDialogue]:
    """ESConv-format JSON (see module doc). `cards`, when given, is index-aligned with the list."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, list):
        raise TrainInputError(f"{path}: expected a list of ESConv dialogues, got {type(data).__name__}")
    card_list = _card_texts(cards)
    out = []
    for i, item in enumerate(data):
        where = f"{path} dialogue #{i}"
        if not isinstance(item, dict) or not isinstance(item.get("dialog"), list):
            raise TrainInputError(f"{where}: missing field 'dialog' (a list of turns)")
        turns = []
        for j, t in enumerate(item["dialog"]):
            sp = str(t.get("speaker", "")).strip().lower() if isinstance(t, dict) else ""
            if sp not in ESCONV_SPEAKERS:
                raise TrainInputError(
                    f"{where} turn {j}: field 'speaker' is {sp!r}; expected one of {sorted(ESCONV_SPEAKERS)}")
            turns.append((ESCONV_SPEAKERS[sp], str(t.get("content", ""))))
        card_text = card_list[i][1] if i < len(card_list) else esconv_card_text(item)
        out.append(SourceDialogue(
            dialogue_id=f"{path.stem}:{i}", language=language, turns=_merge_turns(turns), card_text=card_text,
            target_model="human", source=str(path),
            meta={k: item.get(k) for k in ("problem_type", "emotion_type", "experience_type") if k in item},
        ))
    return out


# -- run folder ---------------------------------------------------------------------------------
def load_run_dialogues(path: str | Path, cards: str | Path | None = None) -> list[SourceDialogue]:
    """Rows of a run folder with status 'ok' (see module doc)."""
    from esc_eval.sim.runs.runfolder import RunFolder
    from esc_eval.sim.runs.storage import RunFolderError

    try:
        rows = RunFolder(path, create=False).read("dialogues").to_pylist()
    except RunFolderError as e:
        raise TrainInputError(str(e)) from None
    card_map = dict(_card_texts(cards))
    out = []
    for row in rows:
        if row.get("status") != "ok":
            continue
        turns = []
        for t in sorted(row.get("turns") or [], key=lambda t: t.get("index") or 0):
            if t.get("speaker") not in ("assistant", "seeker"):
                raise TrainInputError(
                    f"{path} dialogue {row['dialogue_id']}: turn speaker {t.get('speaker')!r} is not assistant|seeker")
            turns.append((t["speaker"], t.get("text") or ""))
        out.append(SourceDialogue(
            dialogue_id=row["dialogue_id"], language=row.get("language") or "en", turns=_merge_turns(turns),
            card_text=card_map.get(str(row.get("card_id"))), target_model=row.get("target_model") or "unknown",
            source=str(path), meta={"card_id": row.get("card_id")},
        ))
    # latest row per dialogue id wins (re-runs append)
    return list({d.dialogue_id: d for d in out}.values())


def detect_kind(path: str | Path) -> str:
    path = Path(path)
    if path.is_dir():
        return "run"
    if path.suffix != ".json":
        raise TrainInputError(f"{path}: cannot tell the dialogue format; give kind= run | official | esconv")
    data = _read_json(path)
    if isinstance(data, dict):
        return "official"
    if isinstance(data, list) and data and isinstance(data[0], dict) and "dialog" in data[0]:
        return "esconv"
    raise TrainInputError(f"{path}: neither official dialogue JSON (an object) nor ESConv (a list with 'dialog')")


def load_dialogues(path: str | Path, kind: SourceKind = SOURCE_KIND, cards: str | Path | None = None,
                   language: str | None = None) -> list[SourceDialogue]:
    """Load one dialogue source of any supported kind (see the module docstring)."""
    kind = detect_kind(path) if kind == "auto" else kind
    if kind == "run":
        return load_run_dialogues(path, cards=cards)
    if kind == "official":
        return load_official_dialogues(path, cards=cards, language=language)
    if kind == "esconv":
        return load_esconv_dialogues(path, cards=cards, language=language or "en")
    raise TrainInputError(f"unknown dialogue source kind {kind!r} (run | official | esconv)")
