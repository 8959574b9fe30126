"""The whole card build on the real embedded model (SmolLM2-135M via vLLM on CPU).

Heavy: run under `flock /tmp/esc-eval-heavy.lock` with RAY_AUTH_MODE=disabled.
The cards are real and may be poor (a 135M model, English only): the test checks structure and
bookkeeping, not the model's judgement. Timings go to $ESC_EVAL_CARDBUILD_MEASUREMENTS
(default /tmp/esc-eval-cardbuild-measurements.json).
"""
from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from esc_eval.serve.chat.interface import ChatMessage, GenerationParams, get_chat_model
from esc_eval.sim.cardbuild import build_cards, parse_build_config
from esc_eval.sim.cards.card import load_cards
from esc_eval.sim.cards.risk import RISK_LEVELS

pytestmark = [pytest.mark.slow, pytest.mark.beside]

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "sim" / "cardbuild" / "samples"
FAILED_ESCONV = ROOT.parent / "shared" / "data" / "esconv" / "FailedESConv.json"
MEASURE = os.environ.get("ESC_EVAL_CARDBUILD_MEASUREMENTS", "/tmp/esc-eval-cardbuild-measurements.json")


def test_build_on_the_embedded_model_and_resume(tmp_path):
    pytest.importorskip("vllm")
    # one item of each English source but EPITOME (all 3: its two files share a post, read once); the four
    # Chinese items as before (where the zh cards come from; both SMILE layouts): every reader and stage
    # still runs on the real model, and 10 items instead of 14 shorten every stage
    sources = [{"path": "epitome"}, {"path": "psych8k.json", "limit": 1}, {"path": "extes.json", "limit": 1},
               {"path": "psyqa.json", "limit": 2}, {"path": "smile"}]
    if FAILED_ESCONV.exists():
        sources.append({"path": str(FAILED_ESCONV), "dataset": "ESConv", "limit": 1})
    cfg = parse_build_config({
        # 160: a Chinese card's four fields take more tokens than SmolLM2 gives at 96 (none parsed there)
        "output": str(tmp_path / "out"), "sources": sources, "model": {"spec": "vllm/embedded"},
        "extraction": {"max_tokens": 160}, "concurrency": 16,
        "risk": {"enabled": True},  # beyond the paper: each card's crisis-risk level, labelled from its source
    }, base_dir=SAMPLES)
    model = get_chat_model("vllm/embedded")
    started = time.perf_counter()
    asyncio.run(model.chat([ChatMessage(role="user", content="Hello")], GenerationParams(max_tokens=1)))
    engine_start_s = time.perf_counter() - started  # kept out of the stage timings below
    res = build_cards(cfg, model, show_progress=False)
    n_items = 3 + 1 + 1 + 2 + 2 + (1 if FAILED_ESCONV.exists() else 0)
    assert sum(res.counts["Read"].values()) == n_items
    extract = [json.loads(x) for x in (res.output / "stages" / "extract.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(extract) == n_items
    assert {r["status"] for r in extract} <= {"ok", "rejected"}  # every item got a final, explained outcome
    assert all(r["raw"] for r in extract) and all(r.get("reason") for r in extract if r["status"] == "rejected")
    ok = [r for r in extract if r["status"] == "ok"]
    assert ok  # the checks below run on real cards, not on none
    for r in ok:
        f = r["fields"]
        vocab_age = {"teenage", "young", "middle-aged", "old", "not mentioned", "少年", "青年", "中年", "老年", "未提及"}
        assert f["age"] in vocab_age and f["gender"] in {"male", "female", "not mentioned", "男", "女", "未提及"}
    filt = [json.loads(x) for x in (res.output / "stages" / "filter.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(filt) == len(ok)
    assert {r["status"] for r in filt} <= {"kept", "discarded"}  # constrained: always one of the four answers
    cards = load_cards(res.cards_path)
    assert len(cards) == sum(res.counts["Cards"].values()) == sum(res.counts["Dedup"].values())
    classify = [json.loads(x) for x in (res.output / "stages" / "classify.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(r["method"] == "llm" for r in classify)  # constrained answers always parse strictly
    assert all(c.category_3 for c in cards)
    risk = [json.loads(x) for x in (res.output / "stages" / "risk.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(risk) == len(classify) and all(r["status"] == "ok" and r["method"] == "llm" for r in risk)
    assert all(c.risk_level in RISK_LEVELS for c in cards)  # constrained answers always parse
    official = load_cards(res.official_path)
    assert [(c.id, c.problem) for c in official] == [(c.id, c.problem) for c in cards]

    again = build_cards(cfg, model, show_progress=False)  # resume: nothing left to do
    for stage in ("extract", "filter", "classify", "risk"):
        assert again.timings[stage]["done"] == 0
    assert again.counts == res.counts

    measured = {"items": n_items, "engine_start_s": round(engine_start_s, 1), "counts": res.counts,
                **{s: res.timings[s] for s in ("extract", "filter", "classify", "risk")},
                "total_seconds": res.timings["total_seconds"], "sample_cards": [c.text for c in cards[:3]],
                "risk_levels": {c.id: c.risk_level for c in cards}}
    Path(MEASURE).write_text(json.dumps(measured, ensure_ascii=False, indent=1), encoding="utf-8")
