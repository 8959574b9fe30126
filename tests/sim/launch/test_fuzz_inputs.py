"""Fuzzed inputs (hypothesis): card files (ours and official), configs, official dialogue and score
JSON, judge answers, annotation tables. Every input is either accepted or refused with one line (a
ValueError subclass) naming the file; never a traceback; the input file is never modified."""
import json
import math
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from esc_eval.serve.config import load_config
from esc_eval.sim.cards.card import CardError, RoleCard, load_cards
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.judging.score_parser import distribution, parse_score
from esc_eval.sim.runs.official import read_official_dialogues

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text(max_size=30)
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4),
                           max_leaves=12)
CARD_FIELDS = ["id", "language", "age", "gender", "occupation", "problem", "category_1", "category_3", "quality",
               "source", "base", "res"]
card_like = st.dictionaries(st.sampled_from(CARD_FIELDS),
                            scalars | st.sampled_from(["en", "zh", "english", "chinese", "Problem: I lost my job.",
                                                       "年龄：青年\n问题：失业了", "Age: young\nGender: male"]),
                            max_size=8)
card_files = st.lists(card_like, max_size=4) | json_values | st.dictionaries(st.just("cards"), json_values, max_size=1)


def check(fn, path: Path):
    """Run fn on the file at path: accepted, or one-line ValueError naming the file; file unchanged."""
    before = path.read_bytes()
    try:
        result = fn(path)
    except ValueError as e:
        msg = str(e).strip()
        assert msg and "\n" not in msg, f"not one line: {msg!r}"
        assert str(path) in msg or path.name in msg, f"does not name the file: {msg!r}"
        result = e
    except Exception as e:  # noqa: BLE001 - this is what the test is looking for
        pytest.fail(f"traceback instead of a one-line refusal: {type(e).__name__}: {e}")
    assert path.read_bytes() == before
    return result


def write(tmp: str, name: str, data, fmt: str) -> Path:
    p = Path(tmp) / name
    if fmt == "yaml":
        p.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    elif fmt == "jsonl":
        items = data if isinstance(data, list) else [data]
        p.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in items), encoding="utf-8")
    elif fmt == "bytes":
        p.write_bytes(data)
    else:
        p.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return p


@FUZZ
@given(data=card_files, fmt=st.sampled_from(["json", "yaml", "jsonl"]))
def test_card_files_are_loaded_or_refused_in_one_line(data, fmt):
    with tempfile.TemporaryDirectory() as tmp:
        p = write(tmp, f"cards.{fmt}", data, fmt)
        result = check(load_cards, p)
        if isinstance(result, list):
            assert result and all(isinstance(c, RoleCard) for c in result)
        else:
            assert isinstance(result, CardError)


@FUZZ
@given(raw=st.binary(max_size=200), suffix=st.sampled_from([".json", ".yaml", ".jsonl"]))
def test_card_files_of_arbitrary_bytes(raw, suffix):
    with tempfile.TemporaryDirectory() as tmp:
        check(load_cards, write(tmp, "cards" + suffix, raw, "bytes"))


@pytest.mark.parametrize("content", ["", "[]", "{}", "cards: []", "\n", "null"])
@pytest.mark.parametrize("suffix", [".json", ".yaml", ".jsonl"])
def test_an_empty_card_file_is_refused(tmp_path, content, suffix):
    p = tmp_path / f"cards{suffix}"
    p.write_text(content)
    with pytest.raises(CardError, match=str(p)):
        load_cards(p)


config_keys = st.sampled_from(["cards", "targets", "role", "strategies", "seeds", "rounds", "execution", "limit",
                               "languages", "judge", "input", "bogus"])
exec_like = st.dictionaries(st.sampled_from(["executor", "workers", "concurrency", "flush_rows", "env", "retry_failed",
                                             "placement_timeout_s"]), scalars, max_size=4)
config_like = st.dictionaries(config_keys, json_values | exec_like, max_size=5) | json_values


@FUZZ
@given(data=config_like, cls=st.sampled_from([SimulationConfig, ScoringConfig]))
@example(data={"\n": None}, cls=SimulationConfig)  # a key holding a line break (found by hypothesis)
def test_configs_are_loaded_or_refused_in_one_line(data, cls):
    with tempfile.TemporaryDirectory() as tmp:
        check(lambda p: load_config(p, cls), write(tmp, "run.yaml", data, "yaml"))


dialogue_lines = st.lists(st.sampled_from(["AI assistant：hi", "ESC-Role：I feel bad", "AI assistant:x", "nothing"])
                          | scalars, max_size=12)
official_dialogues = st.dictionaries(st.text(max_size=4), dialogue_lines, max_size=3) | json_values


@FUZZ
@given(data=official_dialogues)
def test_official_dialogue_json_is_read_or_refused_in_one_line(data):
    with tempfile.TemporaryDirectory() as tmp:
        check(read_official_dialogues, write(tmp, "Qwen_7B_en.json", data, "json"))


official_scores = st.dictionaries(st.text(max_size=4), st.dictionaries(
    st.sampled_from(["fluency", "diversity", "empathy", "human", "bogus"]), scalars, max_size=3) | scalars,
    max_size=3) | json_values


@FUZZ
@given(data=official_scores)
def test_official_score_json_is_read_or_refused_in_one_line(data):
    from esc_eval.analysis.results.loaders import load_official_scores

    with tempfile.TemporaryDirectory() as tmp:
        check(load_official_scores, write(tmp, "Qwen_7B_en.json", data, "json"))


annotation_rows = st.lists(st.dictionaries(st.sampled_from(["dialogue_id", "dimension", "score", "annotator", "text"]),
                                           scalars, max_size=5) | scalars, max_size=4) | json_values


@FUZZ
@given(data=annotation_rows, fmt=st.sampled_from(["json", "jsonl"]))
def test_annotation_tables_are_read_or_refused_in_one_line(data, fmt):
    from esc_eval.train.data.annotations import load_annotations

    with tempfile.TemporaryDirectory() as tmp:
        check(load_annotations, write(tmp, f"ann.{fmt}", data, fmt))


@FUZZ
@given(text=st.text(max_size=50) | st.none(), parser=st.sampled_from(["strict", "compat"]))
def test_judge_answers_parse_to_a_score_or_a_parse_failure(text, parser):
    parsed = parse_score(text, parser)
    assert (parsed.status == "ok" and parsed.score in range(5)) or (parsed.status == "parse_failure" and parsed.score is None)


@FUZZ
@given(top=st.dictionaries(st.sampled_from(["0", "1", " 2", "3", "4", "x", "5"]),
                           st.floats(allow_nan=True, allow_infinity=True), max_size=7))
def test_judge_logprobs_give_a_distribution_or_none(top):
    probs = distribution(top)
    if probs is not None:
        assert len(probs) == 5 and all(0 <= p <= 1 for p in probs) and math.isclose(sum(probs), 1.0, rel_tol=1e-6)
