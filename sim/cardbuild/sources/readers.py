"""Readers: the source datasets of Table 5 -> `SourceItem`s (or `Rejection`s, never a crash).

One adapter per dataset family. Each docstring states the field layout it expects; layouts of
datasets not shipped with this project are written from their public releases as best known,
and the samples under sim/cardbuild/samples/ (this project's own text) follow them.

File handling common to all: UTF-8 only (anything else -> one rejection for the file); .json
(a list of records, or one Smile dialogue), .jsonl (one record a line; a bad line is rejected,
the rest read), .csv (EPITOME), or a directory (every .json/.jsonl/.csv inside, sorted by name).
The dataset is given in the config or detected from the first record's fields; an unknown
layout rejects the file with the fields it saw.
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from esc_eval.sim.cardbuild.sources.items import (DATASET_KIND, DATASET_LANGUAGE, Rejection, SourceItem, Turn,
                                          canonical_dataset, item_id)
from esc_eval.sim.runs.records import stable_id

SUFFIXES = (".json", ".jsonl", ".csv")


@dataclass
class ReadResult:
    """What reading one source gave: the items and the rejections (files, records)."""

    items: list[SourceItem] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def extend(self, other: "ReadResult") -> None:
        self.items.extend(other.items)
        self.rejected.extend(other.rejected)


class SourceFormatError(ValueError):
    """A file that cannot be read at all (encoding, syntax, unknown layout)."""


# -- low-level loading -------------------------------------------------------------------------
def _decode(path: Path) -> str:
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SourceFormatError(f"not UTF-8 text ({e.reason} at byte {e.start}); re-encode the file as UTF-8") from None
    return text.lstrip("\ufeff")


def load_records(path: Path) -> tuple[list[Any], list[Rejection]]:
    """The raw records of one file, plus rejections of single bad lines (JSONL)."""
    text = _decode(path)
    suffix = path.suffix.lower()
    rejected: list[Rejection] = []
    if suffix == ".csv":
        return list(csv.DictReader(io.StringIO(text))), rejected
    if suffix == ".jsonl":
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                rejected.append(Rejection(stage="read", reason=f"malformed JSON line ({e.msg})",
                                          source_file=str(path), locator=f"line {n}"))
        return records, rejected
    if suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise SourceFormatError(f"malformed JSON ({e.msg} at line {e.lineno})") from None
        if isinstance(data, dict):
            for key in ("data", "items", "records"):  # common wrappers
                if isinstance(data.get(key), list):
                    data = data[key]
                    break
            else:
                data = [data]
        if not isinstance(data, list):
            raise SourceFormatError(f"expected a JSON list of records, got {type(data).__name__}")
        if data and _is_smile_dialogue(data):  # one Smile dialogue per file
            data = [data]
        return data, rejected
    raise SourceFormatError(f"unknown file format {suffix or '(no suffix)'!r}; expected one of {', '.join(SUFFIXES)}")


def _is_smile_dialogue(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    first = value[0]
    if isinstance(first, dict):
        return "role" in first and "content" in first
    if isinstance(first, str):
        return bool(_SMILE_PREFIX.match(first))
    return False


def detect_dataset(record: Any) -> str | None:
    """Guess the dataset from one record's field layout (None when nothing fits)."""
    if _is_smile_dialogue(record):
        return "smile"
    if not isinstance(record, dict):
        return None
    keys = set(record)
    if "dialog" in keys:
        return "esconv"
    if "content" in keys and isinstance(record.get("content"), list) and keys & {"scene", "description"}:
        return "extes"
    if "questionID" in keys or {"question", "answers"} <= keys or {"question", "description"} <= keys:
        return "psyqa"
    if "seeker_post" in keys:
        return "epitome"
    if {"instruction", "input"} <= keys:
        return "psych8k"
    if "selftext" in keys or {"title", "subreddit"} <= keys:
        return "mhp_reddit"
    return None


# -- helpers -----------------------------------------------------------------------------------
def _clean(text: Any) -> str:
    if text is None:
        return ""
    return re.sub(r"[ \t]+", " ", str(text)).strip()


def _content_id(record: Any) -> str:
    return stable_id("record", json.dumps(record, ensure_ascii=False, sort_keys=True, default=str), length=12)


def _qa(dataset: str, native: str, text: str, path: Path, **metadata: Any) -> SourceItem:
    return SourceItem(id=item_id(dataset, native), dataset=dataset, language=DATASET_LANGUAGE[dataset], kind="qa",
                      text=text, native_id=native, source_file=str(path), metadata=metadata)


def _md(dataset: str, native: str, turns: list[Turn], situation: str | None, path: Path, **metadata: Any) -> SourceItem:
    return SourceItem(id=item_id(dataset, native), dataset=dataset, language=DATASET_LANGUAGE[dataset], kind="md",
                      turns=turns, situation=situation or None, native_id=native, source_file=str(path), metadata=metadata)


class _Skip(ValueError):
    """One record cannot become an item; the message is the reason."""


# -- QA adapters -------------------------------------------------------------------------------
def read_epitome(record: dict, path: Path, index: int) -> SourceItem:
    """EPITOME (Sharma et al., 2020; github.com/behavioral-data-mining/Empathy-Mental-Health).

    Layout: CSV files emotional-reactions-reddit.csv, interpretations-reddit.csv,
    explorations-reddit.csv with columns sp_id, rp_id, seeker_post, response_post, level,
    rationales. The same seeker post (sp_id) appears in all three files; `read_source` keeps
    the first. The seeker post is the QA "question"; the response is not used.
    """
    post = _clean(record.get("seeker_post"))
    if not post:
        raise _Skip("empty seeker_post")
    native = _clean(record.get("sp_id")) or _content_id(post)
    return _qa("epitome", native, post, path, rp_id=record.get("rp_id"), level=record.get("level"))


def read_mhp_reddit(record: dict, path: Path, index: int) -> SourceItem:
    """MHP Reddit (Lahnala et al., 2021: mental-health posts from Reddit support forums).

    Assumed layout (Reddit submission dumps as released through Pushshift): JSON list or JSONL
    of submissions with id, subreddit, title, selftext (optional: author_flair_text,
    created_utc, comments). The post is title + body; "[removed]"/"[deleted]" bodies with no
    title left are rejected.
    """
    title = _clean(record.get("title"))
    body = _clean(record.get("selftext"))
    if body.lower() in ("[removed]", "[deleted]"):
        body = ""
    text = "\n".join(t for t in (title, body) if t)
    if not body and len(title) < 40:
        raise _Skip("post has no body (removed/deleted or empty) and too short a title")
    native = _clean(record.get("id")) or _content_id(record)
    return _qa("mhp_reddit", native, text, path, subreddit=record.get("subreddit"))


def read_psych8k(record: dict, path: Path, index: int) -> SourceItem:
    """Psych8K (Liu et al., 2023, ChatCounselor; EmoCareAI/Psych8k).

    Layout: Alpaca-style JSON list of {instruction, input, output}: `instruction` the fixed
    counsellor instruction, `input` the client's words (the "question"), `output` the
    counsellor's answer (not used). No ids: the native id is a hash of the input.
    """
    text = _clean(record.get("input"))
    if not text:
        raise _Skip("empty input (the client's text)")
    return _qa("psych8k", _content_id(text), text, path)


def read_psyqa(record: dict, path: Path, index: int) -> SourceItem:
    """PsyQA (Sun et al., 2021; github.com/thu-coai/PsyQA), Chinese.

    Layout: JSON list of {questionID, question, description, keywords, answers: [{answer_text,
    has_label, labels_sequence}]}. The post is question + description; answers are not used.
    """
    question = _clean(record.get("question"))
    desc = _clean(record.get("description"))
    if not question and not desc:
        raise _Skip("empty question and description")
    native = _clean(record.get("questionID")) or _content_id(record)
    return _qa("psyqa", native, "\n".join(t for t in (question, desc) if t), path, keywords=record.get("keywords"))


# -- MD adapters -------------------------------------------------------------------------------
_ESCONV_SPEAKERS = {
    "seeker": "seeker", "speaker": "seeker", "usr": "seeker", "user": "seeker",
    "supporter": "supporter", "listener": "supporter", "sys": "supporter", "system": "supporter",
}


def _check_dialogue(turns: list[Turn]) -> None:
    if not turns:
        raise _Skip("dialogue has no turns")
    if not any(t.speaker == "seeker" for t in turns):
        raise _Skip("dialogue has no seeker turn")


def read_esconv(record: dict, path: Path, index: int) -> SourceItem:
    """ESConv (Liu et al., 2021; github.com/thu-coai/Emotional-Support-Conversation).

    Layout (ESConv.json / FailedESConv.json): JSON list of {experience_type, emotion_type,
    problem_type, situation, survey_score, dialog: [{speaker, annotation, content}]}. Speakers
    are "seeker"/"supporter" in ESConv.json and "speaker"/"listener" in FailedESConv.json
    (speaker = the help seeker, listener = the supporter: strategy annotations sit on listener
    turns). The HF-style split files ({"dialog": [{"text", "speaker": "usr"|"sys"}]}) read too.
    Consecutive utterances stay separate turns; an unknown speaker value rejects the record.
    """
    dialog = record.get("dialog")
    if not isinstance(dialog, list):
        raise _Skip("field 'dialog' is not a list")
    turns = []
    for n, utt in enumerate(dialog):
        if not isinstance(utt, dict):
            raise _Skip(f"dialog[{n}] is not an object")
        who = _ESCONV_SPEAKERS.get(str(utt.get("speaker", "")).strip().lower())
        if who is None:
            raise _Skip(f"dialog[{n}] has unknown speaker {utt.get('speaker')!r}")
        text = _clean(utt.get("content", utt.get("text")))
        if text:
            turns.append(Turn(speaker=who, text=text))
    _check_dialogue(turns)
    return _md("esconv", _content_id(record), turns, _clean(record.get("situation")), path,
               emotion_type=record.get("emotion_type"), problem_type=record.get("problem_type"),
               experience_type=record.get("experience_type"))


def read_extes(record: dict, path: Path, index: int) -> SourceItem:
    """ExTES (Zheng et al., 2023b; ExTES.json), generated by ChatGPT.

    Assumed layout: JSON list of {description, scene, content: [{"User": text} |
    {"AI": text, "AI Strategy": strategy}]}: each content element holds one utterance under
    the key "User" (seeker) or "AI" (supporter). `description` is the situation.
    """
    content = record.get("content")
    if not isinstance(content, list):
        raise _Skip("field 'content' is not a list")
    turns = []
    for n, utt in enumerate(content):
        if not isinstance(utt, dict):
            raise _Skip(f"content[{n}] is not an object")
        if "User" in utt:
            turns.append(Turn(speaker="seeker", text=_clean(utt["User"])))
        elif "AI" in utt:
            turns.append(Turn(speaker="supporter", text=_clean(utt["AI"])))
        else:
            raise _Skip(f"content[{n}] has neither 'User' nor 'AI' (keys: {', '.join(map(str, utt)) or 'none'})")
    turns = [t for t in turns if t.text]
    _check_dialogue(turns)
    return _md("extes", _content_id(record), turns, _clean(record.get("description")), path, scene=record.get("scene"))


_SMILE_PREFIX = re.compile(r"^\s*(求助者|来访者|支持者|咨询师|client|counselor)\s*[:：]", re.IGNORECASE)
_SMILE_ROLES = {"client": "seeker", "求助者": "seeker", "来访者": "seeker", "counselor": "supporter",
                "支持者": "supporter", "咨询师": "supporter"}


def read_smile(record: Any, path: Path, index: int) -> SourceItem:
    """SMILE / SmileChat (Qiu et al., 2023; github.com/qiuhuachuan/smile), Chinese, by ChatGPT.

    Layout: one dialogue per file, data/<n>.json = a JSON list of {role: "client"|"counselor",
    content, annotation}. The v1 release's plain lists of strings prefixed "求助者：" / "支持者："
    (also "来访者："/"咨询师：") read too, and so does one file holding a list of dialogues.
    There is no situation summary.
    """
    if not isinstance(record, list):
        raise _Skip("a Smile dialogue must be a list of utterances")
    turns = []
    for n, utt in enumerate(record):
        if isinstance(utt, dict):
            who = _SMILE_ROLES.get(str(utt.get("role", "")).strip().lower())
            text = _clean(utt.get("content"))
        elif isinstance(utt, str):
            m = _SMILE_PREFIX.match(utt)
            who = _SMILE_ROLES.get(m.group(1).lower()) if m else None
            text = _clean(utt[m.end():]) if m else ""
        else:
            who, text = None, ""
        if who is None:
            raise _Skip(f"utterance {n} has no known role (client/counselor, 求助者/支持者)")
        if text:
            turns.append(Turn(speaker=who, text=text))
    _check_dialogue(turns)
    native = f"{path.stem}" if path.stem.isdigit() else _content_id(record)
    return _md("smile", native, turns, None, path)


READERS: dict[str, Callable[[Any, Path, int], SourceItem]] = {
    "epitome": read_epitome,
    "mhp_reddit": read_mhp_reddit,
    "psych8k": read_psych8k,
    "psyqa": read_psyqa,
    "esconv": read_esconv,
    "extes": read_extes,
    "smile": read_smile,
}
assert set(READERS) == set(DATASET_KIND)


# -- entry point -------------------------------------------------------------------------------
def read_source(path: str | Path, dataset: str | None = None, *, limit: int | None = None) -> ReadResult:
    """Read one source file or folder into items; bad files and records become rejections.

    dataset: a name or alias (ESConv, MHP, Psych8K, ...); None = detect from the fields.
    limit: stop after this many items (rejections do not count).
    """
    path = Path(path)
    result = ReadResult()
    key = None
    if dataset:
        try:
            key = canonical_dataset(dataset)
        except ValueError as e:
            result.rejected.append(Rejection(stage="read", reason=str(e), source_file=str(path)))
            return result
    if not path.exists():
        result.rejected.append(Rejection(stage="read", reason="file not found", dataset=key, source_file=str(path)))
        return result
    if path.is_dir():
        files = sorted((p for p in path.iterdir() if p.is_file()), key=lambda p: (len(p.stem), p.name))
        if not files:
            result.rejected.append(Rejection(stage="read", reason="empty folder", dataset=key, source_file=str(path)))
        for f in files:
            remaining = None if limit is None else limit - len(result.items)
            if remaining is not None and remaining <= 0:
                break
            part = read_source(f, key, limit=remaining)
            known = {i.id for i in result.items}
            result.items.extend(i for i in part.items if i.id not in known)  # EPITOME: same post, 3 files
            result.rejected.extend(part.rejected)
        return result
    try:
        records, bad_lines = load_records(path)
    except SourceFormatError as e:
        result.rejected.append(Rejection(stage="read", reason=str(e), dataset=key, source_file=str(path)))
        return result
    result.rejected.extend(r.model_copy(update={"dataset": key}) for r in bad_lines)
    if not records:
        result.rejected.append(Rejection(stage="read", reason="no records in file", dataset=key, source_file=str(path)))
        return result
    if key is None:
        key = detect_dataset(records[0])
        if key is None:
            seen = sorted(records[0]) if isinstance(records[0], dict) else type(records[0]).__name__
            result.rejected.append(Rejection(
                stage="read", source_file=str(path),
                reason=f"unknown source format (first record fields: {seen}); set `dataset:` for this source"))
            return result
    reader = READERS[key]
    seen_ids: set[str] = set()
    for i, record in enumerate(records):
        if limit is not None and len(result.items) >= limit:
            break
        try:
            item = reader(record, path, i)
        except _Skip as e:
            result.rejected.append(Rejection(stage="read", reason=str(e), dataset=key, source_file=str(path),
                                             locator=f"record {i}"))
            continue
        except (AttributeError, TypeError) as e:  # a record of the wrong shape for this dataset
            result.rejected.append(Rejection(stage="read", reason=f"record does not fit the {key} layout ({e})",
                                             dataset=key, source_file=str(path), locator=f"record {i}"))
            continue
        if item.id in seen_ids:  # EPITOME repeats each seeker post across its three files
            continue
        seen_ids.add(item.id)
        result.items.append(item)
    return result
