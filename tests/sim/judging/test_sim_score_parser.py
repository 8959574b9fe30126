import math

import pytest

from esc_eval.sim.judging.score_parser import distribution, parse_compat, parse_score, parse_strict


@pytest.mark.parametrize("reply,official", [
    ("3", 3), ("Score: 3", 3), ("10", 0), ("3/4", 3), ("no digit", None), ("4\n", 4), ("I'd say 2 or 3", 2),
])
def test_compat_reproduces_score_py_first_label_rule(reply, official):
    # score.py: for label in "01234": if label in response -> that label; else -1 (here: null)
    parsed = parse_compat(reply)
    assert parsed.score == official
    assert parsed.status == ("ok" if official is not None else "parse_failure")


@pytest.mark.parametrize("reply,score", [("3", 3), (" 4 ", 4), ("2.", 2), ("0。", 0), ("1\n", 1)])
def test_strict_accepts_one_score(reply, score):
    assert parse_strict(reply).score == score


@pytest.mark.parametrize("reply", ["Score: 3", "10", "3/4", "no digit", "", "5", "3 and 4", "-1"])
def test_strict_rejects_ambiguous_answers_without_inventing_zero(reply):
    p = parse_strict(reply)
    assert p.score is None and p.status == "parse_failure"


def test_parse_score_unknown_parser():
    with pytest.raises(ValueError, match="unknown score parser"):
        parse_score("3", "lenient")


def test_distribution_renormalises_over_labels():
    probs = distribution({"1": math.log(0.02), "0": math.log(0.01), " 3": math.log(0.01), "A": math.log(0.9)})
    assert probs is not None and abs(sum(probs) - 1) < 1e-9
    assert probs[1] == pytest.approx(0.5) and probs[0] == pytest.approx(0.25) and probs[3] == pytest.approx(0.25)
    assert probs[2] == 0.0 and probs[4] == 0.0
    assert distribution({"A": -0.1}) is None
