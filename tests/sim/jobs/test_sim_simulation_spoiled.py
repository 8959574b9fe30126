"""The spoiled flags are stored with the run: a real simulate run on the fake backends fills the
dialogue rows' `spoiled` / `spoiled_reasons` with what sim/dialogue/spoiled.py says of their turns
and card, analysis reads them back as stored, and computes the same on the fly for the same rows
without the columns (the run's card file read from its manifest)."""
from __future__ import annotations

from esc_eval.analysis.results.spoiled import COMPUTED, STORED, spoiled_dialogues
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.cards.card import sample_cards
from esc_eval.sim.dialogue.spoiled import card_content, spoiled_reasons
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

AI_SEEKER = "fake/fixed?reply=As+an+AI+language+model,+I+do+not+have+feelings+to+share+today."


def test_simulate_stores_the_flags_and_analysis_reads_them_back(tmp_path):
    run = tmp_path / "run"
    cfg = SimulationConfig(cards="sample", languages=["en"], limit=3, rounds=3, role=ModelRef(model=AI_SEEKER),
                           targets=[ModelRef(model="fake/echo")], execution=ExecutionConfig(executor="local"))
    run_simulation(cfg, run)
    rows = list(RunFolder(run, create=False).iter_rows("dialogues"))
    problems = {c.id: card_content(c.occupation, c.problem) for c in sample_cards("en")}
    assert len(rows) == 3
    for r in rows:
        # every seeker turn says it is an AI, and says it again: both reasons, nothing else that is false
        assert r["spoiled"] is True and r["spoiled_reasons"][:2] == ["out_of_character", "repeats_itself"]
        assert r["spoiled_reasons"] == spoiled_reasons(r["turns"], problems[r["card_id"]], "en")
    flagged = spoiled_dialogues(run)
    assert set(flagged["flag_source"]) == {STORED} and flagged["spoiled"].all()

    # The same rows without the columns (a run written before them): computed on the fly, the same flags,
    # the card found through the manifest's `cards: sample`.
    old = tmp_path / "old"
    folder = RunFolder(old)
    folder.write_part("dialogues", [{**r, "spoiled": None, "spoiled_reasons": None} for r in rows])
    folder.update_manifest(simulation={"config": {"cards": "sample"}})
    again = spoiled_dialogues(old).set_index("dialogue_id")
    assert set(again["flag_source"]) == {COMPUTED}
    assert {r["dialogue_id"]: r["spoiled_reasons"] for r in rows} == again["spoiled_reasons"].to_dict()


def test_a_cooperative_fake_seeker_on_its_own_card_is_judged_too(tmp_path):
    """fake/seeker's canned lines are about work: judged on every ok row, stored, and equal to the rule."""
    run = tmp_path / "run"
    cfg = SimulationConfig(cards="sample", languages=["en"], limit=4, rounds=5, role=ModelRef(model="fake/seeker"),
                           targets=[ModelRef(model="fake/fixed?reply=I+hear+you.")],
                           execution=ExecutionConfig(executor="local"))
    run_simulation(cfg, run)
    problems = {c.id: card_content(c.occupation, c.problem) for c in sample_cards("en")}
    rows = list(RunFolder(run, create=False).iter_rows("dialogues"))
    assert rows and all(r["status"] == "ok" and r["spoiled"] is not None for r in rows)
    for r in rows:
        assert r["spoiled_reasons"] == spoiled_reasons(r["turns"], problems[r["card_id"]], "en")
        assert set(r["spoiled_reasons"]) <= {"ignores_card"}  # the canned lines never break the role or repeat
