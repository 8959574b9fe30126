"""The simulation job with `sessions` > 1 on the fake backends, in this process: a row per session
with its course, its update and the target's memory; a failed session fails the rest of its course
as data; single-session runs keep their ids and fingerprints; a changed course is refused in one
line before anything is written."""
import pytest

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.cards.card import RoleCard, sample_cards, write_cards
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.jobs.fingerprint import StaleRunError, fingerprint, simulation_inputs
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.jobs.simulation_items import iter_items
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.records import course_id, dialogue_id
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.usage import compute_usage


def config(tmp_path, target="fake/echo", **kw):
    cards = [c.model_copy(update={"session_updates": ["My sister moved in with me."]}) if i == 0 else c
             for i, c in enumerate(sample_cards(language="en")[:2])]
    write_cards(cards, tmp_path / "cards.json")
    return SimulationConfig(cards=str(tmp_path / "cards.json"), rounds=2, role=ModelRef(model="fake/seeker"),
                            targets=[ModelRef(model=target)], execution=ExecutionConfig(executor="local", max_attempts=1),
                            **kw)


def rows(out):
    return sorted(RunFolder(out).read("dialogues").to_pylist(), key=lambda r: (r["card_id"], r["session"] or 0))


def test_a_course_writes_a_row_per_session_and_a_rerun_redoes_nothing(tmp_path):
    cfg, out = config(tmp_path, sessions=3, memory="summary"), tmp_path / "run"
    result = run_simulation(cfg, out)
    got = rows(out)
    assert result["items"] == 2 and len(got) == 6 and all(r["status"] == "ok" and r["n_turns"] == 5 for r in got)
    card = got[0]["card_id"]
    first = [r for r in got if r["card_id"] == card]
    assert [r["session"] for r in first] == [1, 2, 3]
    # session 1 is the single-session dialogue of the same inputs: its id is that one's
    assert first[0]["dialogue_id"] == dialogue_id(card, "fake/echo", "fake/seeker", "official", 0)
    assert {r["course_id"] for r in first} == {course_id(card, "fake/echo", "fake/seeker", "official", 0)}
    assert len({r["dialogue_id"] for r in got}) == 6
    # the card's own update before session 2, the role model's before session 3; the target's own notes
    assert (first[1]["session_update"], first[1]["update_source"]) == ("My sister moved in with me.", "card")
    assert first[2]["update_source"] == "role_model" and first[2]["session_update"]
    assert first[0]["memory_text"] is None and "echo:" in first[1]["memory_text"] and first[2]["memory_sessions"] == 2
    assert [c["stage"] for c in first[1]["between_calls"]] == ["target"]
    assert [c["stage"] for c in first[2]["between_calls"]] == ["role", "target"]
    assert {r["target_memory"] for r in got} == {"summary"}
    # usage counts the calls between sessions: 12 seeker turns + 3 updates the role model wrote
    usage = {r["stage"]: r for r in compute_usage(RunFolder(out))["by_stage"]}
    assert usage["role"]["calls"] == 15 and usage["target"]["calls"] == 12 + 4
    assert result["model_calls"] == 15 + 16
    again = run_simulation(cfg, out)
    assert again["items"] == 0 and again["skipped_done"] == 2 and len(rows(out)) == 6


def test_a_failed_session_fails_the_rest_of_its_course_as_data(tmp_path):
    # the target's notes after session 1 do not fit its context: session 2 fails before its first turn
    cfg, out = config(tmp_path, target="fake/echo?context=150", sessions=3, memory="summary"), tmp_path / "run"
    result = run_simulation(cfg, out)
    got = rows(out)
    assert result["items"] == 2 and result["failed"] == 2 and len(got) == 6
    assert [(r["session"], r["status"], r["termination_reason"]) for r in got[:3]] == [
        (1, "ok", "completed"), (2, "failed", "context_overflow"), (3, "failed", "earlier_session_failed")]
    assert got[1]["error"].startswith("between sessions: ContextOverflowError") and got[1]["n_turns"] == 0
    assert got[2]["error"].startswith("session 2 of the course failed: ContextOverflowError")


def test_single_session_runs_keep_their_ids_and_fingerprints(tmp_path):
    cfg = config(tmp_path)
    cards = [RoleCard(**c) for c in [c.model_dump() for c in sample_cards(language="en")[:2]]]
    items = list(iter_items(cfg, cards, set()))
    assert all(set(i) == {"dialogue_id", "card", "target_index", "strategy", "seed"} for i in items)
    inputs = simulation_inputs(cfg, {"fake/echo": None})
    assert "course" not in inputs and set(fingerprint(inputs)) == {"profile", "rounds", "cards", "prompts", "role",
                                                                   "target[fake/echo]"}
    with_course = simulation_inputs(config(tmp_path, sessions=2), {"fake/echo": None})
    assert with_course["course"]["sessions"] == 2 and with_course["course"]["memory"] == "none"
    assert {k: v for k, v in fingerprint(with_course).items() if k != "course"} == fingerprint(inputs)


def test_a_folder_refuses_a_changed_course_in_one_line_with_nothing_written(tmp_path):
    out = tmp_path / "run"
    run_simulation(config(tmp_path), out)
    before = sorted(p.name for p in (out / "dialogues").iterdir())
    for changed, field in (({"sessions": 2}, "'course'"), ({"sessions": 2, "memory": "transcripts"}, "'course'")):
        with pytest.raises(StaleRunError, match=field):
            run_simulation(config(tmp_path, **changed), out)
    assert sorted(p.name for p in (out / "dialogues").iterdir()) == before
    with pytest.raises(ValueError, match="(?s)memory.*it needs sessions > 1"):
        config(tmp_path, memory="transcripts")


def test_a_card_with_an_empty_session_update_is_refused_in_one_line(tmp_path):
    import json

    from esc_eval.sim.cards.card import CardError

    card = {**sample_cards(language="en")[0].model_dump(exclude_none=True), "session_updates": ["Moved out.", " "]}
    (tmp_path / "bad.json").write_text(json.dumps([card]))
    cfg = config(tmp_path, sessions=3).model_copy(update={"cards": str(tmp_path / "bad.json")})
    with pytest.raises(CardError, match=r"card #0 .*'session_updates': an empty session update") as e:
        run_simulation(cfg, tmp_path / "run")
    assert "\n" not in str(e.value) and not (tmp_path / "run").exists()


def test_continuity_on_a_run_without_courses_is_refused_in_one_line(tmp_path):
    from esc_eval.sim.jobs.config import ScoringConfig
    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.judging.config import JudgeConfig

    out = tmp_path / "run"
    run_simulation(config(tmp_path), out)
    cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake/judge"), dimensions=["empathy", "continuity"]),
                        execution=ExecutionConfig(executor="local"))
    with pytest.raises(ValueError, match="continuity scores the later sessions of a course, and it has none"):
        run_scoring(cfg, out)
    assert not RunFolder(out).parts("scores")
