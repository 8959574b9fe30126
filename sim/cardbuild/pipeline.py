"""The card-construction pipeline (Section 2.2, Appendix A, Figure 4), resumable.

    read sources -> extract (Fig. 6/7) -> LLM filter (Fig. 8) -> near-duplicate removal
    -> third-level classification -> (risk labelling, optional) -> cards.json -> annotation sheets -> (filled sheets)
    -> correction rules (A.2) -> reviewer sheet -> final_cards.json

Output folder:
    manifest.json             config, counts per stage and language, timings (items/s)
    items.jsonl               every source item read
    stages/extract.jsonl      one record per item (status ok | rejected | error)
    stages/filter.jsonl       kept | discarded | rejected | error
    stages/dedup.jsonl        the near-duplicates dropped (id, duplicate_of, similarity)
    stages/classify.jsonl     leaf id + method (llm | keyword-fallback | unclassified)
    stages/risk.jsonl         crisis-risk level + method (llm | unparsed), when `risk.enabled`
    rejected.jsonl            every item or file that stopped, with stage and reason
    cards.json / cards_official.json   the machine-built cards (RoleCard list / official JSON)
    annotation/               instructions.md, <annotator>.csv, <reviewer>.csv, report.json
    final_cards.json / final_cards_official.json   accepted cards with quality, after A.2

Re-running with the same config skips every item whose stage record is final (status "error"
is retried), so an interrupted build resumes, and a build re-run after the sheets are filled
only applies them. The LLM stages run in-process (asyncio) or inside one Ray task.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from esc_eval.serve.chat.interface import ChatModel, GenerationParams
from esc_eval.serve.devices.cpu import KV_CACHE_ENV, cpu_kv_cache_gib
from esc_eval.serve.registry.registry import build_chat_model
from esc_eval.serve.calls.retry import RetryingChatModel, RetryPolicy
import esc_eval.sim.cardbuild.review.annotation as ann
from esc_eval.sim.cardbuild.checkpoint import StageLog, atomic_write_text, read_jsonl, write_jsonl
from esc_eval.sim.cardbuild.stages.classify import (classification_messages, classify_reply, keyword_category, leaf_label,
                                             leaves_for)
from esc_eval.sim.cardbuild.config import CardBuildConfig
from esc_eval.sim.cardbuild.stages.dedup import find_near_duplicates
from esc_eval.sim.cardbuild.stages.extraction import extraction_messages
from esc_eval.sim.cardbuild.stages.fields import CardFieldsError, parse_card_fields
from esc_eval.sim.cardbuild.stages.filtering import filter_choices, filter_messages, parse_filter_reply, render_card
from esc_eval.sim.cardbuild.sources.items import Rejection, SourceItem
from esc_eval.sim.cardbuild.stages.risk import parse_risk_reply, risk_choices, risk_messages
from esc_eval.sim.cardbuild.runner import call_model, run_stage
from esc_eval.sim.cardbuild.sources.readers import ReadResult, read_source
from esc_eval.sim.cards.card import RoleCard, write_cards
from esc_eval.sim.cards.risk import RISK_LEVELS
from esc_eval.sim.cards.taxonomy import load_taxonomy

STAGES = ("extract", "filter", "classify", "risk")


@dataclass
class BuildResult:
    """Where a build wrote its outputs and what it counted."""

    output: Path
    cards_path: Path
    official_path: Path
    final_cards_path: Path | None
    counts: dict[str, dict[str, int]]
    timings: dict[str, Any] = field(default_factory=dict)
    annotation: dict[str, Any] = field(default_factory=dict)


def read_sources(cfg: CardBuildConfig) -> ReadResult:
    """Read every configured source (limit, then seeded sample); ids unique across sources."""
    result = ReadResult()
    seen: set[str] = set()
    for n, src in enumerate(cfg.sources):
        part = read_source(src.path, src.dataset, limit=src.limit)
        items = part.items
        if src.sample and len(items) > src.sample:
            rng = random.Random(f"{cfg.seed}:{n}:{src.path}")
            keep = set(rng.sample(range(len(items)), src.sample))
            items = [it for i, it in enumerate(items) if i in keep]
        for it in items:
            if it.id not in seen:
                seen.add(it.id)
                result.items.append(it)
        result.rejected.extend(part.rejected)
    return result


def _card_id(item_id: str) -> str:
    return f"c{item_id[:15]}"


def _params(cfg: CardBuildConfig, max_tokens: int, choices: list[str] | None = None) -> GenerationParams:
    return GenerationParams(temperature=cfg.model.temperature, max_tokens=max_tokens, choices=choices, seed=cfg.seed)


async def run_llm_stages(cfg: CardBuildConfig, items: list[SourceItem], out: Path, model: ChatModel | None,
                         show_progress: bool = True) -> dict[str, Any]:
    """Extract, filter, dedup and classify, each checkpointed under out/stages/. Returns timings."""
    stages = out / "stages"
    timings: dict[str, Any] = {}

    retrying: ChatModel | None = None

    def need_model() -> ChatModel:
        """The model (a registry name or a spec), built on first use, behind the one retry policy."""
        nonlocal model, retrying
        if retrying is None:
            model = model if model is not None else build_chat_model(cfg.model.spec, **cfg.model.options)
            retrying = RetryingChatModel(model, RetryPolicy(max_attempts=cfg.max_attempts, initial_wait_s=cfg.retry_wait_s))
        return retrying

    # -- extract -----------------------------------------------------------------------------
    async def extract(item: SourceItem) -> dict[str, Any]:
        msgs = extraction_messages(item, one_shot=cfg.extraction.one_shot, max_input_chars=cfg.extraction.max_input_chars)
        res, err, attempts = await call_model(need_model(), msgs, _params(cfg, cfg.extraction.max_tokens))
        rec: dict[str, Any] = {"attempts": attempts, "language": item.language, "dataset": item.dataset}
        if res is None:
            return {**rec, "status": "error", "reason": f"model call failed after {attempts} attempt(s): {err}"}
        rec.update(raw=res.text, latency_s=round(res.latency_s, 3), completion_tokens=res.completion_tokens)
        try:
            fields = parse_card_fields(res.text, item.language)
        except CardFieldsError as e:
            return {**rec, "status": "rejected", "reason": f"extraction reply unusable: {e}"}
        return {**rec, "status": "ok", "fields": fields.as_dict(), "notes": fields.notes}

    log_x = StageLog(stages / "extract.jsonl")
    timings["extract"] = await run_stage("extract", items, lambda it: it.id, extract, log_x,
                                         concurrency=cfg.concurrency, show_progress=show_progress)
    extracted = [it for it in items if log_x.records.get(it.id, {}).get("status") == "ok"]

    # -- filter ------------------------------------------------------------------------------
    async def filt(item: SourceItem) -> dict[str, Any]:
        fields = log_x.records[item.id]["fields"]
        msgs = filter_messages(render_card(fields, item.language), item.language, one_shot=cfg.filter.one_shot)
        choices = filter_choices(item.language) if cfg.filter.constrained else None
        res, err, attempts = await call_model(need_model(), msgs, _params(cfg, cfg.filter.max_tokens, choices))
        if res is None:
            return {"status": "error", "attempts": attempts, "reason": f"model call failed after {attempts} attempt(s): {err}"}
        v = parse_filter_reply(res.text, item.language)
        rec = {"raw": res.text, "attempts": attempts, "label": v.label, "category_1": v.category_1}
        if v.verdict == "keep":
            return {**rec, "status": "kept"}
        if v.verdict == "discard":
            return {**rec, "status": "discarded", "reason": "LLM filter: not detailed enough (Figure 8)"}
        if cfg.filter.keep_unparsed:
            return {**rec, "status": "kept", "reason": "filter reply not understood; kept (filter.keep_unparsed)"}
        return {**rec, "status": "rejected", "reason": f"filter reply not understood: {res.text[:120]!r}"}

    log_f = StageLog(stages / "filter.jsonl")
    if cfg.filter.enabled:
        timings["filter"] = await run_stage("filter", extracted, lambda it: it.id, filt, log_f,
                                            concurrency=cfg.concurrency, show_progress=show_progress)
        kept = [it for it in extracted if log_f.records.get(it.id, {}).get("status") == "kept"]
    else:
        kept = list(extracted)

    # -- dedup (deterministic, recomputed every run) ----------------------------------------------
    duplicates = []
    if cfg.dedup.enabled:
        def text_of(it: SourceItem) -> str:
            f = log_x.records[it.id]["fields"]
            return f["problem"] if cfg.dedup.field == "problem" else render_card(f, it.language)
        started = time.perf_counter()
        duplicates = find_near_duplicates([(it.id, text_of(it)) for it in kept], ngram=cfg.dedup.ngram,
                                          threshold=cfg.dedup.threshold, num_perm=cfg.dedup.num_perm,
                                          bands=cfg.dedup.bands, seed=cfg.seed)
        timings["dedup"] = {"done": len(kept), "seconds": round(time.perf_counter() - started, 3)}
    write_jsonl(stages / "dedup.jsonl", [{"id": d.id, "duplicate_of": d.duplicate_of, "similarity": d.similarity,
                                          "status": "duplicate"} for d in duplicates])
    dup_ids = {d.id for d in duplicates}
    unique = [it for it in kept if it.id not in dup_ids]

    # -- classify ----------------------------------------------------------------------------
    async def classify(item: SourceItem) -> dict[str, Any]:
        fields = log_x.records[item.id]["fields"]
        top = log_f.records.get(item.id, {}).get("category_1") if cfg.classify.restrict_to_filter_top else None
        leaves = leaves_for(top)
        if cfg.classify.method == "keyword":
            leaf = keyword_category(fields["problem"], leaves)
            return {"status": "ok", "category_3": leaf, "method": "keyword-fallback" if leaf else "unclassified"}
        msgs = classification_messages(render_card(fields, item.language), item.language, leaves)
        choices = [leaf_label(leaf, item.language) for leaf in leaves] if cfg.classify.constrained else None
        res, err, attempts = await call_model(need_model(), msgs, _params(cfg, cfg.classify.max_tokens, choices))
        if res is None:
            return {"status": "error", "attempts": attempts, "reason": f"model call failed after {attempts} attempt(s): {err}"}
        c = classify_reply(res.text, fields["problem"], leaves)
        return {"status": "ok", "category_3": c.category_3, "method": c.method, "raw": res.text, "attempts": attempts}

    log_c = StageLog(stages / "classify.jsonl")
    timings["classify"] = await run_stage("classify", unique, lambda it: it.id, classify, log_c,
                                          concurrency=cfg.concurrency, show_progress=show_progress)
    # -- risk (optional, beyond the paper) ----------------------------------------------------
    async def risk(item: SourceItem) -> dict[str, Any]:
        msgs = risk_messages(item, max_input_chars=cfg.extraction.max_input_chars)
        choices = risk_choices(item.language) if cfg.risk.constrained else None
        res, err, attempts = await call_model(need_model(), msgs, _params(cfg, cfg.risk.max_tokens, choices))
        if res is None:
            return {"status": "error", "attempts": attempts, "reason": f"model call failed after {attempts} attempt(s): {err}"}
        r = parse_risk_reply(res.text, item.language)
        return {"status": "ok", "risk_level": r.risk_level, "method": r.method, "raw": res.text, "attempts": attempts}

    if cfg.risk.enabled:
        log_r = StageLog(stages / "risk.jsonl")
        timings["risk"] = await run_stage("risk", unique, lambda it: it.id, risk, log_r,
                                          concurrency=cfg.concurrency, show_progress=show_progress)
    if model is not None:
        timings["model"] = getattr(model, "name", cfg.model.spec)
    return timings


def _run_remote(cfg_json: dict[str, Any], items_json: list[dict[str, Any]], out: str, model: ChatModel | None) -> dict[str, Any]:
    """The body of the Ray task: rebuild the inputs and run the LLM stages in the worker."""
    cfg = CardBuildConfig.model_validate(cfg_json)
    items = [SourceItem.model_validate(x) for x in items_json]
    return asyncio.run(run_llm_stages(cfg, items, Path(out), model, show_progress=False))


def task_env() -> dict[str, str]:
    """The card build's Ray task environment: this process's KV cache (else the one default) and the
    variables the engine it starts needs as the driver has them."""
    env = {k: os.environ[k] for k in ("RAY_AUTH_MODE", "ESC_EVAL_CACHE") if k in os.environ}
    return {**env, KV_CACHE_ENV: str(cpu_kv_cache_gib())}


def _run_on_ray(cfg: CardBuildConfig, items: list[SourceItem], out: Path, model: ChatModel | None) -> dict[str, Any]:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - ray is a project dependency
        raise ImportError("Ray is not installed: pip install 'ray[serve,train]==2.60.0'") from e
    from esc_eval.serve.app.ray_cluster import prepare_auth

    prepare_auth(cfg.ray.address)  # Ray's token auth stays on; tests opt out via RAY_AUTH_MODE
    if not ray.is_initialized():
        if cfg.ray.address:
            ray.init(address=cfg.ray.address, log_to_driver=True)
        else:
            # address="local": a fresh instance of our own, never another job's cluster found on the machine
            from esc_eval.sim.pool.ray_start import start_local_ray

            start_local_ray(address="local", num_cpus=max(2, int(cfg.ray.num_cpus) + 1), include_dashboard=False,
                            log_to_driver=True)
    task = ray.remote(num_cpus=cfg.ray.num_cpus, max_retries=0, runtime_env={"env_vars": task_env()})(_run_remote)
    ref = task.remote(cfg.model_dump(mode="json"), [it.model_dump(mode="json") for it in items], str(out.resolve()), model)
    timings = ray.get(ref)
    timings["ray"] = {"address": cfg.ray.address or "local"}
    return timings


def _stage_rejections(items: list[SourceItem], out: Path) -> list[Rejection]:
    by_id = {it.id: it for it in items}
    rejected = []
    for stage in ("extract", "filter", "dedup", "classify"):
        for rec in read_jsonl(out / "stages" / f"{stage}.jsonl"):
            status = rec.get("status")
            if status in ("ok", "kept") or rec.get("id") not in by_id:
                continue
            it = by_id[rec["id"]]
            reason = rec.get("reason") or (f"near-duplicate of {rec.get('duplicate_of')} (Jaccard {rec.get('similarity')})"
                                           if stage == "dedup" else status)
            rejected.append(Rejection(stage=stage, reason=f"{status}: {reason}", item_id=it.id, dataset=it.dataset,
                                      source_file=it.source_file, locator=it.native_id))
    # keep the latest record per (stage, id)
    latest = {(r.stage, r.item_id): r for r in rejected}
    return list(latest.values())


def assemble_cards(items: list[SourceItem], out: Path) -> tuple[list[RoleCard], dict[str, str]]:
    """The machine-built cards from the stage records, and the llm category label per card."""
    recs = {s: {r["id"]: r for r in read_jsonl(out / "stages" / f"{s}.jsonl")} for s in STAGES}
    dups = {r["id"] for r in read_jsonl(out / "stages" / "dedup.jsonl")}
    tax = load_taxonomy()
    cards, labels = [], {}
    for it in items:
        x = recs["extract"].get(it.id)
        c = recs["classify"].get(it.id)
        if not x or x.get("status") != "ok" or it.id in dups or not c or c.get("status") != "ok":
            continue
        f = recs["filter"].get(it.id)
        if f is not None and f.get("status") != "kept":
            continue
        c1 = c2 = c3 = None
        if c.get("category_3"):
            c1, c2, c3 = tax.path(c["category_3"])
        elif f and f.get("category_1"):
            c1 = tax.find(f["category_1"]).name
        r = recs["risk"].get(it.id) or {}  # no record: risk labelling off (or its call failed): not assessed
        card = RoleCard(id=_card_id(it.id), language=it.language, source=it.source_name, category_1=c1,
                        category_2=c2, category_3=c3, risk_level=r.get("risk_level") if r.get("status") == "ok" else None,
                        **x["fields"])
        cards.append(card)
        if c3:
            labels[card.id] = f"{c3} ({c['method']})"
    return cards, labels


def _count(items_lang: dict[str, str], ids: set[str]) -> dict[str, int]:
    c = Counter(items_lang[i] for i in ids if i in items_lang)
    return {"en": c.get("en", 0), "zh": c.get("zh", 0)}


def annotation_round(cfg: CardBuildConfig, cards: list[RoleCard], labels: dict[str, str], out: Path) -> tuple[dict[str, Any], list[RoleCard] | None]:
    """Export/extend the sheets; if filled, apply A.2, write the reviewer sheet and the final cards."""
    folder = out / "annotation"
    names = cfg.annotation.annotators
    ann.export_card_annotation_sheets(cards, folder, names, labels)
    a, err_a = ann.read_annotator_sheet(folder / f"{names[0]}.csv")
    b, err_b = ann.read_annotator_sheet(folder / f"{names[1]}.csv")
    reviewer_path = folder / f"{cfg.annotation.reviewer}.csv"
    r, err_r = ann.read_reviewer_sheet(reviewer_path)
    outcome = ann.apply_correction_rules([c.id for c in cards], a, b, r)
    outcome.errors = err_a + err_b + err_r
    report: dict[str, Any] = {
        "counts": outcome.counts(), "agreement": ann.agreement(a, b),
        "sheet_errors": [str(e) for e in outcome.errors],
        "decisions": {cid: {"status": d.status, "quality": d.quality, "category_3": d.category_3, "needs": d.needs,
                            "reason": d.reason} for cid, d in outcome.decisions.items()},
    }
    if any(d.status == "needs_review" for d in outcome.decisions.values()) or reviewer_path.exists():
        ann.export_reviewer_sheet(outcome, cards, a, b, reviewer_path, (names[0], names[1]))
        report["reviewer_sheet"] = str(reviewer_path)
    atomic_write_text(folder / "report.json", json.dumps(report, ensure_ascii=False, indent=1))
    if not a and not b:
        return report, None
    return report, ann.finalize_cards(cards, outcome)


async def build_cards_async(cfg: CardBuildConfig, model: ChatModel | None = None, *, show_progress: bool = True) -> BuildResult:
    """Run (or resume) the whole build; see the module docstring for the outputs."""
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    read = read_sources(cfg)
    items = read.items
    write_jsonl(out / "items.jsonl", (it.model_dump(mode="json") for it in items))
    if cfg.ray.enabled:
        timings = await asyncio.to_thread(_run_on_ray, cfg, items, out, model)
    else:
        timings = await run_llm_stages(cfg, items, out, model, show_progress=show_progress)
    cards, labels = assemble_cards(items, out)
    cards_path = write_cards(cards, out / "cards.json")
    official_path = write_cards(cards, out / "cards_official.json", fmt="official")
    rejected = read.rejected + _stage_rejections(items, out)
    write_jsonl(out / "rejected.jsonl", (r.model_dump(mode="json") for r in rejected))

    lang = {it.id: it.language for it in items}
    rec = {s: {r["id"]: r for r in read_jsonl(out / "stages" / f"{s}.jsonl")} for s in ("extract", "filter")}
    extracted = {i for i, r in rec["extract"].items() if r.get("status") == "ok" and i in lang}
    llm_f = {i for i in extracted if rec["filter"].get(i, {}).get("status") == "kept"} if cfg.filter.enabled else set(extracted)
    dups = {r["id"] for r in read_jsonl(out / "stages" / "dedup.jsonl")}
    card_lang = {c.id: c.language for c in cards}
    counts = {"Read": _count(lang, set(lang)), "Extract": _count(lang, extracted), "LLM_F": _count(lang, llm_f),
              "Dedup": _count(lang, llm_f - dups), "Cards": _count(card_lang, set(card_lang))}

    ann_report: dict[str, Any] = {}
    final_path = None
    if cfg.annotation.enabled:
        ann_report, final = annotation_round(cfg, cards, labels, out)
        if final is not None:
            final_path = write_cards(final, out / "final_cards.json")
            write_cards(final, out / "final_cards_official.json", fmt="official")
            decided = {cid: d for cid, d in ann_report["decisions"].items()}
            human_f = {cid for cid, d in decided.items() if d["status"] in ("accepted", "needs_review")}
            counts["Human_F"] = _count(card_lang, human_f)
            counts["High"] = _count({c.id: c.language for c in final if c.quality == "high"}, {c.id for c in final})
            counts["Middle"] = _count({c.id: c.language for c in final if c.quality == "middle"}, {c.id for c in final})
    timings["total_seconds"] = round(time.perf_counter() - started, 3)
    manifest = {
        "name": cfg.name, "config": cfg.model_dump(mode="json"), "counts": counts, "timings": timings,
        "rejected": len(rejected), "annotation": {k: v for k, v in ann_report.items() if k != "decisions"},
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if cfg.risk.enabled:  # beyond Table 6: the cards per crisis-risk level
        levels = Counter(c.risk_level or "not assessed" for c in cards)
        manifest["risk_levels"] = {level: levels.get(level, 0) for level in (*RISK_LEVELS, "not assessed")}
    atomic_write_text(out / "manifest.json", json.dumps(manifest, ensure_ascii=False, indent=1, default=str))
    return BuildResult(out, cards_path, official_path, final_path, counts, timings, manifest["annotation"])


def build_cards(cfg: CardBuildConfig, model: ChatModel | None = None, *, show_progress: bool = True) -> BuildResult:
    """Synchronous `build_cards_async` (for the CLI and scripts)."""
    return asyncio.run(build_cards_async(cfg, model, show_progress=show_progress))
