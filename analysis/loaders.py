"""Read results into pandas: score rows and dialogue rows of run folders, official ESC-Eval JSON.

Every loader returns the same long layout whatever the source, so the leaderboard, the
correlations and the report work on run folders and on the paper's released files alike:

scores:    run_id, dialogue_id, card_id, target_model, language, dimension (paper name),
           score (float, NaN = no usable score), parse_status, judge, ... (other SCORE_SCHEMA columns)
dialogues: the DIALOGUE_SCHEMA columns, `turns` as a list of dicts.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable

import pandas as pd

from esc_eval.sim.dimensions import DIMENSION_NAMES, OFFICIAL_TO_PAPER, to_paper_dimension
from esc_eval.sim.official import parse_official_line
from esc_eval.sim.records import DIALOGUE_SCHEMA, SCORE_SCHEMA
from esc_eval.sim.runfolder import RunFolder, RunFolderError

PathLike = str | os.PathLike[str]
SCORE_KEY = ["run_id", "dialogue_id", "dimension", "judge"]
KNOWN_LANGUAGES = ("en", "zh")
# Official score files mark an answer the judge's output could not be parsed into as -1.
OFFICIAL_UNPARSED = -1


class AnalysisInputError(ValueError):
    """The input files cannot be analysed as given (the message names the file and the field)."""


def _as_paths(run_dirs: PathLike | Iterable[PathLike]) -> list[Path]:
    if isinstance(run_dirs, (str, os.PathLike)):
        return [Path(run_dirs)]
    paths = [Path(p) for p in run_dirs]
    if not paths:
        raise AnalysisInputError("no run folder given")
    return paths


def _open(path: Path) -> RunFolder:
    try:
        return RunFolder(path, create=False)
    except RunFolderError as e:  # "run folder ... does not exist"
        raise AnalysisInputError(str(e)) from e


def _read_kind(path: Path, kind: str) -> pd.DataFrame:
    df = _open(path).read(kind).to_pandas()
    df["run_dir"] = str(path)
    # Row order within a run = part order (part names start with a UTC stamp); keep it as a
    # tie-breaker for rows that carry the same timestamp.
    df["_order"] = range(len(df))
    return df


def _empty(schema) -> pd.DataFrame:
    df = schema.empty_table().to_pandas()
    df["run_dir"] = pd.Series(dtype="object")
    return df


def load_scores(run_dirs: PathLike | Iterable[PathLike]) -> pd.DataFrame:
    """Score rows of one or more run folders, latest row per (run_id, dialogue_id, dimension, judge).

    A path that is a file or folder of official score JSON (Qwen_7B_en.json, ...) is read with
    load_official_scores instead, so the leaderboard also works on the paper's released scores.

    A re-score appends new parts; the latest `scored_at` wins (ties: the later part). `score` is
    a float with NaN where the judge gave no usable answer (parse failure or error): those rows
    are kept so that parse-failure rates can be reported. `dimension` is normalised to the
    paper's name; `card_id` is joined from the folders' dialogue rows when they exist.
    A folder without scores contributes no rows (the caller reports that; it is not an error).
    """
    paths = _as_paths(run_dirs)
    frames = []
    official = []
    for i, p in enumerate(paths):
        if is_official_json(p):
            files = [f for f in _json_files(p) if official_kind(f) == "scores"]
            if files:
                # run_dir = the path as given, so per-run summaries find these rows.
                official.append(pd.concat([load_official_scores(f) for f in files]).assign(run_dir=str(p)))
            continue
        df = _read_kind(p, "scores")
        df["_folder"] = i
        frames.append(df)
    frames = [f for f in frames if not f.empty]
    df = pd.concat(frames, ignore_index=True) if frames else _empty(SCORE_SCHEMA)
    if official:
        # Official files carry only these columns; they are final (no re-scores to dedupe).
        off = pd.concat(official, ignore_index=True)
        if df.empty:
            return off.sort_values(["language", "target_model", "dialogue_id", "dimension"]).reset_index(drop=True)
        return pd.concat([_finish_scores(df, [p for p in paths if not is_official_json(p)]), off],
                         ignore_index=True)
    return _finish_scores(df, paths)


def is_official_json(path: PathLike) -> bool:
    """A file or folder of official ESC-Eval JSON (scores or dialogues) rather than a run folder."""
    p = Path(path)
    if p.is_file():
        return p.suffix == ".json"
    return (p.is_dir() and not (p / "manifest.json").exists() and not (p / "scores").is_dir()
            and not (p / "dialogues").is_dir() and any(p.glob("*.json")))


def official_kind(path: PathLike) -> str:
    """'scores' ({"0": {"fluency": 3, ...}}), 'dialogues' ({"0": ["AI assistant：...", ...]}) or
    'unknown', from the first entry of an official JSON file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise AnalysisInputError(f"{path}: not readable as JSON ({e})") from e
    first = next(iter(data.values()), None) if isinstance(data, dict) else None
    return "scores" if isinstance(first, dict) else "dialogues" if isinstance(first, list) else "unknown"


def _finish_scores(df: pd.DataFrame, paths: list[Path]) -> pd.DataFrame:
    if df.empty:
        out = _empty(SCORE_SCHEMA)
        out["card_id"] = pd.Series(dtype="object")
        out["score"] = out["score"].astype("float64")
        return out
    try:
        df["dimension"] = df["dimension"].map(to_paper_dimension)
    except ValueError as e:
        raise AnalysisInputError(f"score rows: {e}") from e
    df["judge"] = df["judge"].fillna("unknown")
    df = df.sort_values(["scored_at", "_folder", "_order"], na_position="first", kind="stable")
    df = df.drop_duplicates(SCORE_KEY, keep="last")
    df["score"] = df["score"].astype("float64")
    bad = df["score"].notna() & ~df["score"].isin([0, 1, 2, 3, 4])
    if bad.any():
        row = df[bad].iloc[0]
        raise AnalysisInputError(
            f"{row['run_dir']}: score {row['score']} for dialogue {row['dialogue_id']} "
            f"dimension {row['dimension']} is outside 0-4"
        )
    cards = _card_ids(paths)
    df = df.merge(cards, on="dialogue_id", how="left") if not cards.empty else df.assign(card_id=None)
    return df.drop(columns=["_order", "_folder"]).sort_values(
        ["language", "target_model", "dialogue_id", "dimension"], kind="stable"
    ).reset_index(drop=True)


def _card_ids(paths: list[Path]) -> pd.DataFrame:
    frames = []
    for p in paths:
        t = _open(p).read("dialogues", columns=["dialogue_id", "card_id"])
        frames.append(t.to_pandas())
    if not frames:
        return pd.DataFrame(columns=["dialogue_id", "card_id"])
    return pd.concat(frames, ignore_index=True).drop_duplicates("dialogue_id", keep="last")


def load_dialogues(run_dirs: PathLike | Iterable[PathLike]) -> pd.DataFrame:
    """Dialogue rows of one or more run folders, one per dialogue_id (paths of official dialogue
    JSON are read with load_official_dialogues).

    A dialogue id is a stable hash of its inputs, so retries and re-runs write it again: keep an
    ok row over a failed one, then the latest `finished_at` (ties: the later part).
    """
    paths = _as_paths(run_dirs)
    frames = []
    for i, p in enumerate(paths):
        if is_official_json(p):
            files = [f for f in _json_files(p) if official_kind(f) == "dialogues"]
            df = (pd.concat([load_official_dialogues(f) for f in files], ignore_index=True).assign(run_dir=str(p))
                  if files else _empty(DIALOGUE_SCHEMA))
            df["_order"] = range(len(df))
        else:
            df = _read_kind(p, "dialogues")
        df["_folder"] = i
        frames.append(df)
    frames = [f for f in frames if not f.empty]
    df = pd.concat(frames, ignore_index=True) if frames else _empty(DIALOGUE_SCHEMA)
    if df.empty:
        return _empty(DIALOGUE_SCHEMA)
    df["_ok"] = (df["status"] == "ok").astype(int)
    df = df.sort_values(["_ok", "finished_at", "_folder", "_order"], na_position="first", kind="stable")
    df = df.drop_duplicates("dialogue_id", keep="last")
    df["turns"] = df["turns"].map(lambda t: [] if t is None else list(t))
    return df.drop(columns=["_ok", "_order", "_folder"]).sort_values(
        ["language", "target_model", "dialogue_id"], kind="stable"
    ).reset_index(drop=True)


def load_manifests(run_dirs: PathLike | Iterable[PathLike]) -> dict[str, dict]:
    """manifest.json of each run folder, keyed by the folder path ({} when absent)."""
    out = {}
    for p in _as_paths(run_dirs):
        try:
            out[str(p)] = _open(p).read_manifest()
        except RunFolderError as e:  # manifest.json is not valid JSON
            raise AnalysisInputError(str(e)) from e
    return out


_STEM = re.compile(r"^(?P<model>.+)_(?P<lang>[A-Za-z]{2})$")


def parse_official_name(path: PathLike) -> tuple[str, str]:
    """'Qwen_7B_en.json' -> ('Qwen_7B', 'en')."""
    stem = Path(path).stem
    m = _STEM.match(stem)
    if not m or m.group("lang").lower() not in KNOWN_LANGUAGES:
        raise AnalysisInputError(
            f"{path}: official file names look like <model>_<language>.json with language in "
            f"{KNOWN_LANGUAGES} (e.g. Qwen_7B_en.json); pass model= and language= explicitly"
        )
    return m.group("model"), m.group("lang").lower()


def _json_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        if not files:
            raise AnalysisInputError(f"{path}: no *.json files")
        return files
    if not path.exists():
        raise AnalysisInputError(f"{path}: no such file or folder")
    return [path]


def load_official_scores(
    path: PathLike, *, model: str | None = None, language: str | None = None, judge: str = "ESC-RANK (official)"
) -> pd.DataFrame:
    """Official ESC-Eval score JSON (`{"0": {"fluency": 3, "diversity": 3, ...}, ...}`) as score rows.

    `path` is one file or a folder of them. Model and language come from the file name
    (`Qwen_7B_en.json` -> Qwen_7B, en) unless given. A score of -1 means the judge's answer was
    not parsed: it becomes NaN with parse_status "parse_failure". The key ("0", "1", ...) is the
    card's index in the released card file, so it is kept as `card_id` (dialogues of different
    models on one card can be paired) and the dialogue id is "<model>_<language>:<key>".
    """
    rows = []
    for f in _json_files(Path(path)):
        if model is None or language is None:
            m, lang = parse_official_name(f)
        m, lang = model or m, language or lang
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise AnalysisInputError(f"{f}: not valid JSON ({e})") from e
        if not isinstance(data, dict):
            raise AnalysisInputError(f"{f}: expected an object keyed by dialogue index, got {type(data).__name__}")
        for key, dims in data.items():
            if not isinstance(dims, dict):
                raise AnalysisInputError(f"{f}: entry {key!r} is not an object of dimension scores")
            for dim_key, value in dims.items():
                if dim_key not in OFFICIAL_TO_PAPER and dim_key not in DIMENSION_NAMES:
                    raise AnalysisInputError(
                        f"{f}: entry {key!r} has unknown dimension {dim_key!r}; expected {list(OFFICIAL_TO_PAPER)}"
                    )
                if isinstance(value, bool) or not isinstance(value, int) or not OFFICIAL_UNPARSED <= value <= 4:
                    raise AnalysisInputError(
                        f"{f}: entry {key!r} dimension {dim_key!r} has score {value!r}; expected an integer 0-4 or -1"
                    )
                ok = value != OFFICIAL_UNPARSED
                rows.append(
                    {
                        "run_id": f"official:{f.stem}",
                        "dialogue_id": f"{m}_{lang}:{key}",
                        "card_id": str(key),
                        "target_model": m,
                        "language": lang,
                        "dimension": to_paper_dimension(dim_key),
                        "score": float(value) if ok else float("nan"),
                        "parse_status": "ok" if ok else "parse_failure",
                        "judge": judge,
                        "run_dir": str(f),
                    }
                )
    return pd.DataFrame(
        rows,
        columns=["run_id", "dialogue_id", "card_id", "target_model", "language", "dimension", "score",
                 "parse_status", "judge", "run_dir"],
    ).astype({"score": "float64"})


# The official dialogue files prefix each turn with the speaker (one parser: sim.official).
_OFFICIAL_SPEAKERS = ("AI assistant", "ESC-Role")


def load_official_dialogues(path: PathLike, *, model: str | None = None, language: str | None = None) -> pd.DataFrame:
    """Official dialogue JSON (`{"0": ["AI assistant：...", "ESC-Role：...", ...]}`) as dialogue rows.

    Gives the same `turns` layout as run folders (speaker assistant|seeker, text), so the
    fidelity checks and text metrics run on the paper's released dialogues too.
    """
    rows = []
    for f in _json_files(Path(path)):
        if model is None or language is None:
            m, lang = parse_official_name(f)
        m, lang = model or m, language or lang
        data = json.loads(f.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise AnalysisInputError(f"{f}: expected an object keyed by dialogue index")
        for key, utterances in data.items():
            turns = []
            for i, u in enumerate(utterances):
                parsed = parse_official_line(u)
                if parsed is None:
                    raise AnalysisInputError(
                        f"{f}: dialogue {key!r} turn {i} does not start with one of "
                        f"{[s + '：' for s in _OFFICIAL_SPEAKERS]}: {str(u)[:40]!r}"
                    )
                turns.append({"index": i, "speaker": parsed[0], "text": parsed[1]})
            rows.append(
                {
                    **{name: None for name in DIALOGUE_SCHEMA.names},
                    "run_id": f"official:{f.stem}",
                    "dialogue_id": f"{m}_{lang}:{key}",
                    "card_id": str(key),
                    "language": lang,
                    "target_model": m,
                    "role_model": "ESC-Role",
                    "turns": turns,
                    "n_turns": len(turns),
                    "status": "ok",
                    "termination_reason": "completed",
                    "run_dir": str(f),
                }
            )
    df = pd.DataFrame(rows, columns=DIALOGUE_SCHEMA.names + ["run_dir"])
    for c in ("started_at", "finished_at"):
        df[c] = pd.to_datetime(df[c], utc=True)  # all empty: the official files carry no times
    return df
