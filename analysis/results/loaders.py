"""Read results into pandas: score rows and dialogue rows of run folders, official ESC-Eval JSON.

Every loader returns the same long layout whatever the source, so the leaderboard, the
correlations and the report work on run folders and on the paper's released files alike:

scores:    run_id, dialogue_id, card_id, target_model, language, dimension (paper name),
           score (float, NaN = no usable score), parse_status, judge, ... (other SCORE_SCHEMA columns)
dialogues: the DIALOGUE_SCHEMA columns, `turns` as a list of dicts.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterable

import pandas as pd

from esc_eval.analysis.judgments.windowed import DEFAULT_WINDOWED, apply_windowed, check_windowed
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, to_dimension
from esc_eval.sim.runs import official
from esc_eval.sim.runs.official import (KNOWN_LANGUAGES, OFFICIAL_UNPARSED, OfficialFormatError)  # noqa: F401 - re-exported
from esc_eval.sim.runs.records import DIALOGUE_SCHEMA, PAIRWISE_SCHEMA, SCORE_SCHEMA
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.storage import RunFolderError, as_location, is_uri

PathLike = str | os.PathLike[str]
SCORE_KEY = ["run_id", "dialogue_id", "dimension", "judge"]


class AnalysisInputError(ValueError):
    """The input files cannot be analysed as given (the message names the file and the field)."""


def _as_paths(run_dirs: PathLike | Iterable[PathLike]) -> list[Path | str]:
    """Local folders as Paths; storage URIs (s3://...) stay strings."""
    if isinstance(run_dirs, (str, os.PathLike)):
        return [as_location(run_dirs)]
    paths = [as_location(p) for p in run_dirs]
    if not paths:
        raise AnalysisInputError("no run folder given")
    return paths


def _open(path: Path | str) -> RunFolder:
    try:
        return RunFolder(path, create=False)
    except RunFolderError as e:  # "run folder ... does not exist"
        raise AnalysisInputError(str(e)) from e


def _read_kind(path: Path | str, kind: str) -> pd.DataFrame:
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


def load_scores(run_dirs: PathLike | Iterable[PathLike], *, extra_dimensions: bool = False,
                windowed: str = DEFAULT_WINDOWED) -> pd.DataFrame:
    """Score rows of one or more run folders, latest row per (run_id, dialogue_id, dimension, judge).

    windowed (windowed.py, the one home of the filter): include (default) | exclude | only the
    judgments made on a window of a dialogue too long for the judge (`rounds_left_out` > 0); the
    count is in the frame's attrs["windowed"], and `n_rounds` (the dialogue's rounds) is joined
    with `card_id` for the share of rounds the judge did not read.

    Only the paper's seven dimensions unless `extra_dimensions`: the rows of dimensions beyond
    the paper (safety) are reported apart (analysis/safety/crisis.py) and never reach Table 2, its
    Average or any figure pooled over the seven.

    A path that is a file or folder of official score JSON (Qwen_7B_en.json, ...) is read with
    load_official_scores instead, so the leaderboard also works on the paper's released scores.

    A re-score appends new parts; the latest `scored_at` wins (ties: the later part). `score` is
    a float with NaN where the judge gave no usable answer (parse failure or error): those rows
    are kept so that parse-failure rates can be reported. `dimension` is normalised to the
    paper's name; `card_id` is joined from the folders' dialogue rows when they exist.
    A folder without scores contributes no rows (the caller reports that; it is not an error).
    """
    check_windowed(windowed)
    return apply_windowed(_load_scores(_as_paths(run_dirs), extra_dimensions), windowed)


def _load_scores(paths: list, extra_dimensions: bool) -> pd.DataFrame:
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
        return pd.concat([_finish_scores(df, [p for p in paths if not is_official_json(p)], extra_dimensions), off],
                         ignore_index=True)
    return _finish_scores(df, paths, extra_dimensions)


def load_pairwise(run_dirs: PathLike | Iterable[PathLike]) -> pd.DataFrame:
    """Pairwise verdict rows (sim/runs/records.py PAIRWISE_SCHEMA) of one or more run folders, one per
    (pair, dimension, order, judge) in each folder (the latest wins, as for scores), with `run_dir`.
    Official JSON has none; a folder without verdicts contributes no rows (an empty frame with the
    schema's columns when no folder has any)."""
    frames = [f for f in (_read_kind(p, "pairwise") for p in _as_paths(run_dirs) if not is_official_json(p))
              if not f.empty]
    if not frames:
        return _empty(PAIRWISE_SCHEMA)
    return pd.concat(frames, ignore_index=True).drop(columns=["_order"]).reset_index(drop=True)


def is_official_json(path: PathLike) -> bool:
    """A file or folder of official ESC-Eval JSON (scores or dialogues) rather than a run folder."""
    if is_uri(path):
        return False  # storage URIs name run folders
    p = Path(path)
    if p.is_file():
        return p.suffix == ".json"
    return (p.is_dir() and not (p / "manifest.json").exists() and not (p / "scores").is_dir()
            and not (p / "dialogues").is_dir() and any(p.glob("*.json")))


def official_kind(path: PathLike) -> str:
    """'scores', 'dialogues' or 'unknown' (sim.runs.official.official_kind, errors as AnalysisInputError)."""
    with _official_errors():
        return official.official_kind(path)


def _finish_scores(df: pd.DataFrame, paths: list[Path], extra_dimensions: bool = False) -> pd.DataFrame:
    if not df.empty:
        try:
            df["dimension"] = df["dimension"].map(to_dimension)
        except ValueError as e:
            raise AnalysisInputError(f"score rows: {e}") from e
        if not extra_dimensions:
            df = df[df["dimension"].isin(DIMENSION_NAMES)].copy()
    if df.empty:
        out = _empty(SCORE_SCHEMA)
        out["card_id"] = pd.Series(dtype="object")
        out["score"] = out["score"].astype("float64")
        return out
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
    df = df.merge(cards, on="dialogue_id", how="left") if not cards.empty else df.assign(card_id=None, n_rounds=None)
    return df.drop(columns=["_order", "_folder"]).sort_values(
        ["language", "target_model", "dialogue_id", "dimension"], kind="stable"
    ).reset_index(drop=True)


def _card_ids(paths: list[Path]) -> pd.DataFrame:
    """Each dialogue's card and rounds (the opener and two turns a round: n_turns // 2)."""
    frames = []
    for p in paths:
        t = _open(p).read("dialogues", columns=["dialogue_id", "card_id", "n_turns"])
        frames.append(t.to_pandas())
    if not frames:
        return pd.DataFrame(columns=["dialogue_id", "card_id", "n_rounds"])
    out = pd.concat(frames, ignore_index=True).drop_duplicates("dialogue_id", keep="last")
    return out.assign(n_rounds=out["n_turns"] // 2).drop(columns="n_turns")


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


@contextlib.contextmanager
def _official_errors():
    """The official format is read by sim.runs.official; its errors reach analysis callers as theirs."""
    try:
        yield
    except OfficialFormatError as e:
        raise AnalysisInputError(str(e)) from None


def parse_official_name(path: PathLike) -> tuple[str, str]:
    """'Qwen_7B_en.json' -> ('Qwen_7B', 'en')."""
    with _official_errors():
        return official.parse_official_name(path)


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
    path: PathLike, *, model: str | None = None, language: str | None = None, judge: str = official.OFFICIAL_JUDGE
) -> pd.DataFrame:
    """Official ESC-Eval score JSON (`{"0": {"fluency": 3, "diversity": 3, ...}, ...}`) as score rows
    (read by sim.runs.official). `path` is one file or a folder of them; model and language come from
    the file name (`Qwen_7B_en.json`) unless given. A score of -1 (the judge's answer was not parsed)
    becomes NaN with parse_status "parse_failure". The key is the card id, so dialogues of different
    models on one card pair up; the dialogue id is "<file stem>:<key>"."""
    with _official_errors():
        rows = [r for f in _json_files(Path(path))
                for r in official.read_official_scores(f, model=model, language=language, judge=judge)]
    cols = ["run_id", "dialogue_id", "card_id", "target_model", "language", "dimension", "score", "parse_status",
            "judge", "run_dir"]
    df = pd.DataFrame([{**r, "run_dir": r["source"]} for r in rows], columns=cols)
    return df.astype({"score": "float64"})


def load_official_dialogues(path: PathLike, *, model: str | None = None, language: str | None = None) -> pd.DataFrame:
    """Official dialogue JSON (`{"0": ["AI assistant：...", "ESC-Role：...", ...]}`) as dialogue rows
    (read by sim.runs.official), in the run folders' `turns` layout, so the fidelity checks and text
    metrics run on the paper's released dialogues too."""
    rows = []
    with _official_errors():
        for f in _json_files(Path(path)):
            rows += [{**r, "run_dir": str(f)} for r in official.read_official_dialogues(f, model=model, language=language)]
    df = pd.DataFrame(rows, columns=DIALOGUE_SCHEMA.names + ["run_dir"])
    for c in ("started_at", "finished_at"):
        df[c] = pd.to_datetime(df[c], utc=True)
    return df
