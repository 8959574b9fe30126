"""`bench rubric` on the fake judge (the embedded judge's figures: docs/guides/rescoring.md, from the command
a reader can rerun): both modes score one run folder through the service's path, and the reading half
gives a kappa per dimension with its interval and the prompt tokens each mode spent per dialogue."""
from __future__ import annotations

import pytest

from esc_eval.analysis.bench.rubric import rubric_agreement
from esc_eval.sim.bench.loops.rubric import bench_rubric_scoring
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def test_both_modes_side_by_side_then_their_agreement_and_tokens(tmp_path):
    from esc_eval.analysis.results.fake_runs import write_fake_run

    source = write_fake_run(tmp_path / "src", 6, models=["fake/echo"])
    scored = bench_rubric_scoring(dialogues=6, sources=[source], model="fake/judge", folder=tmp_path / "bench")
    assert scored["dialogues"] == 6 and set(scored["judges"]) == {"per_dimension", "one_call"}
    got = rubric_agreement(scored["run_dir"], scored["judges"]["per_dimension"], scored["judges"]["one_call"], n_boot=100)
    assert [d["dimension"] for d in got["dimensions"]] == DIMENSION_NAMES
    for d in got["dimensions"]:
        assert d["n"] == 6 and 0 <= d["exact_agreement"] <= 1
        assert d["kappa"] is None or d["kappa_lo"] <= d["kappa"] <= d["kappa_hi"]
    per, one = got["modes"]["per_dimension"], got["modes"]["one_call"]
    assert per["calls_per_dialogue"] == 7 and one["calls_per_dialogue"] == 1
    assert 0 < got["prompt_token_saving"] < 1 and one["prompt_tokens_per_dialogue"] < per["prompt_tokens_per_dialogue"]
    assert per["unscored"] == one["unscored"] == 0
    for d in got["dimensions"]:
        assert ("by construction" in d["note"]) == (d["kappa"] == 0.0 and d["kappa_lo"] == d["kappa_hi"] == 0.0)
    with pytest.raises(ValueError, match="needs rows of both judges"):
        rubric_agreement(scored["run_dir"], "nobody", scored["judges"]["one_call"])
