"""Human scores for anchoring and calibrating a judge (`--humans SOURCE`), from wherever a lab keeps them.

SOURCE is one of:
- the annotate store: a SQLite file (`annotations.sqlite`), or a run folder holding one in
  `annotations/annotations.sqlite`; every study's answers, or `--study NAME`'s;
- filled paper-format sheets: a folder of `annotate_<name>.csv` or one CSV (wide: one column per
  dimension; or long: dimension and score columns), read by analysis.annotation.sheets.import_annotations;
- `annotate export`'s table (CSV, Parquet, JSON or JSONL: dialogue_id, dimension, score, annotator).

Two views of a dialogue's scores on one dimension: the mean of its annotators (what a human-scale
mean estimates: PPI) and the low median (one integer label, what `train rank` trains on and
Table 4 checks: calibration). Checked at the door, before anything is computed or written: no
score at all, scores of a single annotator (a single rater's scale is checked against nobody's;
`allow_one_annotator` accepts it), dialogues the runs do not hold.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

SQLITE_MAGIC = b"SQLite format 3\x00"
TABLE_SUFFIXES = (".parquet", ".json", ".jsonl")
LONG_COLUMNS = ["annotator", "dialogue_id", "dimension", "score"]


@dataclass(frozen=True)
class HumanScores:
    """Long human scores (annotator, dialogue_id, dimension, score 0-4) and where they came from."""

    long: pd.DataFrame
    source: str

    @property
    def n_annotators(self) -> int:
        return int(self.long["annotator"].nunique())

    @property
    def dialogue_ids(self) -> set[str]:
        return set(self.long["dialogue_id"])

    @cached_property
    def means(self) -> pd.DataFrame:
        """Dialogues x the seven dimensions: the mean of each dialogue's annotators (NaN: not scored)."""
        m = self.long.pivot_table(index="dialogue_id", columns="dimension", values="score", aggfunc="mean")
        return m.reindex(columns=DIMENSION_NAMES).astype(float)

    @cached_property
    def labels(self) -> pd.DataFrame:
        """dialogue_id, dimension, label (the low median of its annotators, an integer 0-4), n_annotators."""
        g = self.long.groupby(["dialogue_id", "dimension"])["score"]
        out = g.agg(label=lambda s: float(sorted(s)[(len(s) - 1) // 2]), n_annotators="size").reset_index()
        return out.astype({"label": int})

    def check_runs(self, run_dialogue_ids: set[str], what: str = "the run(s) given") -> None:
        """Every human-scored dialogue must be one of the runs' (a wrong store or a missing run otherwise)."""
        missing = sorted(self.dialogue_ids - set(run_dialogue_ids))
        if missing:
            raise AnalysisInputError(
                f"--humans {self.source}: {len(missing)} of {len(self.dialogue_ids)} human-scored dialogues are not "
                f"among the scored dialogues of {what} (first: {missing[0]!r}); give every run the study covers")


def load_human_scores(source: str | Path, *, study: str | None = None, allow_one_annotator: bool = False) -> HumanScores:
    """Read and check human scores (see the module docstring); AnalysisInputError with one line on bad input."""
    path = Path(source)
    if not path.exists():
        raise AnalysisInputError(f"--humans {source}: no such file or folder")
    store = _store_path(path)
    if store is not None:
        long = _from_store(store, study)
    elif study is not None:
        raise AnalysisInputError(f"--study {study}: only an annotate store has studies ({source} is not one)")
    elif path.is_dir() or path.suffix.lower() == ".csv":
        from esc_eval.analysis.annotation.sheets import import_annotations

        long = import_annotations(path)[LONG_COLUMNS]
    elif path.suffix.lower() in TABLE_SUFFIXES:
        long = _from_table(path)
    else:
        raise AnalysisInputError(f"--humans {source}: not an annotate store (SQLite), a run folder with one, "
                                 "annotation sheets (CSV) or an annotation table (.parquet, .json, .jsonl)")
    if long.empty:
        raise AnalysisInputError(f"--humans {source}: holds no human score")
    long = long.astype({"annotator": str, "dialogue_id": str, "dimension": str, "score": float}).reset_index(drop=True)
    names = sorted(long["annotator"].unique())
    if len(names) == 1 and not allow_one_annotator:
        raise AnalysisInputError(
            f"--humans {source}: every score is from one annotator ({names[0]}): a single rater's scale is checked "
            "against nobody's; have a second annotator overlap, or pass --allow-one-annotator to anchor on it")
    return HumanScores(long, str(source))



def read_humans(humans: str | Path | None, study: str | None = None, allow_one_annotator: bool = False) -> HumanScores | None:
    """A --humans option read and checked (load_human_scores), None when not given."""
    if humans is None:
        return None
    return load_human_scores(humans, study=study, allow_one_annotator=allow_one_annotator)

def _store_path(path: Path) -> Path | None:
    if path.is_dir():
        from esc_eval.analysis.annotation.store import default_store_path

        inside = default_store_path(path)
        if inside.is_file():
            return inside
        if (path / "manifest.json").exists() or (path / "scores").is_dir():
            raise AnalysisInputError(f"--humans {path}: a run folder without an annotate store ({inside}); "
                                     "create a study first (esc-eval annotate study ...)")
        return None
    with path.open("rb") as f:
        head = f.read(len(SQLITE_MAGIC))
    if head == SQLITE_MAGIC:
        return path
    if path.suffix.lower() in (".sqlite", ".sqlite3", ".db"):
        raise AnalysisInputError(f"--humans {path}: not a SQLite file")
    return None


def _from_store(path: Path, study: str | None) -> pd.DataFrame:
    from esc_eval.analysis.annotation.store import AnnotationStore
    from esc_eval.analysis.annotation.answers import answers_long

    store = AnnotationStore(path, create=False)
    try:
        if study is not None:
            store.study(study)  # an unknown study fails here, naming the known ones
        studies = [study] if study is not None else [s["study"] for s in store.studies()]
        frames = [store.answers(s) for s in studies]
    finally:
        store.close()
    answers = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["answered_at", *LONG_COLUMNS])
    if answers.empty:
        return pd.DataFrame(columns=LONG_COLUMNS)
    # One annotator answering a dialogue in two studies: their latest answer counts once.
    answers = answers.sort_values("answered_at", kind="stable").drop_duplicates(
        ["annotator", "dialogue_id", "dimension"], keep="last")
    return answers_long(answers)


def _from_table(path: Path) -> pd.DataFrame:
    """annotate export's Parquet / JSON / JSONL table, checked like the store checks an answer."""
    from esc_eval.analysis.annotation.answers import AnnotationStoreError, check_dimension, check_score

    try:
        if path.suffix.lower() == ".parquet":
            df = pd.read_parquet(path)
        else:
            df = pd.read_json(path, lines=path.suffix.lower() == ".jsonl", dtype=False)
    except (OSError, ValueError) as e:
        raise AnalysisInputError(f"--humans {path}: cannot read ({str(e).splitlines()[0] if str(e) else e})") from None
    lacking = [c for c in LONG_COLUMNS if c not in df.columns]
    if lacking:
        raise AnalysisInputError(f"--humans {path}: no {', '.join(lacking)} column (expected {', '.join(LONG_COLUMNS)})")
    try:
        dims = [check_dimension(d) for d in df["dimension"]]
        scores = [float(check_score(s)) for s in df["score"]]
    except AnnotationStoreError as e:
        raise AnalysisInputError(f"--humans {path}: {e}") from None
    out = pd.DataFrame({"annotator": df["annotator"].astype(str), "dialogue_id": df["dialogue_id"].astype(str),
                        "dimension": dims, "score": scores})
    dup = out.duplicated(["annotator", "dialogue_id", "dimension"])
    if dup.any():
        r = out[dup].iloc[0]
        raise AnalysisInputError(f"--humans {path}: annotator {r['annotator']} scored dialogue {r['dialogue_id']} "
                                 f"{r['dimension']} more than once")
    return out


def human_scores_of(sources: list[str], what: str = "planted") -> HumanScores:
    """Several sources' human scores as one (each read and checked as `--humans` reads it; a source
    holding none is skipped); AnalysisInputError when none holds any."""
    frames = []
    for source in sources:
        try:
            frames.append(load_human_scores(source, allow_one_annotator=True).long)
        except AnalysisInputError as e:
            if "holds no human score" not in str(e):
                raise
    if not frames:
        raise AnalysisInputError(f"{what}: no human score in {len(sources)} source(s)")
    return HumanScores(pd.concat(frames, ignore_index=True), what)
