"""analysis.textmetrics: automatic text metrics of dialogues against reference replies (the
paper's Tables 13-15): BLEU, ROUGE, METEOR and distinct-n per pair and per corpus (`metrics.py`),
over a run's dialogues (`runs.py`), with WordNet from Debian's package (`wordnet.py`).

Layer: above results; beside annotation and figures."""
from esc_eval.analysis.textmetrics.metrics import (corpus_text_metrics, dialogue_text_metrics, distinct_n, text_metrics,
                                                   tokenize)
from esc_eval.analysis.textmetrics.runs import load_references, run_text_metrics, text_metrics_markdown, text_metrics_of_runs

__all__ = ["text_metrics_of_runs", "corpus_text_metrics", "dialogue_text_metrics", "distinct_n", "load_references", "run_text_metrics",
           "text_metrics", "text_metrics_markdown", "tokenize"]
