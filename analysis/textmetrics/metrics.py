"""Reference-based text metrics of the paper's Table 3: BLEU-1/2/4, Distinct-1/2, ROUGE-L, METEOR.

All metrics share one tokenisation so the languages are comparable: English is lower-cased
words, Chinese is one token per Han character (plus Latin words), the usual choice for
Chinese BLEU. Scores are on 0-100.
- BLEU-n: sacrebleu with max_ngram_order=n (cumulative, geometric mean of 1..n-gram
  precisions with brevity penalty; sentence level uses sacrebleu's default exp smoothing).
- ROUGE-L: rouge-score's LCS F-measure, fed our tokens (its own tokenizer drops Chinese).
- METEOR: nltk's meteor_score with English WordNet from Debian's wordnet-base (see
  analysis.textmetrics.wordnet for why it needs a prepared folder). If WordNet is missing, METEOR is
  computed with exact and stem matches only and the result says so (`meteor_wordnet` False).
  For Chinese, WordNet synonyms never apply (characters), so METEOR is exact matching there.
  (nltk quirk: its synonym stage compares against the Porter stems of unmatched reference
  words, so a synonym whose stem differs from the word, e.g. happy -> "happi", is not matched.)
- Distinct-n: distinct n-grams / all n-grams of the responses (Li et al., 2016).
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError

METRIC_NAMES = ["bleu1", "bleu2", "bleu4", "distinct1", "distinct2", "rouge_l", "meteor"]
_HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = {
    # Han characters count as tokens in English text too: a reply in Chinese to an English card
    # gets Distinct-n and overlaps from its characters, not NaN from no tokens at all.
    "en": re.compile(rf"[a-z0-9]+(?:'[a-z]+)?|[{_HAN}]"),
    "zh": re.compile(rf"[{_HAN}]|[a-z0-9]+"),
}


def detect_language(text: str) -> str:
    han = len(re.findall(rf"[{_HAN}]", text))
    return "zh" if han and han >= 0.3 * len(re.findall(r"\S", text)) else "en"


def tokenize(text: str, language: str = "en") -> list[str]:
    """Lower-cased word tokens ("en") or Han characters + Latin words ("zh"); "auto" detects."""
    if language == "auto":
        language = detect_language(text)
    if language not in _TOKEN:
        raise ValueError(f"unsupported language {language!r}; expected en, zh or auto")
    return _TOKEN[language].findall(text.lower())


def distinct_n(token_lists: Sequence[Sequence[str]], n: int) -> float:
    """Distinct n-grams / total n-grams over all the given responses, x100 (NaN if none)."""
    grams = [tuple(t[i:i + n]) for t in token_lists for i in range(len(t) - n + 1)]
    return 100.0 * len(set(grams)) / len(grams) if grams else float("nan")


@lru_cache(maxsize=4)
def _bleu(order: int):
    from sacrebleu.metrics import BLEU

    # tokenize="none": we pass our own tokens joined by spaces.
    return BLEU(max_ngram_order=order, tokenize="none", effective_order=True)


class _SpaceTokenizer:
    """rouge-score tokenizer over already-tokenised, space-joined text."""

    def tokenize(self, text: str) -> list[str]:
        return text.split()


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], tokenizer=_SpaceTokenizer())


def _wordnet():
    from esc_eval.analysis.textmetrics.wordnet import WordNetUnavailable, wordnet_reader

    try:
        return wordnet_reader()
    except WordNetUnavailable:
        return None


class _NoSynonyms:
    """Stands in for WordNet when it is unavailable: METEOR then uses exact + stem matches."""

    def synsets(self, *args, **kwargs):
        return []


class _Memo:
    """Memoises a word -> value lookup (nltk's METEOR stems and looks up the synonyms of every word
    of every pair again: 80% of text-metrics' time on 8,500 dialogues). Same results."""

    def __init__(self, fn, limit: int = 200_000):
        self.fn, self.limit, self.cache = fn, limit, {}

    def __call__(self, word, *args, **kwargs):
        if args or kwargs:
            return self.fn(word, *args, **kwargs)
        hit = self.cache.get(word)
        if hit is None:
            if len(self.cache) >= self.limit:
                self.cache.clear()
            hit = self.cache[word] = self.fn(word)
        return hit


class _MemoStemmer:
    def __init__(self):
        from nltk.stem.porter import PorterStemmer

        self.stem = _Memo(PorterStemmer().stem)


class _MemoWordNet:
    def __init__(self, wordnet):
        self.synsets = _Memo(wordnet.synsets)


@lru_cache(maxsize=8)
def _meteor_helpers(wordnet) -> tuple[_MemoStemmer, object]:
    return _MemoStemmer(), _MemoWordNet(wordnet if wordnet is not None else _NoSynonyms())


def meteor(hyp: list[str], ref: list[str], wordnet=None) -> float:
    from nltk.translate.meteor_score import meteor_score

    if not hyp or not ref:
        return 0.0
    stemmer, wn = _meteor_helpers(wordnet)
    return 100.0 * meteor_score([ref], hyp, stemmer=stemmer, wordnet=wn)


def pair_metrics(hyp: str, ref: str, language: str = "en", wordnet=None) -> dict[str, float]:
    """All metrics of one response against one reference."""
    h, r = tokenize(hyp, language), tokenize(ref, language)
    hs, rs = " ".join(h), " ".join(r)
    out = {f"bleu{n}": _bleu(n).sentence_score(hs, [rs]).score if h else 0.0 for n in (1, 2, 4)}
    out["distinct1"], out["distinct2"] = distinct_n([h], 1), distinct_n([h], 2)
    out["rouge_l"] = 100.0 * _rouge().score(rs, hs)["rougeL"].fmeasure if h and r else 0.0
    out["meteor"] = meteor(h, r, wordnet)
    return out


def text_metrics(hypotheses: Sequence[str], references: Sequence[str], language: str = "en") -> pd.DataFrame:
    """Sample-level metrics, one row per (hypothesis, reference) pair, plus `meteor_wordnet`."""
    if len(hypotheses) != len(references):
        raise AnalysisInputError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    wn = _wordnet()
    rows = [pair_metrics(h, r, language, wn) for h, r in zip(hypotheses, references)]
    df = pd.DataFrame(rows, columns=METRIC_NAMES)
    df["meteor_wordnet"] = wn is not None
    return df


def corpus_text_metrics(hypotheses: Sequence[str], references: Sequence[str], language: str = "en",
                        per_pair: pd.DataFrame | None = None) -> dict:
    """Corpus-level BLEU (sacrebleu corpus_score), Distinct over all responses, mean ROUGE-L and METEOR.

    per_pair: text_metrics of these pairs when already computed (run_text_metrics passes them:
    each pair is scored once)."""
    if len(hypotheses) != len(references):
        raise AnalysisInputError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise AnalysisInputError("no hypotheses")
    toks_h = [tokenize(h, language) for h in hypotheses]
    toks_r = [tokenize(r, language) for r in references]
    hs, rs = [" ".join(t) for t in toks_h], [" ".join(t) for t in toks_r]
    out = {f"bleu{n}": _bleu(n).corpus_score(hs, [rs]).score for n in (1, 2, 4)}
    out["distinct1"], out["distinct2"] = distinct_n(toks_h, 1), distinct_n(toks_h, 2)
    per = per_pair if per_pair is not None else text_metrics(hypotheses, references, language)
    if len(per) != len(hypotheses):
        raise AnalysisInputError(f"{len(per)} per-pair rows for {len(hypotheses)} hypotheses")
    out["rouge_l"], out["meteor"] = float(per["rouge_l"].mean()), float(per["meteor"].mean())
    out["meteor_wordnet"] = bool(per["meteor_wordnet"].iloc[0])
    out["n"] = len(hypotheses)
    return out


def dialogue_text_metrics(dialogues: pd.DataFrame, references: Mapping[str, Sequence[str]],
                          skip_greeting: bool = True, pairs_out: dict | None = None) -> pd.DataFrame:
    """Per-dialogue means of the metrics of the assistant's turns against reference responses.

    references: dialogue_id -> reference responses in turn order (e.g. the ESConv supporter's
    replies to the same seeker turns). The k-th assistant reply (after the fixed greeting when
    skip_greeting) is compared with the k-th reference; extra turns on either side are ignored
    and counted in `n_pairs`. Dialogues without references are left out. The result joins
    directly onto human scores in analysis.trust.correlation.correlation_table. pairs_out, if given,
    receives dialogue_id -> the per-pair metrics (for corpus_text_metrics without recomputing).
    """
    rows = []
    for _, d in dialogues.iterrows():
        refs = references.get(d["dialogue_id"])
        if not refs:
            continue
        replies = [t["text"] for t in d["turns"] if t["speaker"] == "assistant"]
        if skip_greeting and replies:
            replies = replies[1:]
        pairs = list(zip(replies, refs))
        if not pairs:
            continue
        lang = d.get("language") if d.get("language") in _TOKEN else "auto"
        m = text_metrics([p[0] for p in pairs], [p[1] for p in pairs], lang)
        if pairs_out is not None:
            pairs_out[d["dialogue_id"]] = m
        row = {"dialogue_id": d["dialogue_id"], "target_model": d.get("target_model"), "language": d.get("language"),
               "n_pairs": len(pairs), **m[METRIC_NAMES].mean().to_dict()}
        # Distinct-n of a dialogue is over all its replies together, not a mean of per-reply values.
        toks = [tokenize(p[0], lang) for p in pairs]
        row["distinct1"], row["distinct2"] = distinct_n(toks, 1), distinct_n(toks, 2)
        row["meteor_wordnet"] = bool(m["meteor_wordnet"].iloc[0])
        rows.append(row)
    return pd.DataFrame(rows, columns=["dialogue_id", "target_model", "language", "n_pairs"] + METRIC_NAMES
                        + ["meteor_wordnet"])
