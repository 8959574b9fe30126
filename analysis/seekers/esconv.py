"""Real help-seekers' dialogues in ESConv's format, read into the dialogue rows' layout so that the
fidelity features (fidelity_features.py) read people and the simulator the same way.

ESConv (Liu et al., 2021) is a JSON list of dialogues: `dialog` turns with `speaker` (seeker /
supporter in ESConv.json; speaker / listener in FailedESConv.json; usr / sys in the HF splits)
and `content`, and `survey_score.seeker` with the seeker's own emotion intensity before and
after the conversation (1-5). The record reader is the card builder's (sim/cardbuild/sources/readers.py
`read_esconv`), so both read one format by one rule; the survey scores are taken from the same
record here (the card builder has no use for them).

Rows: dialogue_id (the card builder's item id, a hash of the record), run_id "humans",
role_model/strategy "people", target_model "people (supporter)", language (detected from the
seeker's words: the file may hold any language), turns [{speaker: seeker | assistant, text}]
(consecutive messages stay separate turns, as in the file), status "ok", initial_intensity and
final_intensity (float 1-5, NaN when the survey lacks them), empathy and relevance (the seeker's own
ratings of the supporter, 1-5, NaN when absent: 142 of FailedESConv's 196 have them), emotion_type,
problem_type.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.textmetrics.metrics import detect_language
from esc_eval.sim.cardbuild.sources.readers import SourceFormatError, detect_dataset, load_records, read_esconv

PEOPLE = "people"
HUMAN_COLUMNS = ["dialogue_id", "run_id", "card_id", "language", "role_model", "strategy", "target_model", "turns",
                 "status", "initial_intensity", "final_intensity", "empathy", "relevance", "emotion_type", "problem_type"]


@dataclass
class HumanSeekers:
    """The human dialogues of one ESConv-format file: `dialogues` (HUMAN_COLUMNS), the file, and
    the records left out with the first reasons."""

    dialogues: pd.DataFrame
    source: str
    n_records: int
    rejected: list[str] = field(default_factory=list)

    @property
    def n_rejected(self) -> int:
        return len(self.rejected)

    def describe(self) -> str:
        langs = ", ".join(f"{n} {lang}" for lang, n in self.dialogues["language"].value_counts().items())
        left = f"; {self.n_rejected} record(s) left out (first: {self.rejected[0]})" if self.rejected else ""
        return f"{len(self.dialogues)} human dialogues ({langs}) from {Path(self.source).name}{left}"


def _intensity(survey, key: str) -> float:
    """One of the seeker's survey answers, 1-5 (an intensity, empathy or relevance); NaN when absent or out of range."""
    try:
        value = float((survey or {}).get("seeker", {}).get(key))
    except (TypeError, ValueError, AttributeError):
        return float("nan")
    return value if math.isfinite(value) and 1 <= value <= 5 else float("nan")


def read_human_seekers(path: str | Path) -> HumanSeekers:
    """The dialogues of an ESConv-format file (see the module docstring). One line, AnalysisInputError,
    for a file that is missing, not JSON, not ESConv's layout, or holds no dialogue with a seeker turn."""
    p = Path(path)
    if not p.is_file():
        raise AnalysisInputError(f"{p}: no such file (expected an ESConv-format JSON file of human dialogues)")
    if p.suffix.lower() not in (".json", ".jsonl"):
        raise AnalysisInputError(f"{p}: expected an ESConv-format .json file (a list of dialogues), got {p.suffix or 'no suffix'}")
    try:
        records, bad = load_records(p)
    except SourceFormatError as e:
        raise AnalysisInputError(f"{p}: {e}") from None
    if not records:
        raise AnalysisInputError(f"{p}: no dialogues in the file")
    if detect_dataset(records[0]) != "esconv":
        seen = sorted(records[0]) if isinstance(records[0], dict) else type(records[0]).__name__
        raise AnalysisInputError(f"{p}: not ESConv's format (the first record has {seen}; expected a 'dialog' "
                                 "list of turns with 'speaker' and 'content')")
    rows, rejected = [], [f"{r.locator}: {r.reason}" for r in bad]
    for i, record in enumerate(records):
        try:
            item = read_esconv(record, p, i)
        except (ValueError, AttributeError, TypeError) as e:  # the reader's reason for one record
            rejected.append(f"record {i}: {e}")
            continue
        turns = [{"speaker": "seeker" if t.speaker == "seeker" else "assistant", "text": t.text} for t in item.turns]
        seeker_text = " ".join(t["text"] for t in turns if t["speaker"] == "seeker")
        survey = record.get("survey_score")
        rows.append({"dialogue_id": item.id, "run_id": "humans", "card_id": item.id,
                     "language": detect_language(seeker_text), "role_model": PEOPLE, "strategy": PEOPLE,
                     "target_model": f"{PEOPLE} (supporter)", "turns": turns, "status": "ok",
                     "initial_intensity": _intensity(survey, "initial_emotion_intensity"),
                     "final_intensity": _intensity(survey, "final_emotion_intensity"),
                     "empathy": _intensity(survey, "empathy"), "relevance": _intensity(survey, "relevance"),
                     "emotion_type": record.get("emotion_type"), "problem_type": record.get("problem_type")})
    if not rows:
        first = f" (first: {rejected[0]})" if rejected else ""
        raise AnalysisInputError(f"{p}: no dialogue with a seeker turn{first}")
    df = pd.DataFrame(rows, columns=HUMAN_COLUMNS).drop_duplicates("dialogue_id").reset_index(drop=True)
    return HumanSeekers(df, str(p), len(records), rejected)


def sample_file() -> Path:
    """The shipped human sample (data/seekers_sample.json): this project's own writing in ESConv's
    format, not ESConv (data/README.md), for the demo's fidelity card."""
    from importlib import resources

    return Path(str(resources.files("esc_eval.analysis.seekers").joinpath("data", "seekers_sample.json")))
