"""Text metrics of run dialogues against reference replies (`esc-eval analysis text-metrics`).

References: a JSON object mapping a dialogue id or a card id to the reference replies in turn
order, e.g. the ESConv supporter's replies of the dialogue a card was built from. A card id applies
to every dialogue played on that card; a dialogue id wins over its card id.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from esc_eval.analysis.results.loaders import AnalysisInputError
from esc_eval.analysis.textmetrics.metrics import METRIC_NAMES, corpus_text_metrics, dialogue_text_metrics


def load_references(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AnalysisInputError(f"{path}: not readable as JSON ({e})") from e
    if not isinstance(data, dict) or not all(isinstance(v, list) and all(isinstance(s, str) for s in v)
                                             for v in data.values()):
        raise AnalysisInputError(f"{path}: expected {{\"<dialogue or card id>\": [\"reply 1\", \"reply 2\", ...]}}")
    return {str(k): v for k, v in data.items()}


def references_by_dialogue(dialogues: pd.DataFrame, references: dict[str, list[str]]) -> dict[str, list[str]]:
    out = {}
    for did, card in zip(dialogues["dialogue_id"], dialogues["card_id"].astype(str)):
        refs = references.get(did) or references.get(card)
        if refs:
            out[did] = refs
    return out


def run_text_metrics(dialogues: pd.DataFrame, references: dict[str, list[str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-dialogue metrics, per model and language corpus metrics: BLEU-1/2/4, Distinct-1/2, ROUGE-L, METEOR)."""
    ok = dialogues[dialogues["status"] == "ok"]
    refs = references_by_dialogue(ok, references)
    if not refs:
        raise AnalysisInputError("no dialogue has references (keys must be dialogue ids or card ids)")
    pair_rows: dict = {}
    per = dialogue_text_metrics(ok, refs, pairs_out=pair_rows)
    rows = []
    for (model, lang), g in ok[ok["dialogue_id"].isin(refs)].groupby(["target_model", "language"]):
        hyps, rs, scored = [], [], []
        for did, turns in zip(g["dialogue_id"], g["turns"]):
            replies = [t["text"] for t in turns if t["speaker"] == "assistant"][1:]  # after the fixed greeting
            for h, r in zip(replies, refs[did]):
                hyps.append(h)
                rs.append(r)
            if did in pair_rows:
                scored.append(pair_rows[did])
        if hyps:
            # The pairs' ROUGE-L and METEOR were computed for the per-dialogue table: reuse them.
            known = pd.concat(scored, ignore_index=True) if scored else None
            rows.append({"target_model": model, "language": lang,
                         **corpus_text_metrics(hyps, rs, lang, per_pair=known if known is not None and len(known) == len(hyps) else None)})
    return per, pd.DataFrame(rows)


def text_metrics_markdown(corpus: pd.DataFrame) -> str:
    names = {"bleu1": "BLEU-1", "bleu2": "BLEU-2", "bleu4": "BLEU-4", "distinct1": "Distinct-1", "distinct2": "Distinct-2",
             "rouge_l": "ROUGE-L", "meteor": "METEOR"}
    cols = [c for c in names if c in corpus.columns]
    lines = ["| Model | Lang | pairs | " + " | ".join(names[c] for c in cols) + " |", "|---|---|---:|" + "---:|" * len(cols)]
    for r in corpus.to_dict(orient="records"):
        lines.append(f"| {r['target_model']} | {r['language']} | {r['n']} | "
                     + " | ".join(f"{r[c]:.2f}" for c in cols) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["METRIC_NAMES", "load_references", "references_by_dialogue", "run_text_metrics", "text_metrics_markdown"]


def text_metrics_of_runs(run_dirs: list[str], references: str | os.PathLike[str],
                         out: str | None = None) -> tuple[str, dict[str, str]]:
    """`esc-eval analysis text-metrics`: the metrics of the runs' assistant replies against the references
    (load_references), text_metrics.md/.json and text_metrics_per_dialogue.csv written into `out` (default
    <first run>/report); the Markdown and the paths."""
    from esc_eval.analysis.results.loaders import load_dialogues
    from esc_eval.analysis.results.outputs import records, report_folder, write_markdown_json

    per, corpus = run_text_metrics(load_dialogues(run_dirs), load_references(references))
    md = text_metrics_markdown(corpus)
    paths = write_markdown_json(report_folder(run_dirs, out), "text_metrics",
                                "# Text metrics against references\n\n" + md, {"corpus": records(corpus)},
                                extra={"text_metrics_per_dialogue.csv": lambda p: per.to_csv(p, index=False)})
    return md, {"markdown": paths["markdown"], "json": paths["json"], "per_dialogue": paths["text_metrics_per_dialogue.csv"]}
