"""Judge agreement with the released ESC-RANK scores: the figures, and the CLI on the release's
sample dialogues with a fake judge."""
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from esc_eval.analysis.trust.judge_agreement import judge_agreement
from esc_eval.analysis.results.loaders import AnalysisInputError, load_official_scores
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def frame(values, dimension="fluency", model="m", language="en"):
    return pd.DataFrame({"target_model": model, "language": language, "card_id": [str(i) for i in range(len(values))],
                         "dimension": dimension, "score": values})


def test_perfect_and_off_by_one_agreement():
    ref = frame([0, 1, 2, 3, 4, 2, 3, 1])
    same = judge_agreement(ref, ref, n_boot=200)["dimensions"]["fluency"]
    assert same["n"] == 8 and same["exact"]["value"] == 1 and same["within_one"]["value"] == 1
    assert same["spearman"]["value"] == pytest.approx(1) and same["kappa_quadratic"]["value"] == pytest.approx(1)
    shifted = judge_agreement(frame([1, 2, 3, 4, 4, 3, 4, 2]), ref, n_boot=200)["dimensions"]["fluency"]
    assert shifted["exact"]["value"] == pytest.approx(1 / 8) and shifted["within_one"]["value"] == 1
    assert shifted["kappa_quadratic"]["value"] < 1
    assert shifted["exact"]["lo"] <= shifted["exact"]["value"] <= shifted["exact"]["hi"]


def test_nothing_in_common_is_an_error():
    with pytest.raises(AnalysisInputError, match="no item was scored by both"):
        judge_agreement(frame([1, 2], model="a"), frame([1, 2], model="b"))


def test_cli_scores_the_released_dialogues_and_compares(shared_data, tmp_path):
    release = shared_data / "esc-eval"
    cfg = tmp_path / "score.yaml"
    cfg.write_text("execution: {executor: local}\njudge: {method: generate}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "esc_eval.cli", "analysis", "judge-agreement", "--dialogues", str(release / "dialogues"),
         "--scores", str(release / "scores"), "--judge", "fake/judge?score=3", "--config", str(cfg),
         "--out", str(tmp_path / "run"), "--n-boot", "100"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out["dimensions"]) == set(DIMENSION_NAMES) and out["n_items"] == 12
    ref = load_official_scores(release / "scores")
    for dim, figures in out["dimensions"].items():
        r = ref[ref["dimension"] == dim]["score"].dropna().to_numpy()
        assert figures["n"] == len(r)
        assert figures["exact"]["value"] == pytest.approx(np.mean(r == 3))  # the fake always answers 3
        assert figures["within_one"]["value"] == pytest.approx(np.mean(np.abs(r - 3) <= 1))
    assert "Weighted kappa" in proc.stderr
