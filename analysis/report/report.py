"""The run report: one self-contained report.html (figures embedded as base64 data URIs) and a
report.md beside it, plus leaderboard.md/.csv and the figures as PNG files. The sections are
registered by the modules that build them (analysis/results/section_registry.py: the paper's in
sections.py, those beyond it in results/safety.py, seekers/ and trust/report_sections.py); this
module builds the context, asks the registry for the sections that apply, and renders them.

Missing pieces are reported where they would have been: a run without scores, scores from
several judges, a model with a single dialogue (no CI), failed dialogues, parse failures.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd

from esc_eval.analysis.judgments.expected_scores import check_score_kind, expected_scores, score_kind_note
from esc_eval.analysis.results.leaderboard import build_leaderboard, human_scores_line, write_leaderboard
from esc_eval.analysis.results.loaders import AnalysisInputError, load_dialogues, load_manifests, load_pairwise, load_scores
from esc_eval.analysis.results.section_registry import ReportContext, build_sections
from esc_eval.analysis.results.spoiled import card_contents, flag_map, spoiled_flags
from esc_eval.analysis.judgments.windowed import windowed_counts, windowed_line
# The modules that register the report's sections (each adds its own: analysis/results/section_registry.py).
import esc_eval.analysis.report.sections  # noqa: F401,E402 - the paper's
import esc_eval.analysis.pairwise.pairwise_section  # noqa: F401,E402
import esc_eval.analysis.panels.panel_section  # noqa: F401,E402
import esc_eval.analysis.panels.self_preference  # noqa: F401,E402
import esc_eval.analysis.rounds.by_round  # noqa: F401,E402
import esc_eval.analysis.courses.sessions  # noqa: F401,E402
import esc_eval.analysis.safety.crisis  # noqa: F401,E402
import esc_eval.analysis.safety.emerging_section  # noqa: F401,E402
import esc_eval.analysis.seekers.endings  # noqa: F401,E402
import esc_eval.analysis.seekers.fidelity_report  # noqa: F401,E402
import esc_eval.analysis.seekers.seeker_kinds  # noqa: F401,E402
import esc_eval.analysis.seekers.seeker_levels  # noqa: F401,E402
import esc_eval.analysis.seekers.simulators  # noqa: F401,E402
import esc_eval.analysis.seekers.spoiled_section  # noqa: F401,E402
import esc_eval.analysis.seekerview.section  # noqa: F401,E402
import esc_eval.analysis.trust.report_sections  # noqa: F401,E402
import esc_eval.analysis.ranking.bias_sections  # noqa: F401,E402
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, TABLE_SCALE
from esc_eval.sim.runs.open import OutputFolder
from esc_eval.sim.runs.storage import as_location, join_location

TEMPLATE = Path(__file__).with_name("report.html.jinja")


def _md_table(block: dict) -> str:
    esc = lambda c: str(c).replace("|", "/").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(block["headers"]) + " |", "|" + "---|" * len(block["headers"])]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in block["rows"]]
    return ("**" + block["caption"] + "**\n\n" if block.get("caption") else "") + "\n".join(lines)


def render_markdown(title: str, meta: str, sections: list[dict], out_dir: Path) -> str:
    parts = [f"# {title}", "", meta, ""]
    for s in sections:
        parts += [f"## {s['title']}", ""]
        parts += [f"> **{n['level']}**: {n['text']}\n" for n in s["notices"]]
        for b in s["blocks"]:
            if b["kind"] == "table":
                parts += [_md_table(b), ""]
            elif b["kind"] == "figure":
                parts += [f"![{b['caption']}]({Path(b['path']).relative_to(out_dir).as_posix()})", ""]
            elif b["kind"] == "text":
                parts += [b["text"], ""]
            elif b["kind"] == "dialogue":
                parts += [f"**{b['header']}**", ""]
                parts += [f"- **{t['label']}:** {t['text'].strip()}" for t in b["turns"]]
                parts += ["", f"Scores: {b['scores']}", ""]
    return "\n".join(parts) + "\n"


def render_html(context: dict) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.from_string(TEMPLATE.read_text(encoding="utf-8")).render(**context)


def write_report(run_dirs: list[Path], out_dir: Path | None = None, *, groups: dict[str, str] | None = None,
                 leaderboard: pd.DataFrame | None = None, n_boot: int = 1000, seed: int = 0, n_samples: int = 3, n_resamples: int = 2000,
                 title: str = "ESC-Eval report", humans=None, score_kind: str = "label", human_seekers=None,
                 judge_note: str | None = None, panel: str | None = None, windowed: str = "include",
                 embedding=None) -> dict[str, Path]:
    """Write report.html, report.md, leaderboard.md/.csv and figures/*.png; default out_dir is
    <first run>/report/. groups: model -> close/open/domain (the CLI passes the registry's; unknown models show as unassigned).
    Returns the written paths by name ("html", "markdown", "leaderboard_md", "leaderboard_csv",
    "figure:<name>"). humans (analysis.trust.human_scores.HumanScores): add the human-anchored leaderboard
    and the judges' calibration; score_kind "expected": tables from sum k x P(k) where the judge gave P(0..4);
    human_seekers (analysis.seekers.esconv.HumanSeekers): add "Is the simulated seeker like a person?";
    embedding (analysis.realism.EmbeddingOptions): with human_seekers, add the comparison by embedding;
    judge_note: said instead of the usual line where a judge has no human scores beside it (the demo's);
    panel: a rule (mean, median, majority, trimmed_mean): the runs' judge panel added as one more judge;
    windowed: include | exclude | only the judgments made on a window of a long dialogue (every section
    reads the rows kept; the count is said beside Table 2: analysis/judgments/windowed.py)."""
    paths = [as_location(p) for p in ([run_dirs] if isinstance(run_dirs, (str, Path)) else run_dirs)]
    if not paths:
        raise AnalysisInputError("write_report needs at least one run folder")
    manifests = load_manifests(paths)  # read (and checked) before any output folder is made
    dialogues = load_dialogues(paths)
    all_scores = load_scores(paths, extra_dimensions=True, windowed=windowed)  # safety rows reach only their own sections
    counts = all_scores.attrs["windowed"]
    if panel is not None:  # the judges' panel as one more judge in every section (analysis/panels/panel_runs.py)
        from esc_eval.analysis.panels.panel_runs import with_panel_rows

        all_scores = with_panel_rows(all_scores, manifests, panel)
    scores = all_scores[all_scores["dimension"].isin(DIMENSION_NAMES)].reset_index(drop=True)
    scores.attrs["windowed"] = counts
    if humans is not None:
        humans.check_runs(set(scores["dialogue_id"]))  # bad human scores: one line, nothing written
    # A report of a run folder in object storage is written locally, then uploaded beside it.
    with OutputFolder(out_dir or join_location(paths[0], "report")) as folder:
        return folder.finals(_write_report(paths, folder.path, manifests, dialogues, scores, all_scores, groups=groups,
                                           leaderboard=leaderboard, n_boot=n_boot, seed=seed, n_samples=n_samples,
                                           n_resamples=n_resamples, title=title, humans=humans,
                                           score_kind=check_score_kind(score_kind), human_seekers=human_seekers,
                                           judge_note=judge_note, windowed=counts,
                                           embedding=embedding))


def _write_report(paths: list, out: Path, manifests: dict, dialogues: pd.DataFrame, scores: pd.DataFrame,
                  all_scores: pd.DataFrame, *, groups, leaderboard, n_boot, seed, n_samples, n_resamples,
                  title, humans=None, score_kind="label", human_seekers=None, judge_note=None,
                  windowed=None, embedding=None) -> dict[str, Path]:
    # The tables read expected scores when asked; distributions, samples and health keep the labels.
    board = expected_scores(scores) if score_kind == "expected" else scores
    # leaderboard: the caller's Table 2 (built once, with its grouping rule); else built here.
    lb = leaderboard if leaderboard is not None else build_leaderboard(
        board, groups=groups or {}, n_boot=n_boot, seed=seed,
        spoiled=flag_map(spoiled_flags(dialogues, card_contents(manifests))) if not dialogues.empty else None)
    written: dict[str, Path] = {}
    from esc_eval.analysis.results.usage import add_usage_columns

    line = human_scores_line(board["judge"].dropna().unique(), anchored=humans is not None, instead=judge_note)
    said = windowed_line(windowed or scores)  # the windowed judgments, counted where the rows were read
    lb_paths = write_leaderboard(add_usage_columns(lb, manifests), out, note="\n\n".join(
        n for n in (score_kind_note(board) if score_kind == "expected" else "", line, said) if n))
    written["leaderboard_md"], written["leaderboard_csv"] = lb_paths["markdown"], lb_paths["csv"]
    ctx = ReportContext(paths=paths, out=out, manifests=manifests, dialogues=dialogues, scores=scores,
                        all_scores=all_scores, board=board, leaderboard=lb, groups=groups or {}, n_boot=n_boot, seed=seed,
                        n_samples=n_samples, n_resamples=n_resamples, score_kind=score_kind, judge_line=line,
                        humans=humans, human_seekers=human_seekers, pairwise=load_pairwise(paths), windowed_line=said,
                        embedding=embedding)
    sections = build_sections(ctx)  # every registered section that applies, in its order
    for s in sections:
        for b in s["blocks"]:
            if b["kind"] == "figure":
                written[f"figure:{Path(b['path']).stem}"] = Path(b["path"])
    generated = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    runs = [{"path": str(p), "run_id": manifests.get(str(p), {}).get("run_id", "n/a")} for p in paths]
    meta = (f"Generated {generated} from {', '.join('`' + r['path'] + '`' for r in runs)}. Scores are mean x "
            f"{TABLE_SCALE:g} (0-100); brackets are bootstrap 95% CIs over dialogues.")
    out.mkdir(parents=True, exist_ok=True)
    written["markdown"] = out / "report.md"
    written["markdown"].write_text(render_markdown(title, meta, sections, out), encoding="utf-8")
    written["html"] = out / "report.html"
    written["html"].write_text(render_html({"title": title, "generated_at": generated, "runs": runs,
                                            "sections": sections}), encoding="utf-8")
    (out / "report.json").write_text(json.dumps({
        "runs": runs, "generated_at": generated, "sections": [s["id"] for s in sections],
        "notices": [{"section": s["id"], **n} for s in sections for n in s["notices"]],
        "leaderboard": json.loads(lb.to_json(orient="records")), "scores": score_kind,
        "windowed": windowed or windowed_counts(scores),
        **{s["id"]: s["data"] for s in sections if s.get("data") is not None},
    }, indent=2, ensure_ascii=False), encoding="utf-8")
    written["json"] = out / "report.json"
    return written
