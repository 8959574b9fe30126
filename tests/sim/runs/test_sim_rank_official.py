"""The official sample dialogues through run_scoring on a fake judge, and bad official input.

Both output formats: the score Parquet of the run folder and the official score JSON
(write_official_scores), compared structurally to the official sample scores.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.dimensions import DIMENSIONS
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.official import OfficialFormatError, read_official_dialogues, write_official_scores
from esc_eval.sim.runs.parse_failures import parse_failure_report
from esc_eval.sim.runs.runfolder import RunFolder

REPO = Path(__file__).resolve().parents[3]
OFFICIAL_KEYS = set(DIMENSIONS.values())


def score_official(source, out, judge: JudgeConfig):
    cfg = ScoringConfig(judge=judge, execution=ExecutionConfig(executor="local", concurrency=4))
    result = run_scoring(cfg, source, out)
    run = RunFolder(out, create=False)
    scores = [r for r in run.iter_rows("scores") if r["judge"] == judge.judge_id]
    files = write_official_scores(scores, list(run.iter_rows("dialogues")), out / "official")
    return result, run, scores, files


def assert_official_score_layout(data: dict, keys: set[str]):
    assert set(data) == keys
    for entry in data.values():
        assert set(entry) == OFFICIAL_KEYS
        assert all(type(v) is int and (v == -1 or 0 <= v <= 4) for v in entry.values())


def test_official_samples_score_end_to_end_on_fake_judge(shared_data, tmp_path):
    dialogues_dir = shared_data / "esc-eval" / "dialogues"
    reference = shared_data / "esc-eval" / "scores"
    judge = JudgeConfig(model=ModelRef(model="fake/judge"))
    result, run, scores, files = score_official(dialogues_dir, tmp_path / "run", judge)
    assert result["dialogues"] == 12 and result["items"] == 12 and result["failed"] == 0
    # Parquet: 7 rows per dialogue, each a score with its distribution
    assert len(scores) == 84 and len({(s["dialogue_id"], s["dimension"]) for s in scores}) == 84
    for s in scores:
        assert s["parse_status"] == "ok" and 0 <= s["score"] <= 4
        assert abs(sum(s["probs"]) - 1) < 1e-5 and s["probs"].index(max(s["probs"])) == s["score"]
    # Official JSON: the same files, dialogue keys and dimension keys as the release's scores
    assert sorted(p.name for p in files) == sorted(p.name for p in reference.glob("*.json"))
    for p in files:
        ours = json.loads(p.read_text(encoding="utf-8"))
        theirs = json.loads((reference / p.name).read_text(encoding="utf-8"))
        assert_official_score_layout(theirs, {"0", "1", "2"})  # the reference itself has the layout
        assert_official_score_layout(ours, set(theirs))
        assert all(v != -1 for entry in ours.values() for v in entry.values())
    # a second run over the same folder re-scores nothing
    again = run_scoring(ScoringConfig(judge=judge, execution=ExecutionConfig(executor="local")), dialogues_dir, tmp_path / "run")
    assert again["items"] == 0 and again["skipped_done"] == 12


def official_file(path: Path, dialogues: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dialogues, ensure_ascii=False), encoding="utf-8")
    return path


def full_dialogue(n_rounds: int = 5) -> list[str]:
    lines = ["AI assistant：Hello, I'm your personal assistant."]
    for i in range(n_rounds):
        lines += [f"ESC-Role：I feel low, part {i}.", f"AI assistant：I hear you ({i})."]
    return lines


def test_dialogue_with_missing_turns_is_recorded_failed_and_not_scored(tmp_path):
    src = official_file(tmp_path / "in" / "mymodel_en.json", {"0": full_dialogue(), "1": full_dialogue()[:7]})
    result, run, scores, files = score_official(src.parent, tmp_path / "run", JudgeConfig(model=ModelRef(model="fake/judge")))
    rows = {r["card_id"]: r for r in run.iter_rows("dialogues")}
    assert rows["0"]["status"] == "ok"
    bad = rows["1"]
    assert bad["status"] == "failed" and bad["termination_reason"] == "missing_turns"
    assert "expected 11 messages, found 7" in bad["error"]
    assert result["dialogues"] == 1 and result["items"] == 1
    assert {s["dialogue_id"] for s in scores} == {rows["0"]["dialogue_id"]} and len(scores) == 7
    (written,) = files
    assert set(json.loads(written.read_text())) == {"0"}  # the failed dialogue gets no invented scores


@pytest.mark.parametrize("content,needle", [
    ({"0": {"fluency": 3}}, "another layout"),  # a score file where dialogues are expected
    ([["AI assistant：hi"]], "another layout"),  # a list at the top level
    ({"0": ["Assistant: hi", "ESC-Role：hello"]}, "line 0 has no"),  # lines without the speaker prefix
])
def test_file_in_neither_format_is_a_clear_error(tmp_path, content, needle):
    src = official_file(tmp_path / "in" / "m_en.json", content)
    with pytest.raises(OfficialFormatError, match=needle):
        read_official_dialogues(src)
    with pytest.raises(OfficialFormatError, match=str(src.name)):
        run_scoring(ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake/judge")),
                                  execution=ExecutionConfig(executor="local")), src.parent, tmp_path / "run")
    assert not (tmp_path / "run" / "scores").exists()  # rejected at the door: nothing scored


def test_not_json_and_empty_folder_are_clear_errors(tmp_path):
    bad = tmp_path / "in" / "m_en.json"
    bad.parent.mkdir()
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(OfficialFormatError, match="not an official dialogue JSON"):
        read_official_dialogues(bad)
    empty = tmp_path / "empty"
    empty.mkdir()
    cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake/judge")), execution=ExecutionConfig(executor="local"))
    with pytest.raises(OfficialFormatError, match="no official dialogue JSON files"):
        run_scoring(cfg, empty, tmp_path / "run")


def test_cli_rejects_a_file_in_neither_format_with_one_line(tmp_path):
    src = official_file(tmp_path / "in" / "m_en.json", {"0": {"fluency": 3}})
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "score", "-i", str(src.parent), "-o", str(tmp_path / "run"),
                           "--judge", "fake/judge"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "m_en.json" in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.parametrize("reply,parser,expected", [
    ("no digit", "compat", None), ("no digit", "strict", None), ("Score: 3", "strict", None),
    ("Score: 3", "compat", 3), ("10", "compat", 0), ("3/4", "compat", 3),
])
def test_judge_reply_without_a_score_is_a_recorded_parse_failure(tmp_path, reply, parser, expected):
    src = official_file(tmp_path / "in" / "m_en.json", {"0": full_dialogue(), "1": full_dialogue()})
    judge = JudgeConfig(model=ModelRef(model=f"fake/fixed?reply={reply}"), method="generate", parser=parser)
    result, run, scores, files = score_official(src.parent, tmp_path / "run", judge)
    assert len(scores) == 14 and all(s["raw"] == reply for s in scores)
    if expected is None:
        assert all(s["score"] is None and s["parse_status"] == "parse_failure" for s in scores)
        assert result["failed"] == 2  # an item with unparsed answers counts as failed, not as zeros
    else:
        assert all(s["score"] == expected and s["parse_status"] == "ok" for s in scores)
    (written,) = files
    official = json.loads(written.read_text())
    assert_official_score_layout(official, {"0", "1"})
    # the release writes -1 for an answer with no label; never 0
    assert {v for e in official.values() for v in e.values()} == {-1 if expected is None else expected}
    report = parse_failure_report(tmp_path / "run")
    assert len(report) == 7 and set(report["dimension"]) == set(DIMENSIONS)
    assert (report["parse_failure_rate"] == (1.0 if expected is None else 0.0)).all()


def test_cli_score_reports_parse_failures_per_model_and_dimension(tmp_path):
    # Needs the sim/cli.py diff of the report (score prints parse_failure_report).
    src = official_file(tmp_path / "in" / "m_en.json", {"0": full_dialogue(), "1": full_dialogue()})
    cfg = tmp_path / "local.yaml"
    cfg.write_text("execution: {executor: local}\n")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "score", "-c", str(cfg), "-i", str(src.parent), "-o",
                           str(tmp_path / "run"), "--judge", "fake/fixed?reply=no digit", "--method", "generate"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    failures = json.loads(proc.stdout)["parse_failures"]
    assert {(f["target_model"], f["dimension"]) for f in failures} == {("m", d) for d in DIMENSIONS}
    assert all(f["n_scores"] == 2 and f["parse_failures"] == 2 and f["failure_rate"] == 1.0 for f in failures)
    assert "Unscored answers" in proc.stderr


def test_exported_file_names_are_safe_in_a_shell_and_never_shared(tmp_path):
    from esc_eval.sim.runs.official import official_file_name, parse_official_name, write_official_dialogues

    name = official_file_name("fake/fixed?reply=I hear you&x=1", "en")
    assert name == "fake_fixed_reply_I_hear_you_x_1_en.json"
    assert parse_official_name(name) == ("fake_fixed_reply_I_hear_you_x_1", "en")  # reads back as model + language
    assert official_file_name("vllm/Qwen1.5-7B-Chat", "zh") == "vllm_Qwen1.5-7B-Chat_zh.json"  # as before
    assert official_file_name("心理模型", "zh") == "心理模型_zh.json"  # letters of any script stay
    turns = [{"index": 0, "speaker": "assistant", "text": "Hi"}, {"index": 1, "speaker": "seeker", "text": "Sad."}]
    rows = [{"dialogue_id": f"d{i}", "target_model": m, "language": "en", "card_id": "1", "turns": turns}
            for i, m in enumerate(["a/b", "a?b"])]
    # two models, one file name: refused (one would overwrite or merge into the other)
    with pytest.raises(OfficialFormatError, match=r"'a/b' and 'a\?b' would both be written to a_b_en.json"):
        write_official_dialogues(rows, tmp_path / "out")
    with pytest.raises(OfficialFormatError, match="would both be written"):
        write_official_scores([{"dialogue_id": r["dialogue_id"], "dimension": "fluency", "score": 3} for r in rows], rows,
                              tmp_path / "scores")
    assert [p.name for p in write_official_dialogues(rows[:1], tmp_path / "one")] == ["a_b_en.json"]
