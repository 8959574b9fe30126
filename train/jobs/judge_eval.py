"""Judge evaluation (paper Table 4): ACC and ACC_soft (|pred - gold| <= 1) per dimension, per
language and on average, for the base judge and the trained judge on the test split.

Scoring goes through the ChatModel seam (serve.chat.interface): method "logprob" asks for one token
constrained to "0".."4" with the top-20 log-probabilities and takes the argmax of P(0..4)
(restricted to the five digits and renormalised); "generate" takes greedy text and parses it
strictly (a bare digit 0-4, else unparsed). An unparsed or failed answer counts as wrong.
"""
from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSION_TITLES, SCORE_LABELS
from esc_eval.train.config import JUDGE_MAX_CONCURRENCY, JUDGE_METHOD
from esc_eval.train.data.judge_data import JudgeExample

_STRICT = re.compile(r"^\s*([0-4])\s*[.。]?\s*$")


@dataclass
class JudgePrediction:
    """One judged example."""

    dialogue_id: str
    dimension: str
    language: str
    judge: str
    gold: int
    pred: int | None
    probs: list[float] | None = None
    raw: str = ""
    error: str | None = None
    target_model: str = ""  # the dialogue's target (the score row's target_model)
    adapter: str | None = None  # the LoRA adapter it was scored with (None: the base weights)
    annotator: str = ""  # whose label `gold` is ("median": the annotators' low median)


def digit_probs(top_logprobs: dict[str, float] | None) -> list[float] | None:
    """P('0'..'4') from one position's top log-probs, renormalised over the digits present."""
    if not top_logprobs:
        return None
    vals = [None] * 5
    for tok, lp in top_logprobs.items():
        t = tok.strip()
        if t in SCORE_LABELS and (vals[int(t)] is None or lp > vals[int(t)]):
            vals[int(t)] = lp
    present = [v for v in vals if v is not None]
    if not present:
        return None
    m = max(present)
    ex = [math.exp(v - m) if v is not None else 0.0 for v in vals]
    s = sum(ex)
    return [e / s for e in ex]


def strict_parse(text: str) -> int | None:
    """A bare score 0-4 (optionally followed by a period), else None."""
    m = _STRICT.match(text or "")
    return int(m.group(1)) if m else None


async def score_examples(model, examples: Sequence[JudgeExample], judge: str,
                         adapter_for: Callable[[JudgeExample], str | None] = lambda e: None,
                         method: str = JUDGE_METHOD, rubric: str = "official", rendering: str = "official",
                         max_concurrency: int = JUDGE_MAX_CONCURRENCY, on_done: Callable[[], None] | None = None,
                         order: str = "rubric_first") -> list[JudgePrediction]:
    """Score every example with `model` (a serve.chat.interface.ChatModel); adapter_for picks the LoRA."""
    from esc_eval.serve.chat.interface import ChatMessage, GenerationParams

    if method == "logprob":
        params = GenerationParams(max_tokens=1, logprobs=20, choices=list(SCORE_LABELS), temperature=0.0)
    elif method == "generate":
        params = GenerationParams(max_tokens=8, temperature=0.0)
    else:
        raise ValueError(f"unknown scoring method {method!r} (logprob | generate)")
    sem = asyncio.Semaphore(max_concurrency)

    async def one(ex: JudgeExample) -> JudgePrediction:
        msgs = [ChatMessage(**m) for m in ex.messages(rubric, rendering, None, order)]
        async with sem:
            adapter = adapter_for(ex)
            try:
                res = await model.chat(msgs, params, adapter=adapter)
            except Exception as e:  # failures are data: an unscored row, never a crash
                pred = JudgePrediction(ex.dialogue_id, ex.dimension, ex.language, judge, ex.score, None,
                                       error=f"{type(e).__name__}: {e}", target_model=ex.target_model, adapter=adapter,
                                       annotator=ex.annotator)
                if on_done:
                    on_done()
                return pred
        probs = digit_probs(res.top_logprobs[0]) if (method == "logprob" and res.top_logprobs) else None
        pred_score = max(range(5), key=lambda k: probs[k]) if probs else strict_parse(res.text)
        if on_done:
            on_done()
        return JudgePrediction(ex.dialogue_id, ex.dimension, ex.language, judge, ex.score, pred_score,
                               probs=probs, raw=res.text, target_model=ex.target_model, adapter=adapter,
                               annotator=ex.annotator)

    return list(await asyncio.gather(*(one(e) for e in examples)))


def _acc(preds: Sequence[JudgePrediction]) -> dict[str, Any]:
    n = len(preds)
    hit = sum(1 for p in preds if p.pred is not None and p.pred == p.gold)
    soft = sum(1 for p in preds if p.pred is not None and abs(p.pred - p.gold) <= 1)
    unparsed = sum(1 for p in preds if p.pred is None)
    return {"n": n, "acc": 100.0 * hit / n if n else None, "acc_soft": 100.0 * soft / n if n else None,
            "unparsed": unparsed}


def accuracy_metrics(predictions: Iterable[JudgePrediction]) -> dict[str, Any]:
    """{judge: {dimension|"average": {language|"all": {n, acc, acc_soft, unparsed}}}} in percent.
    "average" is the mean of the per-dimension values (the paper's Aver. row)."""
    preds = list(predictions)
    out: dict[str, Any] = {}
    for judge in dict.fromkeys(p.judge for p in preds):
        jp = [p for p in preds if p.judge == judge]
        langs = sorted({p.language for p in jp})
        table: dict[str, Any] = {}
        for dim in [d for d in DIMENSION_NAMES if any(p.dimension == d for p in jp)]:
            dp = [p for p in jp if p.dimension == dim]
            table[dim] = {"all": _acc(dp), **{lang: _acc([p for p in dp if p.language == lang]) for lang in langs
                                             if any(p.language == lang for p in dp)}}
        avg: dict[str, Any] = {}
        for key in ["all", *langs]:
            cells = [table[d][key] for d in table if key in table[d] and table[d][key]["n"]]
            if cells:
                avg[key] = {"n": sum(c["n"] for c in cells),
                            "acc": sum(c["acc"] for c in cells) / len(cells),
                            "acc_soft": sum(c["acc_soft"] for c in cells) / len(cells),
                            "unparsed": sum(c["unparsed"] for c in cells)}
        table["average"] = avg
        out[judge] = table
    return out


def _fmt(cell: dict | None, key: str) -> str:
    return "-" if not cell or cell.get(key) is None else f"{cell[key]:.2f}"


def table4_markdown(metrics: dict[str, Any], languages: Sequence[str] | None = None) -> str:
    """Table 4 layout: one block per dimension, a row per judge, ACC and ACC_soft; with two
    languages the cells read 'zh/en' like the paper."""
    judges = list(metrics)
    if languages is None:
        found = {k for j in judges for d in metrics[j].values() for k in d if k != "all"}
        languages = [lang for lang in ("zh", "en") if lang in found] or ["all"]
    head = "/".join(languages) if len(languages) > 1 else ""
    lines = [f"| Dimension | Judge | ACC{(' (' + head + ')') if head else ''} | ACC_soft{(' (' + head + ')') if head else ''} | n |",
             "|---|---|---|---|---|"]
    dims = [d for d in DIMENSION_NAMES if any(d in metrics[j] for j in judges)] + ["average"]
    for dim in dims:
        title = DIMENSION_TITLES.get(dim, "Average")
        for i, judge in enumerate(judges):
            row = metrics[judge].get(dim, {})
            keys = languages if len(languages) > 1 else (["all"] if "all" in row else list(languages))
            acc = "/".join(_fmt(row.get(k), "acc") for k in keys)
            soft = "/".join(_fmt(row.get(k), "acc_soft") for k in keys)
            n = row.get("all", {}).get("n", "-")
            lines.append(f"| {title if i == 0 else ''} | {judge} | {acc} | {soft} | {n} |")
    return "\n".join(lines) + "\n"


LABELS_FILE = "test_labels.csv"


def write_evaluation(out_dir: Path, predictions: Sequence[JudgePrediction], method: str = JUDGE_METHOD) -> dict[str, Path]:
    """table4.json (metrics), table4.md and predictions.jsonl under out_dir; and the same predictions
    where the analysis reads a judge's scores: out_dir as a run folder of score rows (one judge id per
    judge: `base`, the adapter's registry name) beside test_labels.csv, the test split's labels as an
    annotation table, so `esc-eval analysis judge-accuracy OUT --human OUT/test_labels.csv --judge NAME`
    (and every analysis of scores against people's) reads the trained judge's test split. With the
    `median` aggregate (the default) its figures are table4.json's; with `each`, the labels are each
    annotator's and the analysis compares the judge with their mean."""
    out_dir.mkdir(parents=True, exist_ok=True)
    metrics = accuracy_metrics(predictions)
    paths = {"json": out_dir / "table4.json", "markdown": out_dir / "table4.md", "predictions": out_dir / "predictions.jsonl",
             "labels": out_dir / LABELS_FILE, "scores": out_dir / "scores"}
    paths["json"].write_text(json.dumps(metrics, indent=2), encoding="utf-8")
    paths["markdown"].write_text("Scoring performance on the test split (ACC: exact; ACC_soft: within one point), %.\n\n"
                                 + table4_markdown(metrics), encoding="utf-8")
    with paths["predictions"].open("w", encoding="utf-8") as f:
        for p in predictions:
            f.write(json.dumps(asdict(p), ensure_ascii=False) + "\n")
    _write_as_run(out_dir, predictions, method)
    return paths


def _write_as_run(out_dir: Path, predictions: Sequence[JudgePrediction], method: str) -> None:
    """The predictions as score rows (sim/runs/records.py) and their gold labels as a long annotation table."""
    import csv

    from esc_eval.sim.runs.records import score_row
    from esc_eval.sim.runs.runfolder import RunFolder, now_utc

    at = now_utc()
    rows = [score_row(run_id="judge-evaluation", dialogue_id=p.dialogue_id, target_model=p.target_model or None,
                      language=p.language, dimension=p.dimension, score=p.pred, probs=p.probs,
                      expected=sum(k * q for k, q in enumerate(p.probs)) if p.probs else None, raw=p.raw,
                      parse_status="error" if p.error else ("ok" if p.pred is not None else "parse_failure"),
                      judge=p.judge, method=method, parser="strict", error=p.error, scored_at=at, adapter=p.adapter)
            for p in predictions]
    run = RunFolder(out_dir)
    run.write_part("scores", rows)
    run.update_manifest(judge_evaluation={"split": "test", "judges": list(dict.fromkeys(p.judge for p in predictions)),
                                          "labels": LABELS_FILE, "method": method})
    labels = {(p.dialogue_id, p.dimension, p.annotator): p for p in predictions}  # each judge scored the same labels
    with (out_dir / LABELS_FILE).open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["dialogue_id", "dimension", "score", "annotator", "language", "target_model"])
        for (did, dim, annotator), p in labels.items():
            w.writerow([did, dim, p.gold, annotator or "annotator", p.language, p.target_model])
