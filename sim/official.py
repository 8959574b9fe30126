"""Interop with the official ESC-Eval JSON: dialogues `{"0": ["AI assistant：...", "ESC-Role：...", ...]}`
and scores `{"0": {"fluency": 3, "diversity": 3, ...}}` (official keys; -1 = unparsed).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from esc_eval.sim.dimensions import DIMENSIONS
from esc_eval.sim.prompts import official_lines
from esc_eval.sim.records import stable_id
from esc_eval.sim.runfolder import now_utc

# The release writes "AI assitant：" (sic) in evaluate.py and "AI assistant：" elsewhere.
_PREFIX = re.compile(r"^\s*(AI assistant|AI assitant|ESC-Role)\s*[：:]\s*", re.S)


class OfficialFormatError(ValueError):
    pass


def parse_official_line(line: Any) -> tuple[str, str] | None:
    """'AI assistant：text' -> ('assistant', 'text'); 'ESC-Role：text' -> ('seeker', 'text');
    None when the line has neither prefix (callers raise their own error naming the file)."""
    m = _PREFIX.match(line) if isinstance(line, str) else None
    if not m:
        return None
    return ("seeker" if m.group(1) == "ESC-Role" else "assistant"), line[m.end():]


def _language_from_name(name: str) -> str:
    stem = Path(name).stem.lower()
    if stem.endswith("_zh") or stem.endswith("-zh"):
        return "zh"
    if stem.endswith("_en") or stem.endswith("-en"):
        return "en"
    return "en"


def _model_from_name(name: str) -> str:
    return re.sub(r"[_-](en|zh)$", "", Path(name).stem)


def read_official_dialogues(path: str | Path, run_id: str | None = None) -> list[dict[str, Any]]:
    """Dialogue rows (sim.records.DIALOGUE_SCHEMA) from one official result JSON file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise OfficialFormatError(f"{path}: not an official dialogue JSON ({e})") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise OfficialFormatError(f"{path}: expected {{\"0\": [\"AI assistant：...\", ...]}}, got another layout")
    language, model = _language_from_name(path.name), _model_from_name(path.name)
    rows = []
    for key, lines in data.items():
        turns = []
        for i, line in enumerate(lines):
            parsed = parse_official_line(line)
            if parsed is None:
                raise OfficialFormatError(f"{path}: dialogue {key!r} line {i} has no 'AI assistant：'/'ESC-Role：' prefix")
            speaker, text = parsed
            turns.append({"index": i, "speaker": speaker, "text": text, "prompt_tokens": 0,
                          "completion_tokens": 0, "latency_s": 0.0, "finish_reason": "stop"})
        complete = len(turns) == 11
        rows.append({
            "run_id": run_id or f"official:{path.parent.name}", "dialogue_id": stable_id("official", path.name, key),
            "card_id": str(key), "language": language, "category_1": None, "category_2": None, "category_3": None,
            "card_source": f"official:{path.name}", "target_model": model, "role_model": "ESC-Role",
            "strategy": "official", "seed": 0, "target_params": None, "role_params": None, "turns": turns,
            "n_turns": len(turns), "status": "ok" if complete else "failed",
            "termination_reason": "completed" if complete else "missing_turns",
            "error": None if complete else f"expected 11 messages, found {len(turns)}", "attempts": 0,
            "prompt_tokens": 0, "completion_tokens": 0, "started_at": now_utc(), "finished_at": now_utc(),
        })
    return rows


def official_dialogue_files(folder: str | Path) -> list[Path]:
    folder = Path(folder)
    if folder.is_file():
        return [folder]
    files = sorted(p for p in folder.glob("*.json") if p.name != "manifest.json")
    if not files:
        raise OfficialFormatError(f"{folder}: no official dialogue JSON files (*.json)")
    return files


def write_official_scores(score_rows: list[dict[str, Any]], dialogue_rows: list[dict[str, Any]], out_dir: str | Path) -> list[Path]:
    """Write score JSON files in the official layout, one per (target model, language)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    key_of = {r["dialogue_id"]: r for r in dialogue_rows}
    grouped: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    for s in score_rows:
        d = key_of.get(s["dialogue_id"])
        if d is None:
            continue
        model = d["target_model"].replace("/", "_")
        entry = grouped.setdefault((model, d["language"]), {}).setdefault(str(d["card_id"]), {})
        entry[DIMENSIONS[s["dimension"]]] = -1 if s["score"] is None else int(s["score"])
    written = []
    for (model, lang), data in grouped.items():
        p = out_dir / f"{model}_{lang}.json"
        p.write_text(json.dumps(data, ensure_ascii=False, indent=4), encoding="utf-8")
        written.append(p)
    return written


def turns_as_lines(turns: list[dict[str, Any]]) -> list[str]:
    return official_lines((t["speaker"], t["text"]) for t in turns)


def _card_key_order(key: str) -> tuple[int, int | str]:
    # The release keys cards "0", "1", ...: numeric keys in numeric order, others after them.
    return (0, int(key)) if key.isdigit() else (1, key)


def official_keys(dialogue_rows: list[dict[str, Any]]) -> dict[str, str]:
    """dialogue_id -> the key of its dialogue in the official files: the card id, or card id plus
    strategy and seed where one (model, language) file holds several dialogues of a card."""
    count: dict[tuple[str, str, str], int] = {}
    for r in dialogue_rows:
        k = (r["target_model"], r["language"], str(r["card_id"]))
        count[k] = count.get(k, 0) + 1
    keys = {}
    for r in dialogue_rows:
        card = str(r["card_id"])
        several = count[(r["target_model"], r["language"], card)] > 1
        keys[r["dialogue_id"]] = f"{card}#{r.get('strategy')}-s{r.get('seed')}" if several else card
    return keys


def official_file_stem(target_model: str, language: str) -> str:
    """'{model}_{lang}' as the release names its files; '/' in a backend spec becomes '_'."""
    return f"{target_model.replace('/', '_')}_{language}"


def write_official_dialogues(dialogue_rows: list[dict[str, Any]], out_dir: str | Path,
                             keys: dict[str, str] | None = None) -> list[Path]:
    """Dialogue JSON in the release's layout, one file per (target model, language):
    {"<card>": ["AI assistant：...", "ESC-Role：...", ...]}. read_official_dialogues reads them back
    turn for turn (the release's reader strips blanks after the speaker prefix, so does ours)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = keys or official_keys(dialogue_rows)
    grouped: dict[str, dict[str, list[str]]] = {}
    for r in dialogue_rows:
        turns = sorted(r["turns"] or [], key=lambda t: t["index"])
        grouped.setdefault(official_file_stem(r["target_model"], r["language"]), {})[keys[r["dialogue_id"]]] = \
            turns_as_lines(turns)
    written = []
    for stem, data in sorted(grouped.items()):
        path = out_dir / f"{stem}.json"
        ordered = {k: data[k] for k in sorted(data, key=_card_key_order)}
        path.write_text(json.dumps(ordered, ensure_ascii=False, indent=4), encoding="utf-8")
        written.append(path)
    return written
