import gzip
import json
from pathlib import Path

import pandas as pd
import pytest
from sacrebleu.metrics import BLEU

from esc_eval.analysis.textmetrics.metrics import (
    corpus_text_metrics,
    dialogue_text_metrics,
    distinct_n,
    pair_metrics,
    text_metrics,
    tokenize,
)
from esc_eval.analysis.textmetrics.wordnet import DEBIAN_WORDNET, LEXNAMES, prepare_wordnet_dir, wordnet_reader

from analysis_testdata import SHARED, dialogue_row

needs_wordnet = pytest.mark.skipif(not (DEBIAN_WORDNET / "data.noun").exists(),
                                   reason="Debian package wordnet-base is not installed")


def test_tokenize_en_and_zh():
    assert tokenize("I don't KNOW, really!") == ["i", "don't", "know", "really"]
    assert tokenize("我很难过 OK", "zh") == ["我", "很", "难", "过", "ok"]
    assert tokenize("我很难过", "auto") == ["我", "很", "难", "过"]
    # a Chinese reply on an English card: its characters are tokens (Distinct was NaN before)
    assert tokenize("我很难过, ok", "en") == ["我", "很", "难", "过", "ok"]
    assert distinct_n([tokenize("我很难过", "en")], 1) == 100.0
    with pytest.raises(ValueError, match="unsupported language"):
        tokenize("x", "fr")


def test_distinct_by_hand():
    toks = [["a", "b", "a"], ["a", "c"]]
    assert distinct_n(toks, 1) == pytest.approx(100 * 3 / 5)
    assert distinct_n(toks, 2) == pytest.approx(100 * 3 / 3)
    assert distinct_n([["a"]], 2) != distinct_n([["a"]], 2)  # NaN: no bigram at all


def test_bleu_and_rouge_against_the_libraries_by_hand():
    hyp, ref = "the cat sat on the mat today", "the cat is on the mat"
    m = pair_metrics(hyp, ref)
    assert m["bleu1"] == pytest.approx(BLEU(max_ngram_order=1, effective_order=True).sentence_score(hyp, [ref]).score)
    assert m["bleu4"] == pytest.approx(BLEU(max_ngram_order=4, effective_order=True).sentence_score(hyp, [ref]).score)
    # LCS("the cat sat on the mat today", "the cat is on the mat") = the cat on the mat = 5
    p, r = 5 / 7, 5 / 6
    assert m["rouge_l"] == pytest.approx(100 * 2 * p * r / (p + r))
    same = pair_metrics(ref, ref)
    assert same["bleu4"] == pytest.approx(100.0) and same["rouge_l"] == pytest.approx(100.0)


def test_chinese_is_scored_on_characters():
    m = pair_metrics("我今天很难过", "我今天很开心", "zh")
    # 4 of 6 characters match in order: ROUGE-L F = 4/6
    assert m["rouge_l"] == pytest.approx(100 * 4 / 6)
    assert m["bleu1"] == pytest.approx(100 * 4 / 6)


@needs_wordnet
def test_wordnet_folder_reads_offline_and_lexnames_match_the_man_page(tmp_path):
    root = prepare_wordnet_dir(cache_dir=tmp_path / "wn")
    assert (root / "lexnames").read_text().splitlines()[18] == "18\tnoun.person\t1"
    man = Path("/usr/share/man/man5/lexnames.5WN.gz")
    if man.exists():
        lines = [ln.split("\t") for ln in gzip.open(man, "rt").read().splitlines() if ln[:2].isdigit() and "\t" in ln]
        assert [ln[1].strip() for ln in lines] == LEXNAMES
    wn = wordnet_reader(cache_dir=str(tmp_path / "wn"))
    assert "glad" in {l.name() for s in wn.synsets("happy") for l in s.lemmas()}
    assert wn.synsets("dog")[0].lexname() == "noun.animal"


@needs_wordnet
def test_meteor_uses_synonyms():
    # nltk matches synonyms against the Porter stems of the reference words, so pick stem-stable
    # words: "car" has the WordNet synonym "auto" (stem "auto").
    with_wn = text_metrics(["i bought a car today"], ["i bought an auto today"])
    assert bool(with_wn["meteor_wordnet"].iloc[0])
    from esc_eval.analysis.textmetrics.metrics import meteor
    no_syn = meteor(tokenize("i bought a car today"), tokenize("i bought an auto today"), wordnet=None)
    assert with_wn["meteor"].iloc[0] > no_syn > 0


def test_corpus_metrics_and_length_mismatch():
    out = corpus_text_metrics(["a b c d", "a b e f"], ["a b c d", "x y z w"])
    assert out["bleu1"] == pytest.approx(BLEU(max_ngram_order=1, tokenize="none").corpus_score(
        ["a b c d", "a b e f"], [["a b c d", "x y z w"]]).score)
    assert out["distinct1"] == pytest.approx(100 * 6 / 8) and out["n"] == 2
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        text_metrics(["a", "b"], ["a"])


def test_dialogue_text_metrics_pairs_assistant_turns_with_references():
    d = pd.DataFrame([dialogue_row("d1", "m", seeker=["s1", "s2"]), dialogue_row("d2", "m")])
    d["turns"] = [[{"speaker": "assistant", "text": "hello"}, {"speaker": "seeker", "text": "s1"},
                   {"speaker": "assistant", "text": "you sound very tired"}, {"speaker": "seeker", "text": "s2"},
                   {"speaker": "assistant", "text": "what happened at work"}], d["turns"][1]]
    out = dialogue_text_metrics(d, {"d1": ["you sound very tired", "tell me more", "extra ref"]})
    assert out["dialogue_id"].tolist() == ["d1"] and out["n_pairs"].item() == 2
    assert out["rouge_l"].item() == pytest.approx((100 + 0) / 2)


@pytest.mark.skipif(not (SHARED / "data" / "esconv" / "FailedESConv.json").exists(), reason="shared ESConv sample absent")
def test_esconv_supporter_turns_against_themselves_and_each_other():
    data = json.loads((SHARED / "data" / "esconv" / "FailedESConv.json").read_text())
    sup = [t["content"] for t in data[0]["dialog"] if t["speaker"] == "listener"][:6]
    assert len(sup) == 6
    assert corpus_text_metrics(sup, sup)["bleu4"] == pytest.approx(100.0)
    shifted = corpus_text_metrics(sup[1:], sup[:-1])
    assert 0 <= shifted["bleu4"] < 50 and 0 < shifted["distinct1"] <= 100


def test_run_text_metrics_scores_each_pair_once_with_the_same_numbers(monkeypatch):
    # text-metrics on 8,500 dialogues scored every (reply, reference) pair twice (per dialogue, then
    # again for the corpus table) and stemmed / looked up every word again in each METEOR call.
    import importlib

    tm = importlib.import_module("esc_eval.analysis.textmetrics.metrics")
    from esc_eval.analysis.textmetrics.runs import run_text_metrics

    rows = [dialogue_row(f"d{i}", m, card_id=f"c{i}", seeker=["s1", "s2"]) for i, m in
            enumerate(["m1", "m1", "m2"])]
    d = pd.DataFrame(rows)
    replies = ["you sound very tired and worried", "what happened at work today", "tell me more about it"]
    d["turns"] = [[{"speaker": "assistant", "text": "hello"}, {"speaker": "seeker", "text": "s1"},
                   {"speaker": "assistant", "text": replies[i]}, {"speaker": "seeker", "text": "s2"},
                   {"speaker": "assistant", "text": replies[(i + 1) % 3]}] for i in range(3)]
    refs = {f"c{i}": ["you seem tired", "what happened at your job"] for i in range(3)}
    calls = []
    real = tm.pair_metrics
    monkeypatch.setattr(tm, "pair_metrics", lambda *a, **k: calls.append(a[:2]) or real(*a, **k))
    per, corpus = run_text_metrics(d, refs)
    assert len(calls) == 6 and len(set(calls)) == 6  # 3 dialogues x 2 pairs, each once
    c = corpus.set_index("target_model")
    direct = corpus_text_metrics([replies[0], replies[1], replies[1], replies[2]],
                                 ["you seem tired", "what happened at your job"] * 2)
    for k in ("bleu1", "bleu4", "distinct1", "rouge_l", "meteor"):
        assert c.loc["m1", k] == pytest.approx(direct[k])
    assert per["n_pairs"].tolist() == [2, 2, 2]
