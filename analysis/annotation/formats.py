"""A study's answers in other formats: the annotation table `train rank` reads, and Label Studio's
JSON (export and import) for labs that already annotate there.

Annotation table (train/data/annotations.py reads it; the CLI checks every export with that reader):
one row per answer, columns dialogue_id, dimension (paper name), score (0-4), annotator,
target_model, plus language, seconds, rubric_version, answered_at, study and source for the
lab's own analyses. CSV, Parquet, JSON (a list of rows) or JSONL by the file's suffix.

Label Studio (https://labelstud.io/guide/task_format): one task per dialogue, its turns in
`data.dialogue` as [{"author", "text"}] for a <Paragraphs layout="dialogue"> tag, `data.dialogue_id`
and `data.language`; each annotator's answers are one annotation whose `result` holds a
`choices` region per dimension (from_name = the dimension, value {"choices": ["3"]}) and a
`textarea` region "note"; `completed_by` is {"id", "email"} with the annotator id as email,
`lead_time` the seconds spent. `label_config()` is the matching labeling config. JSON_MIN is the
flat export (one record per annotation: the data fields, one field per dimension, annotator,
lead_time). Import reads either, and also `number` regions ({"number": 3}); tasks must carry
data.dialogue_id. The target model is never written to Label Studio files (they go to annotators).
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pandas as pd

from esc_eval.analysis.annotation.sheets import SPEAKER_LABELS
from esc_eval.analysis.annotation.answers import AnnotationStoreError, check_dimension, check_score
from esc_eval.analysis.annotation.store import AnnotationStore
from esc_eval.analysis.annotation.study import StudyConfig, select_dialogues
from esc_eval.analysis.annotation.rubric import annotation_rubric, annotation_rubric_version
from esc_eval.sim.judging.dimensions import ALL_DIMENSION_NAMES, DIMENSION_NAMES, SAFETY

TABLE_COLUMNS = ["dialogue_id", "dimension", "score", "annotator", "target_model", "language", "seconds",
                 "rubric_version", "answered_at", "study", "source"]
TABLE_SUFFIXES = (".csv", ".parquet", ".json", ".jsonl")
NOTE = "note"
TO_NAME = "dialogue"


# -- the training table -------------------------------------------------------------------
def annotation_table(store: AnnotationStore, study: str, index: pd.DataFrame) -> pd.DataFrame:
    """Every answer of a study as the annotation table (TABLE_COLUMNS), target model joined from the runs."""
    answers = store.answers(study)
    if answers.empty:
        raise AnnotationStoreError(f"study {study!r} holds no answer yet: nothing to export")
    meta = index.drop_duplicates("dialogue_id").set_index("dialogue_id")
    out = answers.assign(target_model=answers["dialogue_id"].map(meta["target_model"].astype(str)),
                         language=answers["dialogue_id"].map(meta["language"].astype(str)))
    return out[TABLE_COLUMNS].reset_index(drop=True)


def write_table(table: pd.DataFrame, path: str | Path) -> Path:
    """Write by suffix (csv, parquet, json = a list of rows, jsonl), atomically enough for one writer."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise AnnotationStoreError(f"{path}: unknown table format {suffix!r} (use {', '.join(TABLE_SUFFIXES)})")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        table.to_csv(path, index=False)
    elif suffix == ".parquet":
        table.to_parquet(path, index=False)
    elif suffix == ".json":
        path.write_text(table.to_json(orient="records", force_ascii=False, indent=1), encoding="utf-8")
    else:
        table.to_json(path, orient="records", lines=True, force_ascii=False)
    return path


# -- Label Studio export ------------------------------------------------------------------
def label_config(dimensions: list[str] | None = None) -> str:
    """The Label Studio labeling config matching the exported tasks (English rules as hints): the
    seven dimensions, or a study's (store.dimensions(study): the seven and safety)."""
    dims = tuple(dimensions or DIMENSION_NAMES)
    rub = annotation_rubric("en", dims)
    parts = ['<View>', f'  <Paragraphs name="{TO_NAME}" value="$dialogue" layout="dialogue"/>']
    for dim in dims:
        r = rub[dim]
        parts.append(f"  <Header value={quoteattr(r['title'])}/>")
        parts.append(f'  <Choices name="{dim}" toName="{TO_NAME}" choice="single-radio" showInline="true" required="true">')
        parts += [f"    <Choice value=\"{k}\" hint={quoteattr(r['levels'][k])}/>" for k in ("0", "1", "2", "3", "4")]
        parts.append("  </Choices>")
    parts += [f'  <TextArea name="{NOTE}" toName="{TO_NAME}" placeholder="note"/>', "</View>"]
    return "\n".join(parts) + "\n"


def _tasks(store: AnnotationStore, study: str, dialogues: pd.DataFrame) -> list[dict[str, Any]]:
    annotators = store.annotators(study)
    ids = list(dict.fromkeys(did for a in annotators for did, _ in store.queue(study, a)))
    rows = dialogues.drop_duplicates("dialogue_id").set_index("dialogue_id")
    missing = [d for d in ids if d not in rows.index]
    if missing:
        raise AnnotationStoreError(f"{len(missing)} dialogue(s) of study {study!r} are not in the run(s) given "
                                   f"(first: {missing[0]!r})")
    answers = store.answers(study)
    states = store.item_states(study).set_index(["annotator", "dialogue_id"])
    by_item = {k: g for k, g in answers.groupby(["dialogue_id", "annotator"])}
    user = {a: i + 1 for i, a in enumerate(annotators)}
    tasks, n = [], 0
    for t, did in enumerate(ids, start=1):
        row = rows.loc[did]
        anns = []
        for a in annotators:
            g = by_item.get((did, a))
            state = states.loc[(a, did)] if (a, did) in states.index else None
            if g is None and state is None:
                continue
            n += 1
            result = [] if g is None else [
                {"id": f"{r.dimension}-{n}", "from_name": r.dimension, "to_name": TO_NAME, "type": "choices",
                 "value": {"choices": [str(int(r.score))]}, "origin": "manual"} for r in g.itertuples()]
            note = "" if state is None else str(state["note"])
            if note:
                result.append({"id": f"{NOTE}-{n}", "from_name": NOTE, "to_name": TO_NAME, "type": "textarea",
                               "value": {"text": [note]}, "origin": "manual"})
            times = [] if g is None else list(g["answered_at"])
            seconds = None if g is None else g["seconds"].max()
            anns.append({"id": n, "completed_by": {"id": user[a], "email": a}, "result": result,
                         "was_cancelled": bool(state is not None and state["skipped"] and g is None),
                         "ground_truth": False, "created_at": min(times) if times else None,
                         "updated_at": max(times) if times else None,
                         "lead_time": None if seconds is None or pd.isna(seconds) else float(seconds), "task": t})
        tasks.append({"id": t, "data": {"dialogue": [{"author": SPEAKER_LABELS.get(x["speaker"], x["speaker"]),
                                                      "text": x["text"]} for x in row["turns"]],
                                        "dialogue_id": did, "language": str(row["language"])},
                      "annotations": anns, "predictions": []})
    return tasks


def labelstudio_export(store: AnnotationStore, study: str, dialogues: pd.DataFrame, minimal: bool = False) -> list[dict]:
    """The study as Label Studio JSON (minimal=False) or JSON_MIN (minimal=True). `dialogues`:
    load_dialogues of the runs (the turns)."""
    tasks = _tasks(store, study, dialogues)
    if not minimal:
        return tasks
    out = []
    for task in tasks:
        for ann in task["annotations"]:
            if ann["was_cancelled"]:
                continue
            rec = {"id": task["id"], **task["data"]}
            for r in ann["result"]:
                rec[r["from_name"]] = r["value"]["choices"][0] if r["type"] == "choices" else r["value"]["text"][0]
            rec.update(annotator=ann["completed_by"]["email"], annotation_id=ann["id"], created_at=ann["created_at"],
                       updated_at=ann["updated_at"], lead_time=ann["lead_time"])
            out.append(rec)
    return out


# -- Label Studio import ------------------------------------------------------------------
def _annotator(value: Any, where: str) -> str:
    if isinstance(value, dict):
        value = value.get("email") or (f"ls-user-{value['id']}" if value.get("id") is not None else None)
    elif isinstance(value, int) and not isinstance(value, bool):
        value = f"ls-user-{value}"
    if not isinstance(value, str) or not value.strip():
        raise AnnotationStoreError(f"{where}: no annotator (completed_by / annotator)")
    return value.strip()


def _region_score(region: dict[str, Any], where: str) -> int:
    value = region.get("value") or {}
    kind = region.get("type")
    if kind == "choices" and isinstance(value.get("choices"), list) and len(value["choices"]) == 1:
        return check_score(value["choices"][0])
    if kind == "number" and "number" in value:
        return check_score(value["number"])
    raise AnnotationStoreError(f"{where}: region {region.get('from_name')!r} of type {kind!r} is not one choice 0-4 "
                               "or a number (Rating's 1-based stars are not read)")


def read_labelstudio(path: str | Path) -> list[dict[str, Any]]:
    """Answer rows (annotator, dialogue_id, dimension, score, seconds, answered_at, where) from a
    Label Studio JSON or JSON_MIN export. Every problem is collected; any problem raises."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AnnotationStoreError(f"{path}: cannot read as JSON ({e})") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not all(isinstance(t, dict) for t in data):
        raise AnnotationStoreError(f"{path}: expected a list of Label Studio tasks")
    rows, errors = [], []

    def add(annotator: Any, did: Any, dim: Any, score: Any, seconds: Any, at: Any, where: str) -> None:
        try:
            rows.append({"annotator": _annotator(annotator, where), "dialogue_id": str(did),
                         "dimension": check_dimension(dim), "score": check_score(score),
                         "seconds": seconds if isinstance(seconds, (int, float)) else None,
                         "answered_at": at, "where": where})
        except AnnotationStoreError as e:
            errors.append(str(e) if str(e).startswith(where) else f"{where}: {e}")

    for i, task in enumerate(data):
        where = f"{path.name} task {task.get('id', i)}"
        full = "annotations" in task or "completions" in task
        did = (task.get("data") or {}).get("dialogue_id") if full else task.get("dialogue_id")
        if not did:
            errors.append(f"{where}: no dialogue_id (in data.dialogue_id)")
            continue
        if not full:  # JSON_MIN: one record per annotation, a field per control tag
            for dim in ALL_DIMENSION_NAMES:
                if dim in task and task[dim] not in (None, ""):
                    add(task.get("annotator"), did, dim, task[dim], task.get("lead_time"), task.get("updated_at"), where)
            continue
        for ann in task.get("annotations") or task.get("completions") or []:
            if ann.get("was_cancelled") or ann.get("skipped"):
                continue
            at = f"{where} annotation {ann.get('id')}"
            for region in ann.get("result") or []:
                name = region.get("from_name")
                if name == NOTE or region.get("type") == "textarea":
                    continue
                try:
                    dim = check_dimension(name)
                    score = _region_score(region, at)
                except AnnotationStoreError as e:
                    errors.append(str(e) if str(e).startswith(at) else f"{at}: {e}")
                    continue
                add(ann.get("completed_by"), did, dim, score, ann.get("lead_time"),
                    ann.get("updated_at") or ann.get("created_at"), at)
    if errors:
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        raise AnnotationStoreError(f"{len(errors)} problem(s), nothing imported: " + "; ".join(errors[:5]) + more)
    if not rows:
        raise AnnotationStoreError(f"{path}: no answer in the file")
    dup = pd.DataFrame(rows).duplicated(["annotator", "dialogue_id", "dimension"], keep=False)
    if dup.any():
        first = rows[int(dup.to_numpy().nonzero()[0][0])]
        raise AnnotationStoreError(f"{first['where']}: {first['annotator']} scored {first['dimension']} of "
                                   f"{first['dialogue_id']} more than once; nothing imported")
    return rows


def import_labelstudio(store: AnnotationStore, index: pd.DataFrame, path: str | Path, study: str,
                       runs: list[str] | None = None) -> dict[str, Any]:
    """Label Studio answers into a study. An existing study takes answers that fit its queues; a new
    one is made from the file (each annotator's queue = the dialogues they answered there), after
    checking every dialogue is an ok dialogue of the runs. All or nothing."""
    rows = read_labelstudio(path)
    source = f"labelstudio:{Path(path).name}"
    tokens: dict[str, str] = {}
    if study not in {s["study"] for s in store.studies()}:
        per = defaultdict(list)
        for r in rows:
            if r["dialogue_id"] not in per[r["annotator"]]:
                per[r["annotator"]].append(r["dialogue_id"])
        ids = list(dict.fromkeys(r["dialogue_id"] for r in rows))
        overlap = max(1, int(pd.DataFrame(rows).groupby("dialogue_id")["annotator"].nunique().max()))
        cfg = StudyConfig(name=study, annotators=sorted(per), overlap=overlap, dialogue_ids=ids,
                          safety=any(r["dimension"] == SAFETY for r in rows))
        chosen = select_dialogues(index, cfg)  # every dialogue must be an ok dialogue of the runs
        language = dict(zip(chosen["dialogue_id"], chosen["language"].astype(str)))
        config = {**cfg.model_dump(mode="json"), "runs": runs or [], "n_dialogues": len(ids), "source": source}
        tokens = store.create_study(study, config, {a: [(d, language[d]) for d in q] for a, q in per.items()},
                           annotation_rubric_version(tuple(cfg.dimensions)))
    n = store.import_answers(study, rows, source)
    return {"study": study, "created": bool(tokens), "answers": n, "annotators": sorted({r["annotator"] for r in rows}),
            "tokens": tokens}
