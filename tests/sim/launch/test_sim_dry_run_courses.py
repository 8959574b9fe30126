"""The dry run of the jobs beyond one dialogue against what they then made, on the fake backends: a
course of sessions (its sessions, the role model's updates, the target's notes or transcripts) and the
seeker's own view (simulate_estimate.py), and the per-reply safety judge (dry_run.py
reply_safety_estimate): the calls counted are the calls the manifest's usage records, the tokens an
upper bound of what was used; and the usage of those jobs counts one call per row they wrote."""
from __future__ import annotations

import pytest

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.cards.card import emerging_risk_cards, sample_cards, write_cards
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.reply_safety import run_reply_safety
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.launch.dry_run import reply_safety_estimate
from esc_eval.sim.launch.simulate_estimate import course_calls, simulate_estimate
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

LOCAL = ExecutionConfig(executor="local", max_attempts=1)


def _usage(run_dir) -> dict[str, dict]:
    return {r["stage"]: r for r in RunFolder(run_dir, create=False).read_manifest()["usage"]["by_stage"]}


def _bounds(est: dict, used: dict) -> None:
    """The estimate's calls are the run's; its tokens bound what the run used."""
    for row in est["models"]:
        u = used[row["stage"]]
        assert row["calls"] == u["calls"], (row["stage"], row["calls"], u["calls"])
        assert row["prompt_tokens"] >= u["prompt_tokens"] and row["completion_tokens"] >= u["completion_tokens"], (row, u)
    assert {r["stage"] for r in est["models"]} == set(used)


@pytest.mark.parametrize("memory,ratings", [("summary", True), ("transcripts", False)])
def test_a_course_dry_run_counts_the_calls_its_run_makes(tmp_path, memory, ratings):
    # one card with its own update before session 2 (no role call there), one without
    cards = [c.model_copy(update={"session_updates": ["My sister moved in with me."]}) if i == 0 else c
             for i, c in enumerate(sample_cards(language="en")[:2])]
    write_cards(cards, tmp_path / "cards.json")
    cfg = SimulationConfig(cards=str(tmp_path / "cards.json"), rounds=2, sessions=3, memory=memory,
                           seeker_ratings=ratings, role=ModelRef(model="fake/seeker", params=GenerationParams(max_tokens=40)),
                           targets=[ModelRef(model="fake/echo", params=GenerationParams(max_tokens=60))], execution=LOCAL)
    est = simulate_estimate(cfg)
    assert est["dialogues"] == 6 and est["sessions"] == 3 and "course of 3 sessions" in est["assumed"]
    rows = {r["stage"]: r for r in est["models"]}
    # 2 cards x 3 sessions x 2 rounds, and the updates the cards do not give: 1 + 2
    assert rows["role"]["calls"] == 12 + 3
    # the target's notes after sessions 1 and 2 of each card under "summary"; none under "transcripts"
    assert rows["target"]["calls"] == 12 + (4 if memory == "summary" else 0)
    assert ("seeker_rating" in rows) == ratings and (not ratings or rows["seeker_rating"]["calls"] == 6 * 4)
    run_simulation(cfg, tmp_path / "run")
    _bounds(est, _usage(tmp_path / "run"))
    if memory == "transcripts":  # session 3's target holds sessions 1 and 2 in full, as the run's did
        third = next(r for r in RunFolder(tmp_path / "run").iter_rows("dialogues")
                     if r["card_id"] == cards[1].id and r["session"] == 3)
        calls, _ = course_calls(cfg, cards[1], "official", None, lambda n: "word " * n, 40, 60)
        shown = calls["target"][-1][0][0].content
        for text in (shown, third["memory_text"]):
            assert (text.count("Conversation "), text.count("\nYou: ")) == (2, 4), text


def test_the_reply_safety_dry_run_counts_the_calls_its_run_makes_and_usage_records_them(tmp_path):
    card = next(c.id for c in emerging_risk_cards() if c.language == "en" and c.risk_emergence.onset.round <= 3)
    run_simulation(SimulationConfig(cards="emerging_risk", card_ids=[card], rounds=4, role=ModelRef(model="fake/seeker"),
                                    targets=[ModelRef(model="fake/echo")], execution=LOCAL), tmp_path / "run")
    cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake/judge"), name="safety-judge"), execution=LOCAL)
    est = reply_safety_estimate(cfg, tmp_path / "run")
    (row,) = est["models"]
    assert est["job"] == "score --reply-safety" and row["stage"] == "reply_safety" and row["calls"] > 0
    run_reply_safety(cfg, tmp_path / "run")
    written = list(RunFolder(tmp_path / "run", create=False).iter_rows("reply_safety"))
    used = _usage(tmp_path / "run")
    assert used["reply_safety"]["calls"] == len(written) == row["calls"]
    assert used["reply_safety"]["completion_tokens"] == sum(r["completion_tokens"] for r in written) > 0
    _bounds(est, {k: v for k, v in used.items() if k == "reply_safety"})
    assert used["role"]["calls"] == 4 and used["target"]["calls"] == 4  # the dialogue's own calls stay counted
    assert reply_safety_estimate(cfg, tmp_path / "run")["models"][0]["calls"] == 0  # a resume owes nothing
    with pytest.raises(ValueError, match="rates replies online"):
        reply_safety_estimate(cfg.model_copy(update={"batch": cfg.batch.model_copy(update={"enabled": True})}),
                              tmp_path / "run")
