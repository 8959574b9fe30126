"""esc-eval export RUN --official DIR: the release's JSON layout, read back identically."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from esc_eval.analysis.results.fake_runs import write_fake_run
from esc_eval.analysis.results.loaders import load_official_scores
from esc_eval.cli.app import app
from esc_eval.sim.jobs.scoring import prepare_input
from esc_eval.sim.runs.official import read_official_dialogues, write_official_dialogues
from esc_eval.sim.runs.runfolder import RunFolder

# ../shared next to the repository (ESC_EVAL_SHARED overrides it, e.g. from a git worktree).
SHARED_DIALOGUES = Path(os.environ.get("ESC_EVAL_SHARED", Path(__file__).resolve().parents[3].parent / "shared")) \
    / "data" / "esc-eval" / "dialogues"


def _turns(rows):
    return {(r["target_model"], r["language"], str(r["card_id"])): [(t["speaker"], t["text"]) for t in r["turns"]]
            for r in rows}


def test_export_then_score_input_reads_the_same_turns(tmp_path):
    run = write_fake_run(tmp_path / "run", 40, models=["fake/echo", "model-b"], part_rows=16)
    # A failed dialogue is left out unless asked.
    failed = next(RunFolder(run).iter_rows("dialogues"))
    RunFolder(run).write_part("dialogues", [{**failed, "dialogue_id": "failed-1", "card_id": "en-999999",
                                             "status": "failed", "turns": failed["turns"][:3]}])
    out = tmp_path / "official"
    r = CliRunner().invoke(app, ["export", str(run), "--official", str(out)])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["n_dialogues"] == 40 and res["skipped_failed"] == 1 and res["judge"] == "fake/judge"
    names = sorted(p.name for p in (out / "dialogues").iterdir())
    assert names == ["fake_echo_en.json", "fake_echo_zh.json", "model-b_en.json", "model-b_zh.json"]
    raw = json.loads((out / "dialogues" / "model-b_en.json").read_text(encoding="utf-8"))
    first = next(iter(raw.values()))
    assert len(first) == 11 and first[0].startswith("AI assistant：") and first[1].startswith("ESC-Role：")
    # What `score --input DIR/dialogues` reads (sim.jobs.scoring.prepare_input -> read_official_dialogues).
    back = list(prepare_input(out / "dialogues", tmp_path / "rescore").iter_rows("dialogues"))
    ours = [r for r in RunFolder(run).iter_rows("dialogues") if r["status"] == "ok"]
    expected = {(m.replace("/", "_"), lang, card): t for (m, lang, card), t in _turns(ours).items()}
    assert _turns(back) == expected and all(r["status"] == "ok" for r in back)
    # Scores: the same integers under the official keys.
    got = load_official_scores(out / "scores" / "model-b_en.json")
    src = {(r["dialogue_id"], r["dimension"]): r["score"] for r in RunFolder(run).iter_rows("scores")}
    card_of = {r["dialogue_id"]: r["card_id"] for r in ours if r["target_model"] == "model-b" and r["language"] == "en"}
    want = {(card_of[d], dim): s for (d, dim), s in src.items() if d in card_of}
    assert {(str(r.card_id), r.dimension): int(r.score) for r in got.itertuples()} == want


def test_several_dialogues_per_card_get_distinct_keys(tmp_path):
    run = write_fake_run(tmp_path / "run", 8, models=["m"], seeds_per_card=2)
    out = tmp_path / "official"
    assert CliRunner().invoke(app, ["export", str(run), "--official", str(out)]).exit_code == 0
    data = json.loads((out / "dialogues" / "m_en.json").read_text(encoding="utf-8"))
    assert sorted(data) == ["en-000000#official-s0", "en-000000#official-s1", "en-000001#official-s0",
                            "en-000001#official-s1", "en-000002#official-s0", "en-000002#official-s1",
                            "en-000003#official-s0", "en-000003#official-s1"]


def test_export_needs_a_run_folder(tmp_path):
    r = CliRunner().invoke(app, ["export", str(tmp_path / "nope"), "--official", str(tmp_path / "o")])
    assert r.exit_code != 0


@pytest.mark.skipif(not SHARED_DIALOGUES.is_dir(), reason=f"shared data {SHARED_DIALOGUES} is absent")
def test_release_files_survive_read_then_write(tmp_path):
    for f in sorted(SHARED_DIALOGUES.glob("*.json")):
        rows = read_official_dialogues(f)
        [written] = write_official_dialogues(rows, tmp_path / f.stem)
        assert written.name == f.name
        original = json.loads(f.read_text(encoding="utf-8"))
        again = json.loads(written.read_text(encoding="utf-8"))
        # Same keys and the same lines, except the release's "AI assitant：" typo, which we normalise.
        assert list(again) == sorted(original, key=lambda k: (0, int(k)) if k.isdigit() else (1, k))
        for k, lines in original.items():
            assert again[k] == [line.replace("AI assitant：", "AI assistant：") for line in lines], (f.name, k)
