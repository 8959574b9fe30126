"""The sections of the run report, in the paper's order: a summary, the leaderboard (Table 2) with
its figures, scores by card category and by seed, score distributions, pairwise comparisons, run
health, throughput, role-play fidelity, the cards and sample dialogues. Each returns a section of
analysis/results/blocks.py's blocks, registered with its place (analysis/results/section_registry.py);
report.py builds what is registered, in order, and renders it (Markdown, HTML, JSON)."""
from __future__ import annotations

import base64
from collections import Counter
from pathlib import Path

import pandas as pd

from esc_eval.analysis.compare.paired import pairwise_comparisons
from esc_eval.analysis.results.leaderboard import VALUE_COLUMNS, build_leaderboard_by, format_cell, seed_spread, spoiled_cell
from esc_eval.analysis.judgments.rubric_mode import RUBRIC_MODE_NOTES, rubric_mode_of
from esc_eval.analysis.figures.plots import (NothingToPlot, card_categories, dimension_bars, radar_plot, score_distributions,
                                     throughput_plot)
from esc_eval.analysis.results.blocks import notice, pct, section, table, text
from esc_eval.analysis.judgments.expected_scores import score_kind_note
from esc_eval.analysis.results.section_registry import ReportContext, register_section
from esc_eval.analysis.seekers.roleplay import character_breaks, fidelity_summary
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSION_TITLES

PAPER_GROUPS = ("close", "open", "domain")


def figure_block(fn, path: Path, caption: str, *args) -> tuple[dict | None, dict | None]:
    """(figure block, None) or (None, notice) when there is nothing to draw."""
    try:
        p = fn(*args, path)
    except NothingToPlot as e:
        return None, notice(f"{caption}: not drawn ({e}).", "info")
    return {"kind": "figure", "caption": caption, "path": p,
            "data": base64.b64encode(p.read_bytes()).decode("ascii")}, None


def summary_section(paths: list[Path], manifests: dict, dialogues: pd.DataFrame, scores: pd.DataFrame) -> dict:
    s = section("summary", "Runs")
    rows = []
    for p in paths:
        d = dialogues[dialogues["run_dir"] == str(p)] if not dialogues.empty else dialogues
        sc = scores[scores["run_dir"] == str(p)] if not scores.empty else scores
        judges = ", ".join(sorted(sc["judge"].dropna().unique())) if not sc.empty else ""
        n_ok = int((d["status"] == "ok").sum()) if not d.empty else 0
        rows.append([str(p), manifests.get(str(p), {}).get("run_id", "n/a"), len(d), n_ok, len(d) - n_ok, len(sc),
                     judges or "none"])
        if d.empty:
            s["notices"].append(notice(f"{p}: no dialogue rows.", "error"))
        if sc.empty:
            s["notices"].append(notice(f"{p}: no scores yet — score it (esc-eval score -i {p}) to fill the leaderboard.",
                                        "error"))
    s["blocks"].append(table(["Run folder", "Run id", "Dialogues", "ok", "failed", "Score rows", "Judges"], rows,
                              {0, 1, 6}, id="runs"))
    for judge, g in (scores.groupby("judge") if not scores.empty else []):
        mode = rubric_mode_of(g)
        if mode != "per_dimension":  # the paper's protocol says nothing; another one says so
            s["notices"].append(notice(f"Judge {judge}: {RUBRIC_MODE_NOTES[mode]}; its rows are that judge's, beside "
                                       "the per-dimension judge's, never averaged with them.", "info"))
    return s


def leaderboard_section(lb: pd.DataFrame, scores: pd.DataFrame, fig_dir: Path) -> dict:
    s = section("leaderboard", "Leaderboard (Table 2 layout)")
    if scores.empty:
        s["notices"].append(notice("No scores in any run folder: the leaderboard is empty.", "error"))
        return s
    judges = sorted(scores["judge"].dropna().unique())
    if len(judges) > 1:
        s["notices"].append(notice(
            f"Scores come from {len(judges)} judges ({', '.join(judges)}): each model has one row per judge; "
            "rows of different judges are not comparable.", "warning"))
    for _, r in lb.iterrows():
        if r["notes"]:
            for note in r["notes"].split("; "):
                if "several judges" in note:
                    continue  # said once above
                s["notices"].append(notice(f"{r['model']} ({r['language']}, judge {r['judge']}): {note}."))
        if r["parse_failure_rate"] > 0:
            s["notices"].append(notice(
                f"{r['model']} ({r['language']}): {pct(r['parse_failure_rate'])} of the judge's answers did not parse "
                "(left out of the means, not counted as 0).", "info"))
    headers = ["Language", "Group", "Model", "Judge", "n", "Spoiled"] + VALUE_COLUMNS + ["Parse failures"]
    rows = [[r["language"], r["group"], r["model"], r["judge"], r["n_dialogues"], spoiled_cell(r)]
            + [format_cell(r[c], r[f"{c}_lo"], r[f"{c}_hi"]) for c in VALUE_COLUMNS] + [pct(r["parse_failure_rate"])]
            for _, r in lb.iterrows()]
    s["blocks"].append(table(headers, rows, {0, 1, 2, 3}, id="leaderboard"))
    for fn, name, caption in ((radar_plot, "radar.png", "Radar of the seven dimensions per model"),
                              (dimension_bars, "bars.png", "Scores per dimension with bootstrap 95% CI")):
        fig, note = figure_block(fn, fig_dir / name, caption, lb)
        s["blocks" if fig else "notices"].append(fig or note)
    return s


def by_category_section(scores: pd.DataFrame, dialogues: pd.DataFrame, groups: dict[str, str],
                         n_boot: int, seed: int) -> dict:
    """Table 2 per top category (Table 9's three) within each language, with CIs and counts."""
    s = section("by-category", "Leaderboard by top category")
    if scores.empty or "category_1" not in dialogues.columns or dialogues["category_1"].isna().all():
        s["notices"].append(notice("No card categories in the dialogue rows: no per-category table.", "info"))
        return s
    df = build_leaderboard_by(scores, dialogues, "category", groups=groups, n_boot=n_boot, seed=seed)
    headers = ["Category", "Language", "Model", "Judge", "n"] + VALUE_COLUMNS
    rows = [[r["category"], r["language"], r["model"], r["judge"], r["n_dialogues"]]
            + [format_cell(r[c], r[f"{c}_lo"], r[f"{c}_hi"]) for c in VALUE_COLUMNS] for _, r in df.iterrows()]
    s["blocks"].append(table(headers, rows, {0, 1, 2, 3}, id="by-category"))
    return s


def seed_section(scores: pd.DataFrame, dialogues: pd.DataFrame, manifests: dict) -> dict:
    """The generation profile of each run, and the across-seed spread when a model has several seeds."""
    s = section("seeds", "Generation profile and seeds")
    profiles = sorted({str((m.get("simulation") or {}).get("profile") or "not recorded") for m in manifests.values()})
    s["blocks"].append(text(f"Generation profile: {', '.join(profiles)} (greedy = temperature 0 everywhere; "
                             "release = the released code's settings)."))
    spread = seed_spread(scores, dialogues)
    if spread.empty:
        s["blocks"].append(text("One seed per model: no across-seed spread."))
        return s
    headers = ["Language", "Model", "Judge", "Seeds", "Mean of seed Averages", "SD", "Min", "Max", "Per seed"]
    rows = [[r["language"], r["model"], r["judge"], r["n_seeds"], f"{r['seed_mean']:.2f}", f"{r['seed_sd']:.2f}",
             f"{r['seed_min']:.2f}", f"{r['seed_max']:.2f}", r["per_seed"]] for _, r in spread.iterrows()]
    s["blocks"].append(table(headers, rows, {0, 1, 2, 8}, id="seeds"))
    return s


def distribution_section(scores: pd.DataFrame, fig_dir: Path) -> dict:
    s = section("distributions", "Score distributions")
    fig, note = figure_block(score_distributions, fig_dir / "distributions.png",
                        "Share of each score (0-4, n/a = unparsed) per dimension and model", scores)
    s["blocks" if fig else "notices"].append(fig or note)
    return s


def comparison_section(scores: pd.DataFrame, n_resamples: int, seed: int) -> dict:
    s = section("comparisons", "Paired model comparisons")
    if scores.empty:
        s["notices"].append(notice("No scores: nothing to compare.", "info"))
        return s
    if "card_id" not in scores.columns or scores["card_id"].isna().all():
        s["notices"].append(notice("Scores have no card ids (no dialogue rows): dialogues cannot be paired.", "info"))
        return s
    rows = []
    for judge, g in scores.groupby("judge"):
        if g.groupby("language")["target_model"].nunique().max() < 2:
            continue
        t = pairwise_comparisons(g, "average", n_resamples=n_resamples, seed=seed)
        for _, r in t.iterrows():
            rows.append([r["language"], judge, r["model_a"], r["model_b"], r["n_pairs"], r["mean_a"], r["mean_b"],
                         format_cell(r["diff"], r["ci_lo"], r["ci_hi"]), r["p_value"], r["p_holm"], r["note"]])
    if not rows:
        s["notices"].append(notice("Fewer than two models per language and judge: no paired comparison.", "info"))
        return s
    s["blocks"].append(text("Average of the seven dimensions (x25) on role cards both models talked to; difference "
                             "A - B with bootstrap 95% CI; p from a paired sign-flip permutation test, Holm-adjusted "
                             "over the table."))
    s["blocks"].append(table(["Language", "Judge", "Model A", "Model B", "Shared cards", "A", "B", "A - B [95% CI]",
                               "p", "p (Holm)", "Note"], rows, {0, 1, 2, 3, 10}, id="comparisons"))
    return s


def health_section(dialogues: pd.DataFrame, scores: pd.DataFrame) -> dict:
    s = section("health", "Failures and parse failures")
    if dialogues.empty:
        s["notices"].append(notice("No dialogue rows.", "error"))
        return s
    rows = []
    scored_ids = set(scores.loc[scores["score"].notna(), "dialogue_id"]) if not scores.empty else set()
    for (model, lang), g in dialogues.groupby(["target_model", "language"], dropna=False):
        ok = g[g["status"] == "ok"]
        failed = g[g["status"] != "ok"]
        reasons = Counter(failed["termination_reason"].fillna("unknown"))
        sc = scores[(scores["target_model"] == model) & (scores["language"] == lang)] if not scores.empty else scores
        rows.append([model, lang, len(g), len(ok), len(failed), pct(len(failed) / len(g)),
                     ", ".join(f"{k} ({v})" for k, v in reasons.most_common(3)) or "-",
                     pct(sc["score"].isna().mean()) if not sc.empty else "n/a",
                     int((~ok["dialogue_id"].isin(scored_ids)).sum())])
        if len(failed):
            err = failed["error"].dropna()
            example = f" First error: {str(err.iloc[0])[:200]}" if len(err) else ""
            s["notices"].append(notice(f"{model} ({lang}): {len(failed)} of {len(g)} dialogues failed.{example}"))
    s["blocks"].append(table(["Model", "Language", "Dialogues", "ok", "failed", "Failure rate", "Termination reasons",
                               "Parse failures", "ok but unscored"], rows, {0, 1, 6}, id="health"))
    return s


def throughput_section(paths: list[Path], manifests: dict, dialogues: pd.DataFrame, fig_dir: Path) -> dict:
    s = section("throughput", "Tokens and throughput")
    rows = []
    for p in paths:
        d = dialogues[dialogues["run_dir"] == str(p)] if not dialogues.empty else dialogues
        if d.empty:
            continue
        ok = d[d["status"] == "ok"]
        start, end = d["started_at"].min(), d["finished_at"].max()
        span = (end - start).total_seconds() if pd.notna(start) and pd.notna(end) else float("nan")
        ctoks = float(d["completion_tokens"].fillna(0).sum())
        rows.append([str(p), len(ok), int(d["prompt_tokens"].fillna(0).sum()), int(ctoks),
                     span, len(ok) / span * 3600 if span and span > 0 else float("nan"),
                     ctoks / span if span and span > 0 else float("nan")])
    if rows:
        s["blocks"].append(table(["Run folder", "ok dialogues", "Prompt tokens", "Completion tokens", "Span (s)",
                                   "Dialogues / hour", "Completion tokens / s"], rows, {0},
                                  caption="From dialogue rows (first start to last finish)", id="tokens"))
    mrows = []
    events = []
    for p in paths:
        m = manifests.get(str(p), {})
        events += [e for e in m.get("events", []) if isinstance(e, dict)]
        for stage in ("simulation", "scoring"):
            last = (m.get(stage) or {}).get("last") if isinstance(m.get(stage), dict) else None
            if isinstance(last, dict):
                mrows.append([str(p), stage, last.get("items"), last.get("failed"), last.get("tokens"),
                              last.get("elapsed_s", last.get("wall_s")), last.get("items_per_s"),
                              last.get("tokens_per_s")])
    if mrows:
        s["blocks"].append(table(["Run folder", "Stage", "Items", "Failed", "Tokens", "Elapsed (s)", "Items / s",
                                   "Tokens / s"], mrows, {0, 1}, caption="From manifest.json (last invocation)",
                                  id="manifest-throughput"))
    else:
        s["notices"].append(notice("No simulation/scoring timings in the manifests.", "info"))
    from esc_eval.analysis.results.usage import USAGE_HEADERS, usage_table_rows

    urows = usage_table_rows({str(p): manifests.get(str(p), {}) for p in paths})
    if urows:
        s["blocks"].append(table(USAGE_HEADERS, urows, {0, 1, 2}, id="usage",
                                  caption="Usage and cost per model and stage (manifest `usage`; engine-seconds per model, shared by its stages in a job)"))
    fig, note = figure_block(throughput_plot, fig_dir / "throughput.png", "Completed dialogues over time", dialogues, events)
    s["blocks" if fig else "notices"].append(fig or note)
    return s


def fidelity_section(dialogues: pd.DataFrame) -> dict:
    s = section("roleplay", "Role-play fidelity (automatic checks)")
    ok = dialogues[dialogues["status"] == "ok"] if not dialogues.empty else dialogues
    if ok.empty:
        s["notices"].append(notice("No completed dialogues.", "info"))
        return s
    f = fidelity_summary(ok)
    s["blocks"].append(text("Character break: a seeker turn that reveals an AI or talks like the assistant. "
                             "Negativity: a small bilingual affect lexicon per seeker turn, -1..1; slope per round "
                             "(negative = the seeker cheers up) and the share of dialogues starting negative that are "
                             "no longer negative by round 3. Heuristics, not judgments."))
    s["blocks"].append(table(["Role model", "Language", "Dialogues", "Seeker turns", "Break rate", "Breaks / turn",
                               "Negativity slope", "Start negative", "Negativity gone by round 3", "Note"],
                              [[r["role_model"], r["language"], r["n_dialogues"], r["seeker_turns"], pct(r["break_rate"]),
                                r["breaks_per_turn"], r["mean_slope"], r["n_negative_start"],
                                pct(r["negativity_gone_share"]), r["note"]] for _, r in f.iterrows()],
                              {0, 1, 9}, id="fidelity"))
    br = character_breaks(ok)
    if not br.empty:
        s["blocks"].append(table(["Dialogue", "Role model", "Round", "Excerpt"],
                                  [[r["dialogue_id"], r["role_model"], r["round"], r["excerpt"]]
                                   for _, r in br.head(10).iterrows()], {0, 1, 3}, caption="Character breaks (first 10)"))
    return s


def cards_section(dialogues: pd.DataFrame, fig_dir: Path) -> dict:
    s = section("cards", "Role cards")
    fig, note = figure_block(card_categories, fig_dir / "card_categories.png", "Role cards by category (Figure 5 style)",
                        dialogues)
    s["blocks" if fig else "notices"].append(fig or note)
    if not dialogues.empty and "category_1" in dialogues.columns and dialogues["category_1"].notna().any():
        cards = dialogues.drop_duplicates(["language", "card_id"])
        c = cards.groupby(cards["category_1"].fillna("unknown")).size()
        s["blocks"].append(table(["Category", "Cards"], [[k, int(v)] for k, v in c.sort_values(ascending=False).items()],
                                  id="card-categories"))
    return s


def samples_section(dialogues: pd.DataFrame, scores: pd.DataFrame, n: int) -> dict:
    s = section("samples", "Sample dialogues")
    ok = dialogues[dialogues["status"] == "ok"] if not dialogues.empty else dialogues
    if ok.empty:
        s["notices"].append(notice("No completed dialogue to show.", "info"))
        return s
    # One per model first, so every model appears before any model appears twice.
    ordered = ok.sort_values("dialogue_id").assign(_k=lambda d: d.groupby("target_model").cumcount())
    picks = ordered.sort_values(["_k", "target_model"]).head(n)
    for _, d in picks.iterrows():
        sc = scores[scores["dialogue_id"] == d["dialogue_id"]] if not scores.empty else scores
        per_judge = []
        for judge, g in sc.groupby("judge"):
            by_dim = dict(zip(g["dimension"], g["score"]))
            per_judge.append(f"{judge}: " + ", ".join(
                f"{DIMENSION_TITLES[x]} {'n/a' if pd.isna(by_dim[x]) else int(by_dim[x])}"
                for x in DIMENSION_NAMES if x in by_dim))
        score_text = "; ".join(per_judge)
        s["blocks"].append({
            "kind": "dialogue",
            "header": f"{d['dialogue_id']} — model {d['target_model']}, role {d.get('role_model')}, "
                      f"{d.get('language')}, card {d.get('card_id')} ({d.get('category_1')} / {d.get('category_2')})",
            "turns": [{"speaker": t["speaker"], "label": "Seeker" if t["speaker"] == "seeker" else "AI assistant",
                       "text": t["text"]} for t in d["turns"]],
            "scores": score_text or "not scored",
        })
    return s


def _leaderboard(ctx: ReportContext) -> dict:
    s = leaderboard_section(ctx.leaderboard, ctx.board, ctx.fig_dir)
    # beside Table 2: what the scores are, then that no person checked the judge
    if ctx.score_kind == "expected":
        s["notices"].insert(0, notice(score_kind_note(ctx.board), "info"))
    if ctx.judge_line:
        s["notices"].insert(0, notice(ctx.judge_line, "warning"))
    if ctx.windowed_line:  # the judgments made on a window of a long dialogue (analysis/judgments/windowed.py)
        windowed = (ctx.scores.attrs.get("windowed") or {}).get("windowed", 0)
        s["notices"].append(notice(ctx.windowed_line, "warning" if windowed else "info"))
    return s


# The paper's sections (section_registry.py: the orders of every registered section).
register_section("summary", 100, lambda c: summary_section(c.paths, c.manifests, c.dialogues, c.all_scores))
register_section("leaderboard", 200, _leaderboard)
register_section("by-category", 300, lambda c: by_category_section(c.board, c.dialogues, c.groups, c.n_boot, c.seed))
register_section("seeds", 400, lambda c: seed_section(c.board, c.dialogues, c.manifests))
register_section("distributions", 500, lambda c: distribution_section(c.scores, c.fig_dir))
register_section("comparisons", 600, lambda c: comparison_section(c.board, c.n_resamples, c.seed))
register_section("health", 1100, lambda c: health_section(c.dialogues, c.scores))
register_section("throughput", 1200, lambda c: throughput_section(c.paths, c.manifests, c.dialogues, c.fig_dir))
register_section("roleplay", 1300, lambda c: fidelity_section(c.dialogues))
register_section("cards", 1400, lambda c: cards_section(c.dialogues, c.fig_dir))
register_section("samples", 1500, lambda c: samples_section(c.dialogues, c.scores, c.n_samples))
