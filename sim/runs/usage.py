"""Usage and cost of a run, per model and stage (role, target, judge), computed from its rows.

Per (stage, model): calls, prompt and completion tokens, call-seconds (the sum of the calls'
latencies) and, for API models with a per-token price (the registry's `price` or a config's
`prices` override), dollars. Per engine-hosted model, summed over every run of each job, GPU time
charged to what held the GPUs (the manifest's `gpu_charges`, one per run of a job, from sim/driver/placement.py):
- a Serve deployment: its replicas x the time they were up (replica-seconds, metered from
  serve.status()), x the GPUs of one replica (a fraction where replicas share a GPU);
- an in-process engine: the job's wall time x its worker actors (engine-seconds), x the GPUs per
  worker x the engine's share of them (its gpu_memory_utilization over the worker's budget: the
  role and a target sharing a GPU are charged their parts, not the whole GPU each); targets whose
  engines a worker holds one at a time split the job's time by their call-seconds;
- no charge (fake models, older manifests): job wall time x workers x GPUs per worker.
Judge calls a provider batch answered (score rows with transport `batch`: sim/batching) are counted
apart as well (`batch_calls`, `batch_prompt_tokens`, ...) and priced at the batch price.
The per-reply safety judge (`reply_safety` rows: stage reply_safety) and the seeker's own view
(`seeker_ratings` rows: stage seeker_rating, the rater's model) are one call a row.
Written to the manifest as `usage` at the end of every job that calls a model (simulation, scoring,
per-reply safety, seeker ratings, distress), and recomputed
from all rows each time (a resumed run counts everything once).

Role and target calls are the dialogues' turns that carry tokens (the fixed greeting is no call), and
a course's calls between its sessions (the role's update, the target's notes: `between_calls`);
a judge call is one score row (one prompt per dimension), or, for a judge scoring every dimension in
one call (`rubric_mode` one_call), the rows of a dialogue together (they share the call's tokens);
the judge's completion tokens are the rows' `completion_tokens` where recorded (one-call rows), else
one per logprob call and 0 for generate calls (the raw answer's length is not a token count).
"""
from __future__ import annotations

from typing import Any

from esc_eval.serve.batches.config import batch_price
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.sim.runs.runfolder import RunFolder

API_BACKENDS = ("openai/", "litellm/")


def _resolve(name: str) -> tuple[str, TokenPrice | None]:
    """(spec, registry price) of a registry name or spec; unknown names keep themselves and no price."""
    from esc_eval.serve.registry.registry import default_registry, resolve

    try:
        spec, _ = resolve(name)
    except ValueError:
        return name, None
    reg = default_registry()
    entry = reg.models.get(name) or next((e for e in reg.models.values() if e.spec == name), None)
    price = getattr(entry, "price", None) if entry is not None else None
    if price is None:
        from esc_eval.serve.registry.prices import shipped_price

        price = shipped_price(spec)
    if price is None and spec.startswith("litellm/"):
        from esc_eval.serve.backends.litellm_api import list_price

        price = list_price(spec.partition("/")[2])
    return spec, price


def _is_api(spec: str) -> bool:
    return spec.startswith(API_BACKENDS)


def _add(acc: dict, key: tuple[str, str], calls: int, prompt: int, completion: int, seconds: float,
         batched: bool = False) -> None:
    row = acc.setdefault(key, {"stage": key[0], "model": key[1], "calls": 0, "prompt_tokens": 0,
                               "completion_tokens": 0, "call_seconds": 0.0})
    row["calls"] += calls
    row["prompt_tokens"] += prompt
    row["completion_tokens"] += completion
    row["call_seconds"] += seconds
    if batched:  # a judge call a provider batch answered (sim/batching): priced at the batch price
        for k, v in (("batch_calls", calls), ("batch_prompt_tokens", prompt), ("batch_completion_tokens", completion)):
            row[k] = row.get(k, 0) + v


def _job_runs(manifest: dict[str, Any], job: str) -> list[dict[str, Any]]:
    """Each run of a job: its wall seconds and what held the GPUs in it (its `gpu_charges` entry, None
    for runs without one); a charge whose run wrote no end event (stopped early) is a run of 0 s."""
    charges = [c for c in manifest.get("gpu_charges") or [] if c.get("job") == job]
    by_end = {c["end_at"]: c for c in charges if c.get("end_at")}
    runs = [{"wall": float(e.get("wall_s") or 0), "usage": by_end.get(e.get("at"))}
            for e in manifest.get("events", []) if e.get("kind") == f"{job}_end"]
    return runs + [{"wall": 0.0, "usage": c} for c in charges if not c.get("end_at") or c["end_at"] not in
                   {e.get("at") for e in manifest.get("events", [])}]


def _engine_rows(manifest: dict[str, Any], hosted: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """engine- and GPU-seconds per engine-hosted model (see the module doc). `hosted`: (job, model)
    -> {"spec", "call_seconds", "stage"} of the models with rows."""
    out: dict[str, dict[str, Any]] = {}
    for job in ("simulation", "scoring"):
        ex = (manifest.get(job) or {}).get("config", {}).get("execution", {}) or {}
        models = {m: v for (j, m), v in hosted.items() if j == job}
        for run in _job_runs(manifest, job):
            ev = run["usage"] or {}
            charged = ev.get("models") or {}
            workers = int(ev.get("workers") or ex.get("workers", 1) or 1)
            gpw = float(ev.get("gpus_per_worker", ex.get("num_gpus_per_worker", 0)) or 0)
            solo = {m: v["call_seconds"] for m, v in models.items() if _charge(charged, m).get("one_at_a_time")}
            for model, info in models.items():
                row = out.setdefault(model, {"model": model, "spec": info["spec"], "engine_seconds": 0.0,
                                             "gpu_seconds": 0.0, "held_as": set()})
                c = _charge(charged, model)
                if ev.get("mode") == "serve":
                    row["engine_seconds"] += float(c.get("replica_seconds") or 0)
                    row["gpu_seconds"] += float(c.get("gpu_seconds") or 0)
                    if c:
                        g = float(c.get("gpus_per_replica") or 0)
                        row["held_as"].add(f"Serve replicas x {g:g} GPU" if g else "Serve replicas on CPU")
                    continue
                part = (solo[model] / sum(solo.values()) if sum(solo.values()) else 1 / len(solo)) if model in solo else 1.0
                share = float(c.get("gpu_share", 1.0))
                secs = run["wall"] * workers * part
                row["engine_seconds"] += secs
                row["gpu_seconds"] += secs * gpw * share
                if gpw:
                    row["held_as"].add(f"in-process, {share:g} of {gpw:g} GPU per worker")
    return [{**r, "engine_seconds": round(r["engine_seconds"], 3), "gpu_seconds": round(r["gpu_seconds"], 3),
             "held_as": "; ".join(sorted(r["held_as"]))} for r in out.values()]


def _charge(charged: dict[str, Any], model: str) -> dict[str, Any]:
    """The event's entry for a model as the rows name it (a target's ':adapter' suffix aside)."""
    return charged.get(model) or charged.get(model.rsplit(":", 1)[0]) or {}


def _turn_usage(run: RunFolder):
    """(stage, model), calls, prompt, completion tokens and call-seconds of the dialogues' turns, one
    row per dialogue (RunFolder.read's rule), summed column-wise (a Python loop over every turn of
    8,500 dialogues took a second at the end of each job)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = run.read("dialogues", columns=["target_model", "role_model", "turns"])
    if t.num_rows == 0:
        return
    turns = t.column("turns").combine_chunks()
    flat = pc.list_flatten(turns)
    if len(flat) == 0:
        return
    parent = pc.list_parent_indices(turns)
    fields = {name: pc.fill_null(pc.struct_field(flat, name), 0)
              for name in ("prompt_tokens", "completion_tokens", "latency_s")}
    seeker = pc.equal(pc.struct_field(flat, "speaker"), "seeker")
    model = pc.if_else(seeker, pc.take(t.column("role_model"), parent), pc.take(t.column("target_model"), parent))
    table = pa.table({"stage": pc.if_else(seeker, "role", "target"), "model": model, **fields})
    # the fixed greeting carries no tokens and is no call
    table = table.filter(pc.or_(pc.greater(table["prompt_tokens"], 0), pc.greater(table["completion_tokens"], 0)))
    grouped = table.group_by(["stage", "model"]).aggregate(
        [("prompt_tokens", "count"), ("prompt_tokens", "sum"), ("completion_tokens", "sum"), ("latency_s", "sum")])
    for r in grouped.to_pylist():
        yield ((r["stage"], r["model"]), r["prompt_tokens_count"], r["prompt_tokens_sum"], r["completion_tokens_sum"],
               float(r["latency_s_sum"]))


def _between_usage(run: RunFolder):
    """The calls a course made between its sessions (a row's `between_calls`: the role's update, the
    target's notes), as _turn_usage yields them; nothing for single-session runs."""
    t = run.read("dialogues", columns=["target_model", "role_model", "between_calls"])
    for target, role, calls in zip(*(t.column(c).to_pylist() for c in ("target_model", "role_model", "between_calls"))):
        for c in calls or ():
            yield ((c["stage"], role if c["stage"] == "role" else target), 1, c["prompt_tokens"] or 0,
                   c["completion_tokens"] or 0, float(c["latency_s"] or 0))


def _judged_usage(run: RunFolder):
    """The calls of the judge-like jobs whose rows are one call each, as _turn_usage yields them: the
    per-reply safety judge (`reply_safety` rows, stage reply_safety, by judge id) and the seeker's own
    view (`seeker_ratings` rows, stage seeker_rating, by the rater's model); a row without prompt
    tokens (a call that never reached the model, the people's own answers) is no call. Completion
    tokens as scoring counts them: the rows' where recorded, else one per logprob call."""
    for kind, stage, key in (("reply_safety", "reply_safety", "judge"), ("seeker_ratings", "seeker_rating", "rater")):
        if not run.parts(kind):
            continue
        t = run.read(kind, columns=[key, "prompt_tokens", "completion_tokens", "method", "latency_s"])
        for who, prompt, completion, method, secs in zip(*(t.column(c).to_pylist() for c in
                                                             (key, "prompt_tokens", "completion_tokens", "method", "latency_s"))):
            if not prompt:
                continue
            model = who.rsplit(":", 1)[0] if stage == "seeker_rating" else who  # '<model>:seeker' | '<model>:as-seeker'
            yield ((stage, model), 1, prompt, completion if completion is not None else
                   (1 if (method or "").startswith("logprob") else 0), float(secs or 0))


def compute_usage(run: RunFolder, prices: dict[str, TokenPrice] | None = None) -> dict[str, Any]:
    """The usage table of a run folder (see the module docstring); prices override the registry's."""
    prices = prices or {}
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    for key, calls, p, c, secs in _turn_usage(run):
        _add(acc, key, calls, p, c, secs)
    for key, calls, p, c, secs in (*_between_usage(run), *_judged_usage(run)):
        _add(acc, key, calls, p, c, secs)
    if run.parts("scores"):
        one_calls: set[tuple[str, str]] = set()
        # read (not iter_rows): parts written before the `transport` column read it as null
        for s in run.read("scores", columns=["judge", "prompt_tokens", "latency_s", "method", "parse_status", "transport",
                                             "dialogue_id", "rubric_mode", "completion_tokens"]).to_pylist():
            if s["parse_status"] == "error" and not s["prompt_tokens"]:
                continue  # a call that never reached the model
            if s["rubric_mode"] == "one_call":  # one call's rows (a dimension each) share its tokens: count it once
                if (s["dialogue_id"], s["judge"]) in one_calls:
                    continue
                one_calls.add((s["dialogue_id"], s["judge"]))
            completion = s["completion_tokens"] if s["completion_tokens"] is not None else (
                1 if (s["method"] or "").startswith("logprob") else 0)
            _add(acc, ("judge", s["judge"]), 1, s["prompt_tokens"] or 0, completion, float(s["latency_s"] or 0),
                 batched=s["transport"] == "batch")
    manifest = run.read_manifest()
    # The judge id is the judge's model string unless named otherwise (JudgeConfig.name).
    judge_model = ((manifest.get("scoring") or {}).get("config") or {}).get("judge", {}).get("model", {}).get("model")
    judge_models = (manifest.get("scoring") or {}).get("judge_models") or {}  # judge id -> model (a panel's judges)
    # A named target (ModelRef.name) is priced and counted as the model it runs.
    named = {t["name"]: t["model"] for t in ((manifest.get("simulation") or {}).get("config") or {}).get("targets", [])
             if isinstance(t, dict) and t.get("name")}
    reply_judges = (manifest.get("reply_safety") or {}).get("judge_models") or {}  # judge id -> model
    rows: list[dict[str, Any]] = []
    hosted: dict[tuple[str, str], dict[str, Any]] = {}
    total_dollars = 0.0
    for (stage, model), row in sorted(acc.items()):
        lookup = (judge_models.get(model) or judge_model) if stage == "judge" and (judge_model or judge_models) \
            and model not in prices else model
        lookup = named.get(model, lookup) if stage == "target" else lookup
        lookup = reply_judges.get(model, lookup) if stage == "reply_safety" else lookup
        spec, reg_price = _resolve(lookup)
        price = prices.get(model) or prices.get(lookup) or reg_price
        row["spec"] = spec
        row["call_seconds"] = round(row["call_seconds"], 3)
        row["dollars"] = None
        if _is_api(spec):
            if price is not None:
                batched = batch_price(price, spec)
                bp, bc = row.get("batch_prompt_tokens", 0), row.get("batch_completion_tokens", 0)
                row["dollars"] = round((row["prompt_tokens"] - bp) / 1e6 * price.prompt_per_1m
                                       + (row["completion_tokens"] - bc) / 1e6 * price.completion_per_1m
                                       + bp / 1e6 * batched.prompt_per_1m + bc / 1e6 * batched.completion_per_1m, 6)
                total_dollars += row["dollars"]
        else:
            # one engine per model per worker (or one deployment), shared by the stages of a job
            h = hosted.setdefault(("scoring" if stage in ("judge", "reply_safety") else "simulation", lookup),
                                  {"spec": spec, "call_seconds": 0.0, "stage": stage})
            h["call_seconds"] += row["call_seconds"]
        rows.append(row)
    engine_rows = _engine_rows(manifest, hosted)
    # What the last run of each job sent: requests that reached each API, 429s, call-cache hits and
    # the dollars those requests cost (a cache hit costs nothing; by_stage prices the rows' tokens).
    api_calls = {job: (manifest.get(job) or {}).get("last", {}).get("api_calls") for job in ("simulation", "scoring")}
    api_calls = {k: v for k, v in api_calls.items() if v}
    return {"by_stage": rows, "engines": engine_rows, "total_dollars": round(total_dollars, 6), "api_calls": api_calls,
            "cache_hits": sum(int(m.get("cache_hits", 0)) for v in api_calls.values() for m in v.get("models", {}).values()),
            "notes": "batch_* = the judge calls a provider batch answered, priced at the batch price (the shipped list's, "
                     "else half the online price: serve/batches/config.py); engine_seconds = Serve replica-seconds, or job wall "
                     "time x worker actors for in-process engines "
                     "(targets held one at a time split it by call-seconds); gpu_seconds = replica-seconds x GPUs per "
                     "replica (a fraction where replicas share a GPU), or engine_seconds x num_gpus_per_worker x the "
                     "engine's share of the worker's GPUs; dollars only for API models with a price; "
                     "api_calls = the last run of each job: requests that reached each model, 429s, call-cache hits "
                     "and dollars spent (cache hits are free)."}


def manifest_prices(manifest: dict[str, Any]) -> dict[str, TokenPrice]:
    """The `prices` overrides the run's simulation and scoring configs gave (as recorded)."""
    out: dict[str, TokenPrice] = {}
    for job in ("simulation", "scoring", "reply_safety"):
        for model, p in (((manifest.get(job) or {}).get("config") or {}).get("prices") or {}).items():
            out[model] = TokenPrice.model_validate(p)
    return out


def refresh_usage(run: RunFolder) -> dict[str, Any]:
    """record_usage with the prices the manifest's configs gave (after the placement's GPU charge is in)."""
    return record_usage(run, manifest_prices(run.read_manifest()))


def record_usage(run: RunFolder, prices: dict[str, TokenPrice] | None = None) -> dict[str, Any]:
    """compute_usage, written to the manifest's `usage` (the end-of-job hook)."""
    usage = compute_usage(run, prices)
    run.update_manifest(usage=None)  # replace, not merge: stale stages must not survive
    run.update_manifest(usage=usage)
    return usage
