"""Human annotation sheets: export dialogues to CSV sheets and import the filled ones.

A sheet has one row per dialogue and one score column per dimension (paper names, 0-4), the
dialogue rendered as text, and a comment column. The model under test is not shown (blind
annotation); rows are shuffled per annotator. Beside the sheets: rubric.csv and README.md with
the scoring rules of the paper's Table 16. The agreement between annotators is in agreement.py.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Iterable

import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.annotation.rubric import annotator_rubric_text, human_rubric
from esc_eval.sim.judging.dimensions import ALL_DIMENSION_NAMES, DIMENSION_NAMES, dimension_title, to_dimension

META_COLUMNS = ["item", "dialogue_id", "annotator", "language", "dialogue", "comment"]
SHEET_PREFIX = "annotate_"
SPEAKER_LABELS = {"assistant": "AI assistant", "seeker": "Seeker"}


class AnnotationError(AnalysisInputError):
    """A filled sheet has bad rows; the message lists each as file:line: problem."""


def sheet_dialogue_text(turns: Iterable[dict]) -> str:
    return "\n\n".join(f"{SPEAKER_LABELS.get(t['speaker'], t['speaker'])}: {t['text']}" for t in turns)


def export_annotation_sheets(
    dialogues: pd.DataFrame,
    out_dir: str | Path,
    annotators: list[str] | int = 2,
    dimensions: list[str] | None = None,
    seed: int = 0,
) -> dict[str, Path]:
    """Write annotate_<annotator>.csv per annotator, rubric.csv and README.md; returns their paths.

    Only dialogues with status ok are exported (a failed dialogue has nothing to judge).
    """
    if isinstance(annotators, int):
        if annotators < 1:
            raise ValueError("at least one annotator")
        annotators = [f"a{i + 1}" for i in range(annotators)]
    if len(set(annotators)) != len(annotators) or any(not a or "/" in a for a in annotators):
        raise ValueError(f"annotator names must be unique, non-empty file-name parts: {annotators}")
    dims = [to_dimension(d) for d in (dimensions or DIMENSION_NAMES)]
    ok = dialogues[dialogues["status"] == "ok"] if "status" in dialogues.columns else dialogues
    if ok.empty:
        raise AnalysisInputError("no dialogue with status ok to annotate")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    base = pd.DataFrame({
        "dialogue_id": ok["dialogue_id"].to_numpy(),
        "language": ok["language"].to_numpy() if "language" in ok.columns else "",
        "dialogue": [sheet_dialogue_text(t) for t in ok["turns"]],
    })
    for k, name in enumerate(annotators):
        # Each annotator sees a different order so that order effects do not line up.
        sheet = base.sample(frac=1.0, random_state=seed + k).reset_index(drop=True)
        sheet.insert(0, "item", range(1, len(sheet) + 1))
        sheet.insert(2, "annotator", name)
        for d in dims:
            sheet[d] = ""
        sheet["comment"] = ""
        p = out / f"{SHEET_PREFIX}{name}.csv"
        sheet.to_csv(p, index=False, encoding="utf-8-sig", quoting=csv.QUOTE_NONNUMERIC)  # BOM: Excel reads UTF-8
        paths[name] = p
    rub = pd.DataFrame([{"dimension": d, "table16_name": human_rubric(d)[0], "explanation": human_rubric(d)[1], "score": s,
                         "description": text} for d in dims for s, text in sorted(human_rubric(d)[2].items())])
    paths["rubric"] = out / "rubric.csv"
    rub.to_csv(paths["rubric"], index=False, encoding="utf-8-sig")
    readme = ["# Annotation instructions", "",
              "Read each dialogue and give every dimension column an integer score 0-4 following the",
              "rules below (the paper's Table 16). Leave a cell empty only if you cannot judge it.",
              "Do not edit the item, dialogue_id or annotator columns.", ""]
    for d in dims:
        readme += [f"## {dimension_title(d)} (column `{d}`)", "", *[f"- {ln}" for ln in annotator_rubric_text(d).splitlines()[1:]], ""]
    paths["readme"] = out / "README.md"
    paths["readme"].write_text("\n".join(readme), encoding="utf-8")
    return paths


def _parse_score(raw) -> float | None | str:
    """None for an empty cell, the score as float, or an error message."""
    if raw is None or (isinstance(raw, float) and math.isnan(raw)):
        return None
    text = str(raw).strip()
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        return f"score {text!r} is not a number"
    if not value.is_integer() or not 0 <= value <= 4:
        return f"score {text!r} outside the integers 0-4"
    return value


def sheets_of_runs(run_dirs: list[str], out_dir: str | Path, annotators: list[str] | int = 2, seed: int = 0) -> dict[str, str]:
    """`esc-eval annotate sheets`: export_annotation_sheets of the runs' dialogues; the paths."""
    from esc_eval.analysis.results.loaders import load_dialogues

    paths = export_annotation_sheets(load_dialogues(run_dirs), out_dir, annotators=annotators, seed=seed)
    return {k: str(v) for k, v in paths.items()}


def import_annotations(paths: str | Path | Iterable[str | Path]) -> pd.DataFrame:
    """Filled sheets (wide, as exported; or long with dimension/score columns) -> long rows
    annotator, dialogue_id, dimension, score, comment, source. Empty score cells are skipped.
    Every bad row is reported at once: unknown dimension, score not an integer 0-4, missing
    dialogue id or annotator, the same item scored twice by one annotator."""
    if isinstance(paths, (str, Path)):
        p = Path(paths)
        paths = sorted(p.glob(f"{SHEET_PREFIX}*.csv")) if p.is_dir() else [p]
    paths = [Path(p) for p in paths]
    if not paths:
        raise AnnotationError("no annotation sheet given (expected annotate_<name>.csv files)")
    rows, errors = [], []
    for path in paths:
        try:
            df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
        except (OSError, pd.errors.ParserError, UnicodeDecodeError) as e:
            raise AnnotationError(f"{path}: cannot read as CSV ({e})") from e
        default_annotator = path.stem[len(SHEET_PREFIX):] if path.stem.startswith(SHEET_PREFIX) else ""
        long_format = {"dimension", "score"} <= set(df.columns)
        if "dialogue_id" not in df.columns:
            errors.append(f"{path}: no dialogue_id column")
            continue
        dim_cols = []
        for c in ([] if long_format else [c for c in df.columns if c not in META_COLUMNS]):
            try:
                to_dimension(c)
                dim_cols.append(c)
            except ValueError:
                errors.append(f"{path}: unknown dimension column {c!r}; expected {ALL_DIMENSION_NAMES}")
        for i, r in df.iterrows():
            line = i + 2  # header is line 1
            annotator = (r.get("annotator") or default_annotator).strip()
            did = str(r["dialogue_id"]).strip()
            if not did:
                errors.append(f"{path}:{line}: empty dialogue_id")
                continue
            if not annotator:
                errors.append(f"{path}:{line}: no annotator (column or annotate_<name>.csv file name)")
                continue
            cells = [(r["dimension"], r["score"])] if long_format else [(c, r[c]) for c in dim_cols]
            for dim_raw, raw in cells:
                try:
                    dim = to_dimension(str(dim_raw))
                except ValueError:
                    errors.append(f"{path}:{line}: unknown dimension {dim_raw!r}")
                    continue
                value = _parse_score(raw)
                if isinstance(value, str):
                    errors.append(f"{path}:{line}: {dim}: {value}")
                elif value is not None:
                    rows.append({"annotator": annotator, "dialogue_id": did, "dimension": dim, "score": value,
                                 "comment": r.get("comment", ""), "source": f"{path}:{line}"})
    out = pd.DataFrame(rows, columns=["annotator", "dialogue_id", "dimension", "score", "comment", "source"])
    dup = out[out.duplicated(["annotator", "dialogue_id", "dimension"], keep=False)]
    for (a, d, dim), g in dup.groupby(["annotator", "dialogue_id", "dimension"]):
        errors.append(f"annotator {a} scored dialogue {d} {dim} more than once: {', '.join(g['source'])}")
    if errors:
        shown = errors[:50]
        more = f"\n... and {len(errors) - 50} more" if len(errors) > 50 else ""
        raise AnnotationError(f"{len(errors)} problem(s) in annotation sheets:\n" + "\n".join(shown) + more)
    return out
