"""How long seeker fidelity takes at the paper's scale (`esc-eval bench fidelity`): 8,500 simulated
dialogues (a run folder written with the real writer, 5 rounds each) against 1,300 human ones (an
ESConv-format file, like the full ESConv), without a judge, with the shipped defaults (5 rounds,
relative alignment, 1,000 bootstrap resamples). Every dialogue's text is drawn anew from a pool of
seeker phrases (distinct inputs: no two dialogues alike), with runs of several messages on the human
side. Timed in this process, each step once: reading the run, reading the human file, the features
and the comparison, writing fidelity.md/.json.
"""
from __future__ import annotations

import datetime as dt
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from esc_eval.analysis.results.loaders import load_dialogues
from esc_eval.analysis.seekers.esconv import read_human_seekers
from esc_eval.analysis.seekers.fidelity_report import seeker_fidelity, write_fidelity
from esc_eval.sim.runs.records import dialogue_id, dialogue_row
from esc_eval.sim.runs.runfolder import RunFolder

TARGET_S = 30.0
_OPEN = ["hi", "hello there", "hey", "good evening", "hi, is anyone there?", "hello, thanks for talking with me"]
_TROUBLE = ["i have been feeling really anxious about work", "my partner and i keep fighting about money",
            "i lost my job last month and i feel hopeless", "i can't sleep because i worry about my exams",
            "my mother is sick and i am scared", "i feel so lonely since i moved to this city",
            "my best friend stopped talking to me and it hurts", "i am stressed about the pandemic and my kids",
            "i got rejected again and i feel like a failure", "my boss yells at me and i dread mondays"]
_MORE = ["it started a few weeks ago", "i don't know who else to tell", "sometimes i just cry at night",
         "i tried talking to them but it went badly", "maybe i am overthinking it", "what would you do?",
         "do you think i should tell someone?", "i guess that makes sense", "yes, that is exactly it",
         "i never thought about it that way", "it is hard to explain", "i feel a bit better talking about it",
         "how do i even start?", "that sounds scary to me", "my family does not understand"]
_CLOSE = ["thank you so much, this helped", "thanks, i will try that", "ok, bye", "i appreciate it, take care",
          "i still feel awful honestly", "ok"]


def _utterance(rng: np.random.Generator, pool: list[str], extra: int) -> str:
    words = [pool[rng.integers(len(pool))]] + [_MORE[rng.integers(len(_MORE))] for _ in range(extra)]
    return ". ".join(words).capitalize() + f" ({rng.integers(1_000_000)})"


def write_fake_humans(path: Path, n: int, seed: int = 1) -> Path:
    """An ESConv-format file of n dialogues: 6-20 seeker turns of 1-3 messages, supporter replies,
    the survey's before/after intensities."""
    rng = np.random.default_rng(seed)
    records = []
    for _ in range(n):
        k = int(rng.integers(6, 21))
        dialog = []
        for j in range(k):
            pool = _OPEN if j == 0 else _TROUBLE if j < 3 else _CLOSE if j == k - 1 else _MORE
            for _ in range(int(rng.integers(1, 4))):
                dialog.append({"speaker": "seeker", "annotation": {}, "content": _utterance(rng, pool, int(rng.integers(0, 2)))})
            dialog.append({"speaker": "supporter", "annotation": {"strategy": "Question"},
                           "content": f"I hear you. Can you tell me more? ({rng.integers(1_000_000)})"})
        before = int(rng.integers(2, 6))
        records.append({"experience_type": "Current Experience", "emotion_type": "anxiety", "problem_type": "job crisis",
                        "situation": "synthetic", "dialog": dialog,
                        "survey_score": {"seeker": {"initial_emotion_intensity": str(before),
                                                    "final_emotion_intensity": str(max(1, before - int(rng.integers(0, 3))))}}})
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def write_fake_simulated(path: Path, n: int, role_models: tuple[str, ...] = ("role-a", "role-b"), rounds: int = 5,
                         seed: int = 2, part_rows: int = 64) -> Path:
    """A run folder of n ok dialogues: an opener, then `rounds` seeker/assistant rounds."""
    rng = np.random.default_rng(seed)
    folder = RunFolder(path)
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    rows = []
    for i in range(n):
        role = role_models[i % len(role_models)]
        turns = [{"index": 0, "speaker": "assistant", "text": "Hello, I am here to listen. What is on your mind?"}]
        for r in range(rounds):
            pool = _TROUBLE if r < 2 else _CLOSE if r == rounds - 1 else _MORE
            turns.append({"index": len(turns), "speaker": "seeker", "text": _utterance(rng, pool, int(rng.integers(1, 4)))})
            turns.append({"index": len(turns), "speaker": "assistant", "text": f"That sounds hard ({rng.integers(1_000_000)})."})
        card = f"card-{i // len(role_models):06d}"
        rows.append(dialogue_row(run_id="bench", dialogue_id=dialogue_id(card, "target", role, "official", 0),
                                 card_id=card, language="en", target_model="target", role_model=role,
                                 strategy="official", seed=0, turns=turns, n_turns=len(turns), status="ok",
                                 started_at=at, finished_at=at))
        if len(rows) >= part_rows:
            folder.write_part("dialogues", rows)
            rows = []
    folder.write_part("dialogues", rows)
    folder.update_manifest(run_id="bench", kind="fake")
    return path


def bench_fidelity(n_simulated: int = 8_500, n_human: int = 1_300, n_boot: int = 1000) -> dict[str, Any]:
    """Build the inputs in a temporary folder, then time each step (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="esc-eval-fidelity-bench-") as tmp:
        t0 = time.perf_counter()
        run = write_fake_simulated(Path(tmp) / "run", n_simulated)
        humans_file = write_fake_humans(Path(tmp) / "ESConv-like.json", n_human)
        build_s = round(time.perf_counter() - t0, 2)
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        dialogues = load_dialogues([run])
        t["read_run"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        humans = read_human_seekers(humans_file)
        t["read_humans"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        result = seeker_fidelity(dialogues, humans, n_boot=n_boot)
        t["features_and_comparison"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        write_fidelity(result, Path(tmp) / "report")
        t["write"] = round(time.perf_counter() - t0, 3)
        t["total"] = round(sum(t.values()), 3)
        return {"bench": "fidelity", "n_simulated": int(result.meta["n_simulated"]), "n_human": int(result.meta["n_human"]),
                "role_models": int(result.summary["role_model"].nunique()), "n_boot": n_boot, "build_s": build_s,
                "seconds": t, "target_s": TARGET_S, "within_target": t["total"] < TARGET_S,
                "notes": f"no judge; 5 rounds aligned '{result.meta['align']}'; every feature's bootstrap shares one set of "
                         "resamples per (role model, strategy, language)"}
