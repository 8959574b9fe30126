"""The viewer's pairwise verdicts of one dialogue (the run folder's `pairwise` rows, sim/pairwise/job.py):
each verdict a judge gave between it and another target's dialogue on its card, in this dialogue's
terms: `this` (it was preferred), `other` or `tie`, null where the judge gave no usable answer."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from esc_eval.sim.judging.dimensions import ALL_DIMENSION_NAMES
from esc_eval.sim.runs.runfolder import RunFolder

PAIRWISE_COLUMNS = ["dialogue_a", "dialogue_b", "model_a", "model_b", "dimension", "order", "verdict", "preferred",
                    "judge", "parse_status", "raw"]


def read_pairwise(folder: RunFolder) -> pa.Table:
    """A run folder's verdict rows (the latest per key), the viewer's columns; none: an empty table."""
    if folder.parts("pairwise"):
        return folder.read("pairwise", columns=PAIRWISE_COLUMNS)
    return pa.table({c: pa.array([], pa.string()) for c in PAIRWISE_COLUMNS})


def verdicts_of(table: pa.Table, dialogue_id: str) -> list[dict[str, Any]]:
    """The verdicts `dialogue_id` is in, by judge, other model and dimension, both orders together."""
    mask = pc.or_(pc.equal(table.column("dialogue_a"), dialogue_id), pc.equal(table.column("dialogue_b"), dialogue_id))
    order = {d: i for i, d in enumerate(ALL_DIMENSION_NAMES)}
    out = []
    for r in table.filter(mask).to_pylist():
        mine = "a" if r["dialogue_a"] == dialogue_id else "b"
        result = None if r["preferred"] is None else (
            "tie" if r["preferred"] == "tie" else "this" if r["preferred"] == mine else "other")
        out.append({"dimension": r["dimension"], "judge": r["judge"],
                    "other_model": r["model_b"] if mine == "a" else r["model_a"],
                    "other_dialogue": r["dialogue_b"] if mine == "a" else r["dialogue_a"],
                    "shown_first": r["order"] == ("ab" if mine == "a" else "ba"),
                    "verdict": r["verdict"], "result": result, "parse_status": r["parse_status"], "raw": r["raw"]})
    return sorted(out, key=lambda r: (str(r["judge"]), str(r["other_model"]), order.get(r["dimension"], 99),
                                      not r["shown_first"]))
