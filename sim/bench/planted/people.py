"""People's scores of planted dialogues, in the table `annotate export` writes (JSONL: annotator,
dialogue_id, dimension, score; analysis/trust/human_scores.py reads it): a share of the dialogues,
each scored on the seven dimensions by one of three annotators, a person's score being the dialogue's
planted quality plus its card's effect (the same draw the judges see) plus the person's own noise,
rounded and clipped to 0-4 (serve/backends/planted_math.py person_score). What people see and what a
judge sees are thus related as the planted judge's module doc says: the judge adds its own noise and
biases, and a calibrated judge states P(a person's score | what it saw)."""
from __future__ import annotations

import json
from pathlib import Path

from esc_eval.serve.backends import planted_math as pm
from esc_eval.serve.backends.planted import PlantedModel
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
from esc_eval.sim.runs.runfolder import RunFolder

ANNOTATORS = ("person-a", "person-b", "person-c")


def write_people_scores(run_dir: str | Path, out: Path, seed: int, share: float) -> Path:
    """The people's scores of `share` of the run's completed dialogues (chosen by a pure function of
    the seed and the dialogue id) into `out`."""
    ref = PlantedModel("judge")  # card_sd and people_sd as the judges have them by default
    rows = []
    for d in RunFolder(str(run_dir), create=False).iter_rows("dialogues", columns=["dialogue_id", "turns", "status"]):
        if d["status"] != "ok" or pm.uniform("people", seed, d["dialogue_id"]) >= share:
            continue
        view = pm.dialogue_view(pm.read_tags(" ".join(t["text"] for t in d["turns"])))
        latent = view["q"] + pm.card_effect(view["card"], seed, ref.card_sd)
        who = ANNOTATORS[pm.digest("annotator", d["dialogue_id"]) % len(ANNOTATORS)]
        rows += [{"annotator": who, "dialogue_id": d["dialogue_id"], "dimension": dim,
                  "score": pm.person_score(latent, seed, d["dialogue_id"], dim, people_sd=ref.people_sd)}
                 for dim in DIMENSION_NAMES]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return out
