"""The report is built from registered sections (analysis/results/section_registry.py): report.json's
section ids and order are those of the report before the registry (plain, with people's seeker
dialogues, with human scores), and a registered section appears where its order puts it, when it applies."""
import json

import pandas as pd
import pytest

from esc_eval.analysis.report.report import write_report
from esc_eval.analysis.results.blocks import section
from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.analysis.results.loaders import load_scores
from esc_eval.analysis.results.section_registry import _REGISTRY, register_section, registered_sections
from esc_eval.analysis.seekers.esconv import read_human_seekers, sample_file
from esc_eval.analysis.trust.human_scores import load_human_scores

PAPER = ["summary", "leaderboard", "rank-sets", "judge-length", "by-category", "seeds", "distributions", "comparisons", "seekers", "seeker-levels", "simulators",
         "spoiled", "safety", "health", "throughput", "roleplay", "cards", "samples"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return write_fake_run(tmp_path_factory.mktemp("sections") / "run", 40)


def _ids(paths) -> list[str]:
    return json.loads(paths["json"].read_text())["sections"]


# Three reports, one test each: each writes a whole report with its figures (about 4 s alone on the
# AVX2 EPYC, and up to four times that beside a slow test's engine).
def test_the_sections_and_their_order_are_the_reports_of_before(run, tmp_path):
    assert _ids(write_report([run], tmp_path / "plain", n_boot=0)) == PAPER


def test_human_seekers_add_the_fidelity_section_after_the_role_play_checks(run, tmp_path):
    with_people = _ids(write_report([run], tmp_path / "people", n_boot=0, human_seekers=read_human_seekers(sample_file())))
    at = PAPER.index("roleplay") + 1
    assert with_people == PAPER[:at] + ["seeker_fidelity"] + PAPER[at:]  # right after the role-play checks


def test_human_scores_add_the_anchored_sections_after_table_2(run, tmp_path):
    scores = load_scores([run])
    some = scores[scores["dialogue_id"].isin(sorted(scores["dialogue_id"].unique())[:12])]
    sheet = tmp_path / "humans.csv"
    pd.DataFrame([{"dialogue_id": r.dialogue_id, "annotator": a, "dimension": r.dimension, "score": int(r.score)}
                  for r in some.itertuples() for a in ("ana", "ben")]).to_csv(sheet, index=False)
    with_humans = _ids(write_report([run], tmp_path / "humans", n_boot=0, humans=load_human_scores(sheet)))
    assert with_humans == PAPER[:2] + ["human-anchored", "calibration"] + PAPER[2:]  # right after Table 2


def test_a_registered_section_goes_where_its_order_says_when_it_applies(run, tmp_path, monkeypatch):
    monkeypatch.setattr("esc_eval.analysis.results.section_registry._REGISTRY", dict(_REGISTRY))

    def build(ctx):
        s = section("per-round", "Scores by round")
        s["data"] = {"dialogues": int(len(ctx.dialogues))}
        return s

    register_section("per-round", 650, build, when=lambda ctx: ctx.n_boot == 0)
    paths = write_report([run], tmp_path / "r", n_boot=0)
    at = PAPER.index("comparisons") + 1  # order 650: after comparisons (600)
    assert _ids(paths) == PAPER[:at] + ["per-round"] + PAPER[at:]
    assert json.loads(paths["json"].read_text())["per-round"] == {"dialogues": 40}
    assert "## Scores by round" in paths["markdown"].read_text()
    assert "per-round" not in _ids(write_report([run], tmp_path / "r2", n_boot=10))  # its condition
    with pytest.raises(ValueError, match="order 700 is 'seekers''s"):
        register_section("another", 700, build)
    assert [s.order for s in registered_sections()] == sorted(s.order for s in registered_sections())
