"""The results viewer's queries: browse every dialogue of one or more run folders.

Memory stays flat in the number of dialogues' turns: at start-up only a small index is built
(one row per dialogue without its turns, plus its seven mean scores), read with a projection of
the Parquet parts (a part whose dialogues have no stored spoiled flag, written before the flags
existed, has its turns read once, part by part, to compute them; the folder's cache keeps the
result). A dialogue's turns are read from its own part file when it is opened, and the
full-text search streams the `turns` column batch by batch through a pyarrow dataset scanner.

`esc-eval view` (cli/results/view.py) serves these queries as JSON (analysis/web/viewer_server.py serve_viewer).
"""
from __future__ import annotations

import functools
import json
import math
import os
import posixpath
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.results.spoiled import fill_part_flags, run_cards
from esc_eval.analysis.web.viewer_pairwise import read_pairwise, verdicts_of
from esc_eval.analysis.web.viewer_spoiled import spoiled_statuses, status_mask
from esc_eval.sim.judging.dimensions import ALL_DIMENSION_NAMES, DIMENSION_NAMES, to_dimension, to_paper_dimension
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.storage import RunFolderError, location_name

# Dialogue columns the index holds: everything but the turns and the generation parameters.
INDEX_COLUMNS = ["dialogue_id", "card_id", "language", "category_1", "category_2", "category_3", "target_model",
                 "role_model", "strategy", "seed", "n_turns", "status", "termination_reason", "error",
                 "prompt_tokens", "completion_tokens", "finished_at", "spoiled", "spoiled_reasons"]
# Low-cardinality columns are kept as pandas categoricals: 100K rows cost a few MB.
CATEGORICAL = ["run", "language", "category_1", "category_2", "category_3", "target_model", "role_model",
               "strategy", "status", "termination_reason"]
SORTABLE = {"average", *DIMENSION_NAMES, "card_id", "target_model", "language", "status", "finished_at", "n_turns"}
MAX_PAGE = 500


# Derived, rebuildable data: the projected columns of every part, keyed by part file name. Part
# files are immutable once renamed into place, so a cached part never goes stale; reopening a
# folder reads one file per kind plus the parts written since (a live run stays cheap to reopen).
CACHE_DIR = ".viewer-cache"
CACHE_VERSION = 3  # 3: the spoiled flags (computed ones are cached: bump when sim/dialogue/spoiled.py's rules change)
SCORE_INDEX_COLUMNS = ["dialogue_id", "dimension", "score"]


def _read_projected(folder: RunFolder, key: str, columns: list[str], part: int,
                    cards: dict[str, str] | None = None) -> pa.Table:
    # ParquetFile.read is ~2x cheaper per small file than pq.read_table (no dataset discovery).
    pf = folder.open_part(key)
    have = set(pf.schema_arrow.names)
    table = pf.read(columns=[c for c in columns if c in have])
    if "spoiled" in columns:  # rows without a stored flag (older parts): computed from this part's turns, then cached
        table = fill_part_flags(table, lambda: pf.read(columns=["turns"]).column("turns"), cards or {}).select(columns)
    n = table.num_rows
    # The part (an index into the folder's sorted part list) and the row within it: where the
    # full row is read from when the dialogue is opened. Integers, not names: cheap to cache and read.
    table = table.append_column("_part", pa.array(np.full(n, part, dtype=np.int32)))
    return table.append_column("_row", pa.array(np.arange(n, dtype=np.int32)))


def load_projected(run: RunFolder, kind: str, parts: list[str], columns: list[str], pool: ThreadPoolExecutor,
                   cards: dict[str, str] | None = None) -> pa.Table:
    """The given columns of every part of a kind (+ _part: index into `parts`, _row), through the
    folder's cache (its schema metadata lists the part names its _part values refer to)."""
    cache = f"{CACHE_DIR}/{kind}-v{CACHE_VERSION}.parquet"
    wanted = [*columns, "_part", "_row"]
    names = [posixpath.basename(p) for p in parts]
    position = {n: i for i, n in enumerate(names)}
    cached, cached_names = None, []
    if run.storage.exists(cache):
        try:
            cached = pq.read_table(pa.BufferReader(run.storage.read(cache)))
            cached_names = json.loads((cached.schema.metadata or {}).get(b"esc_eval_parts", b"null"))
            if cached.column_names != wanted or not isinstance(cached_names, list):
                cached, cached_names = None, []
        except (OSError, pa.ArrowInvalid, ValueError):
            cached, cached_names = None, []  # a damaged cache is rebuilt, never trusted
    tables = []
    if cached is not None:
        # Renumber the cached rows' parts to the current list; rows of removed parts are dropped.
        remap = np.array([position.get(n, -1) for n in cached_names] or [-1], dtype=np.int32)
        new_part = remap[cached.column("_part").to_numpy()]
        keep = new_part >= 0
        cached = cached.set_column(cached.column_names.index("_part"), "_part", pa.array(new_part))
        tables.append(cached if keep.all() else cached.filter(pa.array(keep)))
    known = set(cached_names)
    missing = [(i, p) for i, p in enumerate(parts) if posixpath.basename(p) not in known]
    tables += list(pool.map(lambda ip: _read_projected(run, ip[1], columns, ip[0], cards), missing))
    if not tables:
        raise AnalysisInputError(f"{run}: no {kind}/part-*.parquet")
    table = pa.concat_tables(tables, promote_options="default").replace_schema_metadata(None)
    if missing or known != set(names):
        try:
            sink = pa.BufferOutputStream()
            pq.write_table(table.replace_schema_metadata({"esc_eval_parts": json.dumps(names)}), sink,
                           compression="zstd")
            run.storage.write(cache, sink.getvalue().to_pybytes(), durable=False)
        except OSError:
            pass  # a read-only run folder is browsed without a cache
    return table


class RunView:
    """One run folder: its index rows and where each dialogue's row and score rows live."""

    def __init__(self, path: str, label: str, pool: ThreadPoolExecutor):
        try:
            self.folder = RunFolder(path, create=False)
        except RunFolderError as e:
            raise AnalysisInputError(str(e)) from e
        self.path, self.label = str(self.folder), label
        self.dialogue_parts = self.folder.parts("dialogues")
        self.score_parts = self.folder.parts("scores")
        self._pairwise: pa.Table | None = None  # the pairwise verdicts, read when a dialogue first asks
        if not self.dialogue_parts:
            raise AnalysisInputError(f"{path}: no dialogues/part-*.parquet (not a run folder?)")
        self.manifest = self.folder.read_manifest()
        table = load_projected(self.folder, "dialogues", self.dialogue_parts, INDEX_COLUMNS, pool, run_cards(self.manifest))
        index = table.to_pandas()
        index["spoiled_reasons"] = [None if r is None else list(r) for r in index["spoiled_reasons"]]
        index["run"] = label
        # A re-run rewrites a dialogue (e.g. failed -> ok): the latest row wins, ties to the later part
        # (part names start with their UTC write time, so the part index orders them).
        index = (index.sort_values(["finished_at", "_part", "_row"], kind="stable")
                 .drop_duplicates("dialogue_id", keep="last"))
        means = self._scores(pool)
        self.index = index.join(means, on="dialogue_id")

    def _scores(self, pool: ThreadPoolExecutor) -> pd.DataFrame:
        cols = [*DIMENSION_NAMES, "average"]
        self._score_ids: dict[str, int] = {}
        self._score_loc = np.zeros(0, dtype=np.int64)
        if not self.score_parts:
            return pd.DataFrame(columns=cols, dtype=float)
        scores = load_projected(self.folder, "scores", self.score_parts, SCORE_INDEX_COLUMNS, pool)
        # Mean over judges (and re-scores) per dialogue and dimension, with integer codes and
        # bincount: a pandas pivot of 700K rows costs seconds, this a few tens of ms.
        did = pc.dictionary_encode(scores.column("dialogue_id")).combine_chunks()
        dim = pc.dictionary_encode(scores.column("dimension")).combine_chunks()
        try:
            # -1: a dimension beyond the paper (safety): shown with the dialogue, never in the seven's means
            dim_pos = np.array([DIMENSION_NAMES.index(d) if d in DIMENSION_NAMES else -1
                                for d in map(to_dimension, dim.dictionary.to_pylist())], dtype=np.int64)
        except ValueError as e:
            raise AnalysisInputError(f"{self.path}: score rows: {e}") from e
        ids, codes = did.dictionary.to_pylist(), did.indices.to_numpy().astype(np.int64)
        pos = dim_pos[dim.indices.to_numpy()]
        flat = codes * len(DIMENSION_NAMES) + pos
        score = scores.column("score").to_numpy(zero_copy_only=False).astype(float)
        ok = ~np.isnan(score) & (pos >= 0)
        size = len(ids) * len(DIMENSION_NAMES)
        sums = np.bincount(flat[ok], weights=score[ok], minlength=size)
        counts = np.bincount(flat[ok], minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = (sums / counts).reshape(len(ids), len(DIMENSION_NAMES))
        wide = pd.DataFrame(means, index=pd.Index(ids, name="dialogue_id"), columns=DIMENSION_NAMES)
        wide["average"] = wide.mean(axis=1)
        # Which score parts hold each dialogue's rows (sorted codes): opening a dialogue reads only those.
        self._score_ids = {d: i for i, d in enumerate(ids)}
        self._n_score_parts = len(self.score_parts)
        self._score_loc = np.unique(codes * self._n_score_parts + scores.column("_part").to_numpy())
        return wide

    def dialogue_row(self, part: int, row: int) -> dict[str, Any]:
        t = self.folder.open_part(self.dialogue_parts[part]).read().slice(row, 1).to_pylist()[0]
        for key in ("target_params", "role_params"):
            if t.get(key):
                try:
                    t[key] = json.loads(t[key])
                except (TypeError, json.JSONDecodeError):
                    pass
        return t

    def score_rows(self, dialogue_id: str) -> list[dict[str, Any]]:
        code = self._score_ids.get(dialogue_id)
        if code is None:
            return []
        n = self._n_score_parts
        lo, hi = np.searchsorted(self._score_loc, [code * n, (code + 1) * n])
        parts = [self.score_parts[int(k % n)] for k in self._score_loc[lo:hi]]
        if not parts:
            return []
        t = self.folder.dataset(parts).to_table(
            filter=ds.field("dialogue_id") == dialogue_id,
            columns=["dimension", "score", "probs", "expected", "raw", "parse_status", "judge", "method", "parser",
                     "error", "scored_at"])
        rows = t.to_pylist()
        for r in rows:
            r["dimension"] = to_dimension(r["dimension"])
        order = {d: i for i, d in enumerate(ALL_DIMENSION_NAMES)}
        return sorted(rows, key=lambda r: (str(r["judge"]), order.get(r["dimension"], 99), str(r["scored_at"])))


    def pairwise_rows(self, dialogue_id: str) -> list[dict[str, Any]]:
        """The pairwise verdicts this dialogue is in (analysis/web/viewer_pairwise.py); the verdict
        rows are read on the first request."""
        if self._pairwise is None:
            self._pairwise = read_pairwise(self.folder)
        return verdicts_of(self._pairwise, dialogue_id)


def _clean(value: Any) -> Any:
    """JSON-safe values: NaN -> None, timestamps -> ISO strings, numpy scalars -> Python."""
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (np.floating,)):
        return None if np.isnan(value) else float(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (pd.Timestamp,)):
        return None if pd.isna(value) else value.isoformat()
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if value is pd.NA or value is pd.NaT:
        return None
    return value


class ResultsViewer:
    """Queries over the dialogues of several run folders (the JSON API's back end)."""

    def __init__(self, run_dirs: Iterable[str | os.PathLike[str]]):
        paths = [str(p) for p in run_dirs]
        if not paths:
            raise AnalysisInputError("no run folder given")
        labels = self._labels(paths)
        with ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 2) * 2)) as pool:
            self.runs = {label: RunView(p, label, pool) for p, label in zip(paths, labels)}
        frames = [r.index for r in self.runs.values()]
        index = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)
        for col in CATEGORICAL:
            index[col] = index[col].astype("category")
        self.index = index
        self._search_cache: OrderedDict[str, set[tuple[str, str]]] = OrderedDict()

    @staticmethod
    def _labels(paths: list[str]) -> list[str]:
        names = [location_name(p) for p in paths]
        if len(set(names)) == len(names):
            return names
        return [f"{i}:{n}" for i, n in enumerate(names)]

    # -- metadata ----------------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        idx = self.index

        def values(col: str) -> list[str]:
            return sorted(str(v) for v in idx[col].dropna().unique())

        return {
            "runs": [{"label": r.label, "path": str(r.path), "run_id": r.manifest.get("run_id"),
                      "n_dialogues": int((idx["run"] == r.label).sum()), "usage": r.manifest.get("usage")}
                     for r in self.runs.values()],
            "n_dialogues": int(len(idx)),
            "models": values("target_model"), "languages": values("language"),
            "statuses": values("status") + spoiled_statuses(idx),
            "categories": sorted(set(values("category_1")) | set(values("category_2")) | set(values("category_3"))),
            "dimensions": DIMENSION_NAMES,
        }

    # -- the list ---------------------------------------------------------------------------
    def search_ids(self, text: str) -> set[tuple[str, str]]:
        """(run, dialogue_id) of dialogues whose turns contain text (case-insensitive), streamed."""
        key = text.lower()
        if key in self._search_cache:
            self._search_cache.move_to_end(key)
            return self._search_cache[key]
        hits: set[tuple[str, str]] = set()
        for run in self.runs.values():
            dataset = run.folder.dataset(run.dialogue_parts)
            for batch in dataset.to_batches(columns=["dialogue_id", "turns"], batch_size=4096):
                turns = batch.column("turns")
                texts = pc.struct_field(pc.list_flatten(turns), "text")
                match = pc.match_substring(texts, text, ignore_case=True)
                parents = pc.list_parent_indices(turns)
                rows = pc.unique(pc.filter(parents, match))
                if len(rows):
                    ids = pc.take(batch.column("dialogue_id"), rows).to_pylist()
                    hits.update((run.label, i) for i in ids)
        self._search_cache[key] = hits
        if len(self._search_cache) > 16:
            self._search_cache.popitem(last=False)
        return hits

    def query(self, *, model: str | None = None, language: str | None = None, category: str | None = None,
              status: str | None = None, run: str | None = None, card_id: str | None = None,
              dimension: str = "average", score_min: float | None = None, score_max: float | None = None,
              q: str | None = None, sort: str = "card_id", descending: bool = False,
              offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """One page of index rows matching every given filter, and the total count."""
        idx = self.index
        mask = pd.Series(True, index=idx.index)
        if status:
            mask &= status_mask(idx, status)
        for col, value in (("target_model", model), ("language", language), ("run", run), ("card_id", card_id)):
            if value:
                mask &= idx[col] == value
        if category:
            mask &= (idx["category_1"] == category) | (idx["category_2"] == category) | (idx["category_3"] == category)
        dim = "average" if dimension in ("", "average") else to_paper_dimension(dimension)
        if score_min is not None:
            mask &= idx[dim] >= score_min
        if score_max is not None:
            mask &= idx[dim] <= score_max
        if q:
            needle = q.strip()
            hits = self.search_ids(needle)
            keys = pd.Series(list(zip(idx["run"].astype(str), idx["dialogue_id"])), index=idx.index)
            in_text = keys.isin(hits)
            in_ids = (idx["dialogue_id"].str.contains(needle, case=False, regex=False)
                      | idx["card_id"].astype(str).str.contains(needle, case=False, regex=False))
            mask &= in_text | in_ids
        sub = idx[mask]
        if sort not in SORTABLE:
            raise AnalysisInputError(f"sort: unknown column {sort!r}; expected one of {sorted(SORTABLE)}")
        sort_col = to_paper_dimension(sort) if sort in DIMENSION_NAMES else sort
        sub = sub.sort_values([sort_col, "dialogue_id"], ascending=[not descending, True], kind="stable",
                              na_position="last")
        limit = max(1, min(int(limit), MAX_PAGE))
        offset = max(0, int(offset))
        page = sub.iloc[offset:offset + limit]
        cols = ["run", "dialogue_id", "card_id", "language", "category_1", "category_2", "category_3",
                "target_model", "role_model", "strategy", "seed", "status", "termination_reason", "n_turns",
                "spoiled", "spoiled_reasons", *DIMENSION_NAMES, "average"]
        rows = [{c: _clean(v) for c, v in zip(cols, rec)} for rec in page[cols].itertuples(index=False, name=None)]
        return {"total": int(len(sub)), "offset": offset, "limit": limit, "rows": rows}

    # -- one dialogue -----------------------------------------------------------------------
    def _locate(self, run: str, dialogue_id: str) -> pd.Series:
        idx = self.index
        hit = idx[(idx["run"] == run) & (idx["dialogue_id"] == dialogue_id)]
        if hit.empty:
            raise KeyError(f"no dialogue {dialogue_id!r} in run {run!r}")
        return hit.iloc[0]

    def dialogue(self, run: str, dialogue_id: str) -> dict[str, Any]:
        """The full dialogue row (turns included), its mean scores, every score row (each judge's) and
        every pairwise verdict it is part of."""
        entry = self._locate(run, dialogue_id)
        view = self.runs[run]
        row = view.dialogue_row(int(entry["_part"]), int(entry["_row"]))
        row["run"] = run
        row["spoiled"], row["spoiled_reasons"] = entry["spoiled"], entry["spoiled_reasons"]  # computed if not stored
        row["mean_scores"] = {d: _clean(entry[d]) for d in [*DIMENSION_NAMES, "average"]}
        row["scores"] = view.score_rows(dialogue_id)
        row["pairwise"] = view.pairwise_rows(dialogue_id)
        return _clean(row)

    def side_by_side(self, card_id: str, model_a: str, model_b: str, language: str | None = None) -> dict[str, Any]:
        """The two models' dialogues on one card (the first of each by run, seed), turns aligned."""
        out: dict[str, Any] = {"card_id": card_id}
        idx = self.index
        for side, model in (("a", model_a), ("b", model_b)):
            m = (idx["card_id"] == card_id) & (idx["target_model"] == model)
            if language:
                m &= idx["language"] == language
            sub = idx[m].sort_values(["run", "seed", "dialogue_id"])
            if sub.empty:
                raise KeyError(f"model {model!r} has no dialogue on card {card_id!r}")
            first = sub.iloc[0]
            out[side] = self.dialogue(str(first["run"]), str(first["dialogue_id"]))
        return out

    def card_models(self, card_id: str) -> list[str]:
        """Models with a dialogue on this card (the side-by-side choices)."""
        return sorted(str(m) for m in self.index.loc[self.index["card_id"] == card_id, "target_model"].unique())


@functools.lru_cache(maxsize=1)
def viewer_page() -> str:
    """The single-page front end (package data next to this module)."""
    return (Path(__file__).with_name("viewer.html")).read_text(encoding="utf-8")
