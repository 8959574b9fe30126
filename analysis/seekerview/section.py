"""The person's own view in the report (section 'seeker_view', registered) and as files: each rater's
means per target with intervals, and who agrees with the reference (the people who were helped, or in a
simulation the simulated seeker); and `seeker_check_of_people`, the command that checks a judge against
ESConv's seekers (`esc-eval analysis seeker-check`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from esc_eval.analysis.results.blocks import Section, notice, section, table, text
from esc_eval.analysis.results.loaders import AnalysisInputError, load_scores
from esc_eval.analysis.results.section_registry import register_section
from esc_eval.analysis.seekerview.ratings import (LABELS, PEOPLE, QUESTIONS, agreement_rows, load_seeker_ratings,
                                                  rating_summary, reference_rater)
from esc_eval.sim.runs.open import OutputFolder

SECTION_ID, TITLE = "seeker_view", "The person's own view"
READING = ("The questions ESConv's seekers answered about their own conversation (empathy and relevance of the supporter, "
           "their emotion intensity before and after; 1-5): answered by the simulated seeker at the end of its dialogue "
           "(rater '<role model>:seeker'), by a judge reading a dialogue in the seeker's place ('<model>:as-seeker'), or "
           "by the people themselves ('people'). Means with bootstrap 95% intervals over dialogues; 'unusable': answers "
           "that did not parse or calls that failed, left out. Agreement: Spearman's rho with the reference's answers, "
           "paired by dialogue, with a bootstrap interval simultaneous over a rater's rows (Bonferroni on 95%); "
           "'agrees' when it lies wholly above 0. A small model's answers (the embedded SmolLM2) carry next to no information, so its rho "
           "sits near 0: the figures mean something with a real judge (docs/guides/seekers-own-view.md).")
SUMMARY_HEADERS = ["Rater", "Target", "Strategy", "Language", "n", *[LABELS[q] for q in QUESTIONS], "Unusable"]
AGREEMENT_HEADERS = ["Rater", "Kind", "Its measure", "Against the reference's", "n", "Spearman [simultaneous 95%]",
                     "Verdict"]


def _num(v, digits: int = 2) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{digits}f}"


def _ci(v, lo, hi) -> str:
    return _num(v) if lo is None or not np.isfinite(lo) else f"{_num(v)} [{_num(lo)}, {_num(hi)}]"


def summary_rows(summary: pd.DataFrame) -> list[list[str]]:
    rows = []
    for key, g in summary.groupby(["rater", "target_model", "role_model", "strategy", "language"], sort=True):
        g = g.set_index("question")
        rows.append([key[0], key[1], key[3], key[4], int(g["n"].max())]
                    + [_ci(g.loc[q, "mean"], g.loc[q, "lo"], g.loc[q, "hi"]) for q in QUESTIONS]
                    + [int(g.loc[list(QUESTIONS[:4]), "unusable"].sum())])
    return rows


def agreement_table_rows(agreement: pd.DataFrame) -> list[list[str]]:
    return [[r["rater"], r["kind"], r["measure"], LABELS[r["question"]], r["n"], _ci(r["spearman"], r["lo"], r["hi"]),
             r["note"] or r["verdict"]] for _, r in agreement.iterrows()]


def seeker_view(run_dirs, n_boot: int = 1000, seed: int = 0) -> dict:
    """{'reference', 'summary', 'agreement'} of the folders' seeker ratings (and their seven-dimension scores)."""
    ratings = load_seeker_ratings(run_dirs)
    if ratings.empty:
        raise AnalysisInputError(f"{', '.join(map(str, run_dirs))}: no seeker ratings (simulate with --seeker-ratings, "
                                 "or `esc-eval analysis seeker-check`)")
    scores = load_scores(run_dirs)
    return {"reference": reference_rater(ratings), "summary": rating_summary(ratings, n_boot, seed),
            "agreement": agreement_rows(ratings, scores, n_boot, seed)}


def _md_table(headers: list[str], rows: list[list]) -> str:
    esc = lambda c: str(c).replace("|", "/").replace("\n", " ")  # noqa: E731
    return "\n".join(["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
                     + ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows])


def _reference_line(view: dict) -> str:
    ref = view["reference"]
    if ref == PEOPLE:
        return "Reference: the people who were helped (their own answers, ESConv's survey)."
    return f"Reference: the simulated seeker ({ref})." if ref else "No reference rater."


def seeker_view_markdown(view: dict) -> str:
    parts = [READING, "", _reference_line(view), "", _md_table(SUMMARY_HEADERS, summary_rows(view["summary"])), ""]
    if not view["agreement"].empty:
        parts += ["### Agreement with the reference", "",
                  _md_table(AGREEMENT_HEADERS, agreement_table_rows(view["agreement"])), ""]
    return "\n".join(parts)


def _data(view: dict) -> dict:
    return {"reference": view["reference"], "summary": json.loads(view["summary"].to_json(orient="records")),
            "agreement": json.loads(view["agreement"].to_json(orient="records"))}


def seeker_view_section(run_dirs, n_boot: int = 1000, seed: int = 0) -> Section:
    s = section(SECTION_ID, TITLE)
    try:
        view = seeker_view(run_dirs, n_boot, seed)
    except AnalysisInputError as e:
        s["notices"].append(notice(f"No seeker ratings to show: {e}.", "info"))
        return s
    s["blocks"].append(text(f"{READING} {_reference_line(view)}"))
    s["blocks"].append(table(SUMMARY_HEADERS, summary_rows(view["summary"]), {0, 1, 2, 3}, id=SECTION_ID))
    if not view["agreement"].empty:
        s["blocks"].append(table(AGREEMENT_HEADERS, agreement_table_rows(view["agreement"]), {0, 1, 2, 3, 6},
                                 caption="Agreement with the reference"))
    s["data"] = _data(view)
    return s


def _has_ratings(paths) -> bool:
    from esc_eval.analysis.results.loaders import is_official_json

    try:
        return any(not is_official_json(p) and bool(load_seeker_ratings([p]).shape[0]) for p in paths)
    except AnalysisInputError:
        return False


# beyond the paper, after the seekers' fidelity: where a run holds the seeker's own ratings
register_section(SECTION_ID, 1370, lambda c: seeker_view_section(c.paths, c.n_boot, c.seed),
                 when=lambda c: _has_ratings(c.paths))


def write_seeker_view(view: dict, out: str | Path, title: str = "The person's own view") -> dict[str, str]:
    """seeker_view.md and seeker_view.json in a folder or a storage URI."""
    with OutputFolder(out) as folder:
        files = {"markdown": folder / "seeker_view.md", "json": folder / "seeker_view.json"}
        files["markdown"].write_text(f"# {title}\n\n" + seeker_view_markdown(view), encoding="utf-8")
        files["json"].write_text(json.dumps(_data(view), indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        return {k: str(v) for k, v in folder.finals(files).items()}


def seeker_check_of_people(humans: str, out: str, *, limit: int | None = None, n_boot: int = 1000, seed: int = 0,
                           run: Callable[[list[dict], str], dict]) -> tuple[str, dict]:
    """`esc-eval analysis seeker-check`: the dialogues of an ESConv-format file whose seekers rated them
    (empathy and relevance present), at most `limit` in the file's order, handed to `run` (the models'
    side: sim/launch/seeker_check.py, which writes the run folder `out`), then the agreement of its judge
    with the people, written to <out>/report. Bad input (the file, --limit) is refused before `run`."""
    from esc_eval.analysis.seekers.esconv import read_human_seekers
    from esc_eval.sim.runs.storage import join_location

    if limit is not None and limit < 1:
        raise AnalysisInputError(f"--limit {limit}: give at least 1 dialogue")
    people = read_human_seekers(humans)
    d = people.dialogues
    rated = d[d["empathy"].notna() & d["relevance"].notna()]
    if rated.empty:
        raise AnalysisInputError(f"{humans}: no dialogue carries its seeker's own ratings (survey_score.seeker empathy "
                                 "and relevance)")
    rated = rated.head(limit) if limit else rated
    items = [{"dialogue_id": r["dialogue_id"], "language": r["language"], "turns": r["turns"],
              "ratings": {"empathy": r["empathy"], "relevance": r["relevance"], "intensity_before": r["initial_intensity"],
                          "intensity_after": r["final_intensity"]}} for _, r in rated.iterrows()]
    job = run(items, out)
    view = seeker_view([out], n_boot, seed)
    paths = write_seeker_view(view, join_location(out, "report"), "Does the judge agree with the people who were helped?")
    return seeker_view_markdown(view), {**paths, "run_dir": str(out), "people": len(items), "job": job}
