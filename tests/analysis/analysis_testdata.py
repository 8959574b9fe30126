"""Hand-made dialogue and score rows for the analysis tests (the make_run fixture in conftest.py writes them)."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
ESC_DATA = SHARED / "data" / "esc-eval"

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def needs_shared_data(sub: str = "") -> pytest.MarkDecorator:
    path = ESC_DATA / sub
    return pytest.mark.skipif(not path.exists(), reason=f"shared data {path} is absent")


def make_turns(seeker: list[str], assistant: list[str] | None = None) -> list[dict]:
    """Alternating assistant/seeker turns: assistant greets, then seeker_i, assistant_i."""
    assistant = assistant or [f"I hear you, tell me more ({i})." for i in range(len(seeker))]
    turns = [{"index": 0, "speaker": "assistant", "text": "Hello, I'm your personal assistant.",
              "prompt_tokens": 10, "completion_tokens": 8, "latency_s": 0.1, "finish_reason": "stop"}]
    for s, a in zip(seeker, assistant):
        for speaker, text in (("seeker", s), ("assistant", a)):
            turns.append({"index": len(turns), "speaker": speaker, "text": text, "prompt_tokens": 20,
                          "completion_tokens": 12, "latency_s": 0.2, "finish_reason": "stop"})
    return turns


def dialogue_row(dialogue_id: str, model: str, *, card_id: str = "c1", language: str = "en",
                 status: str = "ok", minutes: int = 0, seeker: list[str] | None = None,
                 run_id: str = "run-a", categories=("Life", "Work", "Stress"), role_model: str = "fake/role") -> dict:
    seeker = seeker or ["I feel so anxious about work.", "My boss keeps yelling.", "I can't sleep."]
    return {
        "run_id": run_id, "dialogue_id": dialogue_id, "card_id": card_id, "language": language,
        "category_1": categories[0], "category_2": categories[1], "category_3": categories[2],
        "card_source": "test", "target_model": model, "role_model": role_model, "strategy": "zero_shot",
        "seed": 0, "target_params": "{}", "role_params": "{}",
        "turns": make_turns(seeker) if status == "ok" else [],
        "n_turns": 1 + 2 * len(seeker) if status == "ok" else 0,
        "status": status, "termination_reason": "completed" if status == "ok" else "error",
        "error": None if status == "ok" else "boom", "attempts": 1,
        "prompt_tokens": 100, "completion_tokens": 50,
        "started_at": T0 + dt.timedelta(minutes=minutes), "finished_at": T0 + dt.timedelta(minutes=minutes, seconds=30),
    }


def score_rows(dialogue_id: str, model: str, scores: dict[str, int | None] | list[int | None], *,
               language: str = "en", judge: str = "judge-a", run_id: str = "run-a", minutes: int = 0) -> list[dict]:
    if isinstance(scores, list):
        scores = dict(zip(DIMENSION_NAMES, scores))
    return [
        {"run_id": run_id, "dialogue_id": dialogue_id, "target_model": model, "language": language,
         "dimension": dim, "score": s, "probs": None, "expected": None, "raw": str(s),
         "parse_status": "ok" if s is not None else "parse_failure", "judge": judge, "method": "generate",
         "parser": "strict", "error": None, "prompt_tokens": 100, "latency_s": 0.5,
         "scored_at": T0 + dt.timedelta(minutes=minutes)}
        for dim, s in scores.items()
    ]


