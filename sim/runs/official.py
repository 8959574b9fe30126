"""The official ESC-Eval JSON, read and written in one place (simulation, scoring, analysis and
training all go through this module):

- dialogues: `{"0": ["AI assistant：...", "ESC-Role：...", ...], ...}` (11 lines = 5 rounds + opener)
- scores:    `{"0": {"fluency": 3, "diversity": 3, ...}, ...}` (official keys; -1 = unparsed)

File names are `<model>_<language>.json` (e.g. `Qwen_7B_en.json`). The key ("0", "1", ...) is the
card's index in the release's card file, so it is the card id. A dialogue's id is
`<file stem>:<key>` (e.g. `Qwen_7B_en:0`), the same for the dialogue and its scores, whoever reads
them.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from esc_eval.sim.dialogue.transcript import parse_official_line, turns_as_lines
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSIONS, OFFICIAL_TO_PAPER, to_paper_dimension
from esc_eval.sim.runs.records import dialogue_row
from esc_eval.sim.runs.runfolder import now_utc

KNOWN_LANGUAGES = ("en", "zh")
OFFICIAL_UNPARSED = -1
OFFICIAL_JUDGE = "ESC-RANK (official)"
_STEM = re.compile(r"^(?P<model>.+)[_-](?P<lang>[A-Za-z]{2})$")
_CJK = re.compile(r"[\u4e00-\u9fff]")


class OfficialFormatError(ValueError):
    """A file that is not in the official layout; the message names the file and the entry."""


# -- files ---------------------------------------------------------------------------------------
def parse_official_name(path: str | Path) -> tuple[str, str]:
    """'Qwen_7B_en.json' -> ('Qwen_7B', 'en'); any other name is an error naming the file."""
    m = _STEM.match(Path(path).stem)
    if not m or m.group("lang").lower() not in KNOWN_LANGUAGES:
        raise OfficialFormatError(
            f"{path}: official file names look like <model>_<language>.json with language in "
            f"{KNOWN_LANGUAGES} (e.g. Qwen_7B_en.json); pass model= and language= explicitly")
    return m.group("model"), m.group("lang").lower()


# Model specs carry characters a shell or a file system trips on ('/', '?', '=', '&', ' '); in a
# file name each run of them becomes one '_' (letters of any script, digits, '.', '+', '-' stay).
_UNSAFE_IN_NAME = re.compile(r"[^\w.+-]+")


def official_file_name(model: str, language: str) -> str:
    """The release's file name for one model and language: '<model>_<language>.json', with '/' and
    other characters unsafe in a file name turned into '_'."""
    return f"{_UNSAFE_IN_NAME.sub('_', model).strip('_') or 'model'}_{language}.json"


def official_stems(pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """(model, language) -> file stem, refusing two models whose names would write one file."""
    stems: dict[tuple[str, str], str] = {}
    owner: dict[str, tuple[str, str]] = {}
    for pair in pairs:
        if pair in stems:
            continue
        stem = official_file_stem(*pair)
        if stem in owner:
            raise OfficialFormatError(f"models {owner[stem][0]!r} and {pair[0]!r} would both be written to {stem}.json; "
                                      "give one of them another name (the target's `name`)")
        stems[pair], owner[stem] = stem, pair
    return stems


def official_dialogue_id(path: str | Path, key: Any) -> str:
    """The one id of an official dialogue (and of its scores): '<file stem>:<key>'."""
    return f"{Path(path).stem}:{key}"


def official_json_files(path: str | Path) -> list[Path]:
    """A file, or the *.json files of a folder (manifest.json excluded); an error if there are none."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.exists():
        raise OfficialFormatError(f"{path}: no such file or folder")
    files = sorted(p for p in path.glob("*.json") if p.name != "manifest.json")
    if not files:
        raise OfficialFormatError(f"{path}: no official dialogue JSON files (*.json)")
    return files


official_dialogue_files = official_json_files


def _load(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise OfficialFormatError(f"{path}: not an official {what} JSON ({e})") from None
    if not isinstance(data, dict):
        raise OfficialFormatError(f"{path}: expected an object keyed by dialogue index, got {type(data).__name__} "
                                  "(another layout)")
    return data


def official_kind(path: str | Path) -> str:
    """'scores' ({"0": {"fluency": 3, ...}}), 'dialogues' ({"0": ["AI assistant：...", ...]}) or
    'unknown', from the first entry of an official JSON file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise OfficialFormatError(f"{path}: not readable as JSON ({e})") from e
    first = next(iter(data.values()), None) if isinstance(data, dict) else None
    return "scores" if isinstance(first, dict) else "dialogues" if isinstance(first, list) else "unknown"


def _name_parts(path: Path, model: str | None, language: str | None, lines: Iterable[str] = ()) -> tuple[str, str]:
    """Model and language of a file: given, else from its name; a dialogue file with another name
    keeps its stem as the model and guesses the language from the text."""
    if model is not None and language is not None:
        return model, language
    try:
        m, lang = parse_official_name(path)
    except OfficialFormatError:
        m, lang = path.stem, ("zh" if any(_CJK.search(str(x)) for x in lines) else "en")
    return model or m, language or lang


# -- read ----------------------------------------------------------------------------------------
def read_official_dialogues(path: str | Path, run_id: str | None = None, *, model: str | None = None,
                            language: str | None = None) -> list[dict[str, Any]]:
    """Dialogue rows (sim.runs.records.DIALOGUE_SCHEMA) from a file or folder of official dialogue JSON.
    A dialogue with other than 11 lines is a `failed` row (missing_turns), not an error."""
    rows = []
    for f in official_json_files(path):
        data = _load(f, "dialogue")
        if not all(isinstance(v, list) for v in data.values()):
            raise OfficialFormatError(f"{f}: expected {{\"0\": [\"AI assistant：...\", ...]}}, got another layout")
        m, lang = _name_parts(f, model, language, (x for v in data.values() for x in v[:2]))
        for key, lines in data.items():
            turns = []
            for i, line in enumerate(lines):
                parsed = parse_official_line(line)
                if parsed is None:
                    raise OfficialFormatError(f"{f}: dialogue {key!r} line {i} has no 'AI assistant：'/'ESC-Role：' prefix: "
                                              f"{str(line)[:40]!r}")
                turns.append({"index": i, "speaker": parsed[0], "text": parsed[1], "prompt_tokens": 0,
                              "completion_tokens": 0, "latency_s": 0.0, "finish_reason": "stop"})
            complete = len(turns) == 11
            rows.append(dialogue_row(
                run_id=run_id or f"official:{f.stem}", dialogue_id=official_dialogue_id(f, key), card_id=str(key),
                language=lang, card_source=f"official:{f.name}", target_model=m, role_model="ESC-Role",
                strategy="official", seed=0, turns=turns, n_turns=len(turns), status="ok" if complete else "failed",
                termination_reason="completed" if complete else "missing_turns",
                error=None if complete else f"expected 11 messages, found {len(turns)}", attempts=0,
                prompt_tokens=0, completion_tokens=0, started_at=now_utc(), finished_at=now_utc()))
    return rows


def read_official_scores(path: str | Path, *, model: str | None = None, language: str | None = None,
                         judge: str = OFFICIAL_JUDGE) -> list[dict[str, Any]]:
    """Score rows from a file or folder of official score JSON: run_id, dialogue_id, card_id,
    target_model, language, dimension (paper name), score (int, None for the release's -1),
    parse_status (ok | parse_failure), judge. Bad entries are errors naming file, key and dimension."""
    rows = []
    for f in official_json_files(path):
        m, lang = (model, language) if model and language else parse_official_name(f)
        m, lang = model or m, language or lang
        data = _load(f, "score")
        for key, dims in data.items():
            if not isinstance(dims, dict):
                raise OfficialFormatError(f"{f}: entry {key!r} is not an object of dimension scores")
            for dim_key, value in dims.items():
                if dim_key not in OFFICIAL_TO_PAPER and dim_key not in DIMENSION_NAMES:
                    raise OfficialFormatError(
                        f"{f}: entry {key!r} has unknown dimension {dim_key!r}; expected {list(OFFICIAL_TO_PAPER)}")
                if isinstance(value, bool) or not isinstance(value, int) or not OFFICIAL_UNPARSED <= value <= 4:
                    raise OfficialFormatError(
                        f"{f}: entry {key!r} dimension {dim_key!r} has score {value!r}; expected an integer 0-4 or -1")
                ok = value != OFFICIAL_UNPARSED
                rows.append({"run_id": f"official:{f.stem}", "dialogue_id": official_dialogue_id(f, key),
                             "card_id": str(key), "target_model": m, "language": lang,
                             "dimension": to_paper_dimension(dim_key), "score": value if ok else None,
                             "parse_status": "ok" if ok else "parse_failure", "judge": judge, "source": str(f)})
    return rows


# -- write ---------------------------------------------------------------------------------------
def write_official_scores(score_rows: list[dict[str, Any]], dialogue_rows: list[dict[str, Any]], out_dir: str | Path) -> list[Path]:
    """Write score JSON files in the official layout, one per (target model, language). The
    layout holds the seven dimensions only: rows of a dimension beyond the paper (safety) are left out."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    key_of = {r["dialogue_id"]: r for r in dialogue_rows}
    grouped: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    for s in score_rows:
        d = key_of.get(s["dialogue_id"])
        if d is None or s["dimension"] not in DIMENSIONS:
            continue
        entry = grouped.setdefault((d["target_model"], d["language"]), {}).setdefault(str(d["card_id"]), {})
        entry[DIMENSIONS[s["dimension"]]] = OFFICIAL_UNPARSED if s["score"] is None else int(s["score"])
    written = []
    stems = official_stems(grouped)
    for (model, lang), data in grouped.items():
        p = out_dir / f"{stems[(model, lang)]}.json"
        p.write_text(json.dumps(data, ensure_ascii=False, indent=4), encoding="utf-8")
        written.append(p)
    return written


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
    """'{model}_{lang}' as the release names its files (official_file_name without '.json')."""
    return Path(official_file_name(target_model, language)).stem


def write_official_dialogues(dialogue_rows: list[dict[str, Any]], out_dir: str | Path,
                             keys: dict[str, str] | None = None) -> list[Path]:
    """Dialogue JSON in the release's layout, one file per (target model, language):
    {"<card>": ["AI assistant：...", "ESC-Role：...", ...]}. read_official_dialogues reads them back
    turn for turn (the release's reader strips blanks after the speaker prefix, so does ours)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = keys or official_keys(dialogue_rows)
    stems = official_stems((r["target_model"], r["language"]) for r in dialogue_rows)
    grouped: dict[str, dict[str, list[str]]] = {}
    for r in dialogue_rows:
        turns = sorted(r["turns"] or [], key=lambda t: t["index"])
        grouped.setdefault(stems[(r["target_model"], r["language"])], {})[keys[r["dialogue_id"]]] = turns_as_lines(turns)
    written = []
    for stem, data in sorted(grouped.items()):
        path = out_dir / f"{stem}.json"
        ordered = {k: data[k] for k in sorted(data, key=_card_key_order)}
        path.write_text(json.dumps(ordered, ensure_ascii=False, indent=4), encoding="utf-8")
        written.append(path)
    return written


def export_run_official(run_dir: str | Path, out: Path, judge: str | None = None, include_failed: bool = False) -> dict:
    """A run folder's dialogues (the latest row of each, an ok row over a failed one; failed ones only with
    include_failed) and one judge's scores (`judge`, or the only one) in the release's JSON layout:
    out/dialogues/{model}_{lang}.json and out/scores/{model}_{lang}.json."""
    from esc_eval.sim.runs.runfolder import RunFolder
    from esc_eval.sim.runs.storage import RunFolderError

    try:
        run = RunFolder(run_dir, create=False)
    except RunFolderError as e:
        raise FileNotFoundError(str(e)) from None
    if not run.parts("dialogues"):
        raise FileNotFoundError(f"{run}: no dialogues/part-*.parquet (not a run folder?)")
    latest: dict[str, dict] = {}
    # The latest row of a dialogue wins, an ok row over a failed one (a re-run rewrites it).
    for r in run.iter_rows("dialogues"):
        prev = latest.get(r["dialogue_id"])
        rank = (r["status"] == "ok", r["finished_at"] or 0)
        if prev is None or rank >= (prev["status"] == "ok", prev["finished_at"] or 0):
            latest[r["dialogue_id"]] = r
    dialogues = [r for r in latest.values() if include_failed or r["status"] == "ok"]
    skipped = len(latest) - len(dialogues)
    keys = official_keys(dialogues)
    files = write_official_dialogues(dialogues, out / "dialogues", keys)
    cols = ["dialogue_id", "dimension", "score", "judge", "scored_at"]
    scores = list(run.iter_rows("scores", columns=cols)) if run.parts("scores") else []
    judges = sorted({s["judge"] for s in scores})
    if judge is None and len(judges) > 1:
        raise ValueError(f"{run}: scores from several judges {judges}: pick one with --judge")
    if judge is not None and judge not in judges:
        raise ValueError(f"--judge {judge!r}: no such judge in {run} (has {judges})")
    score_files = []
    if scores:
        chosen = judge or judges[0]
        # write_official_scores keeps the last row per key: feed rows oldest first.
        rows = sorted((s for s in scores if s["judge"] == chosen and s["dialogue_id"] in keys),
                      key=lambda s: str(s["scored_at"]))
        keyed = [{**d, "card_id": keys[d["dialogue_id"]]} for d in dialogues]
        score_files = write_official_scores(rows, keyed, out / "scores")
    return {"dialogues": [str(p) for p in files], "scores": [str(p) for p in score_files],
            "n_dialogues": len(dialogues), "skipped_failed": skipped, "judge": judge or (judges[0] if judges else None)}
