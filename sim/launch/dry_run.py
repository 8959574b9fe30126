"""The price of a run before it runs: `score --dry-run`, `simulate --dry-run` and `--max-cost`.

What a job would send, counted without sending anything or writing anything: its calls, their
prompt tokens (with the model's own tokenizer and chat template where the model is local, exactly
as the engine counts; estimated otherwise, and said so: serve/backends/token_count.py) and their
completion tokens, and the price of that at the provider's list prices (serve/registry/prices.py,
dated; a config's `prices` first, as the spend cap prices), online against the provider's batch
API, and for a judge its per-dimension protocol against one call per dialogue.

Scoring: the dialogues the job would still score (a resume's done rows are not counted), every
judge's calls in both rubric modes (the configured one marked), completion tokens per call as the
plan asks (1 for a constrained label; the JSON answer's length for one call per dialogue; a free
answer at its max_tokens cap, an upper bound). A dialogue past the judge's context is counted whole
(the run windows it: fewer tokens).
Simulation (simulate_estimate.py): every dialogue its full rounds, each reply at its model's max_tokens
(an upper bound), a course's sessions and the calls between them, the seeker's own view.

`--max-cost` refuses, in one line and before anything is sent, a job whose estimate (this run's
rubric mode, online, or at the batch price with `score --batch`) is over it, and one whose API model
has no price to check it with.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from esc_eval.serve.backends.token_count import TokenCounter, token_counter
from esc_eval.serve.batches.config import batch_price
from esc_eval.serve.chat.interface import is_api_spec
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.serve.registry.prices import shipped_list_price
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.driver.calls import model_price, ref_spec
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.judging.config import JudgeConfig

NOTHING_WRITTEN = "nothing was sent and nothing written (dry run)"


def counter_for(ref: ModelRef) -> tuple[str, TokenCounter]:
    spec, options = ref_spec(ref)
    return spec, token_counter(spec, **options)


def price_info(ref: ModelRef, prices: dict[str, TokenPrice]) -> dict[str, Any]:
    """A model's prices: online (the spend cap's: config, registry, shipped list, LiteLLM's), batch (`score
    --batch`'s: the shipped list's, else half the online price), with their date and source; self-hosted models have none (their cost is engine time)."""
    spec, _ = ref_spec(ref)
    if not is_api_spec(spec):
        return {"api": False, "online": None, "batch": None, "read_on": None, "source": "self-hosted: engine time, no price"}
    listed = shipped_list_price(spec)
    online = model_price(ref, spec, prices)
    overridden = ref.model in prices or spec in prices
    batched = batch_price(online, spec)  # as `score --batch` prices it (serve/batches/config.py)
    return {"api": True, "online": online.model_dump() if online else None,
            "batch": batched.model_dump() if batched else None,
            "read_on": str(listed.read_on) if listed and not overridden else None,
            "source": ("the config's prices" if overridden else f"{listed.source} ({listed.page})" if listed
                       else "LiteLLM's price list" if online else "no price known")}


def dollars(calls: dict[str, int], price: dict[str, float] | None) -> float | None:
    if price is None:
        return None
    return round(calls["prompt_tokens"] / 1e6 * price["prompt_per_1m"]
                 + calls["completion_tokens"] / 1e6 * price["completion_per_1m"], 9)


def priced(tally: dict[str, int], info: dict[str, Any]) -> dict[str, float | None]:
    if not info["api"]:
        return {"online": 0.0, "batch": 0.0}
    return {"online": dollars(tally, info["online"]), "batch": dollars(tally, info["batch"])}


# -- scoring ------------------------------------------------------------------------------------
def _scoring_items(input_path: str | Path, out_dir: str | Path | None, judges: list[JudgeConfig]) -> Iterator[dict[str, Any]]:
    """The items the scoring job would run, read without writing: a run folder's (its done rows skipped),
    else the official JSON's (all of them, or those an earlier import into `out_dir` still owes)."""
    from esc_eval.sim.jobs.scoring import is_run_folder, iter_scoring_items
    from esc_eval.sim.runs.official import official_dialogue_files, read_official_dialogues
    from esc_eval.sim.runs.runfolder import RunFolder

    src = str(input_path)
    folder = src if is_run_folder(src) else str(out_dir) if out_dir and is_run_folder(out_dir) else None
    if folder is not None:
        yield from iter_scoring_items(RunFolder(folder, create=False), judges)
        return
    if not Path(src).exists():
        raise FileNotFoundError(f"{src}: no such run folder or official result folder")
    seen: set[str] = set()
    for f in official_dialogue_files(src):
        for d in read_official_dialogues(f):
            if d["status"] == "ok" and d["dialogue_id"] not in seen:
                seen.add(d["dialogue_id"])
                yield {**d, "todo": {j.judge_id: list(j.dimensions) for j in judges}}


def _answer_tokens(judge: JudgeConfig, plan, counter: TokenCounter, dims: list[str]) -> int:
    """Completion tokens of one call as its plan asks (see the module docstring)."""
    from esc_eval.sim.judging.one_call import typical_answer

    if judge.rubric_mode == "one_call":
        return counter.text(typical_answer(dims)) + 1  # and the end of sequence
    params = plan.params or judge.model.params
    return 1 if plan.reads_logprobs and params.choices else params.max_tokens


def score_estimate(cfg: ScoringConfig, input_path: str | Path, out_dir: str | Path | None = None) -> dict[str, Any]:
    """What scoring `input_path` with `cfg` would send and cost (see the module docstring); nothing sent or
    written."""
    from esc_eval.sim.jobs.scoring import judge_call_messages
    from esc_eval.sim.jobs.scoring_judges import prepared_judges, judge_plan_for

    cfg, plans, _ = prepared_judges(cfg)
    judges = cfg.judges
    alt = {j.judge_id: j.model_copy(update={"rubric_mode": "per_dimension" if j.rubric_mode == "one_call" else "one_call",
                                            "name": None if j.name is None else j.name.removesuffix(":one_call")})
           for j in judges}
    alt_plans = {jid: judge_plan_for(a) for jid, a in alt.items()}
    counters = {j.judge_id: counter_for(j.model) for j in judges}
    tally = {j.judge_id: {m: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
                          for m in ("per_dimension", "one_call")} for j in judges}
    dialogues = 0
    for item in _scoring_items(input_path, out_dir, judges):
        dialogues += 1
        turns = [(t["speaker"], t["text"]) for t in item["turns"]]
        for jid, dims in item["todo"].items():
            judge = next(j for j in judges if j.judge_id == jid)
            for mode_judge, plan in ((judge, plans[jid]), (alt[jid], alt_plans[jid])):
                one = mode_judge.model_copy(update={"dimensions": dims})
                convs = [judge_call_messages(dims[0], turns, item["language"], one)] if one.rubric_mode == "one_call" \
                    else [judge_call_messages(d, turns, item["language"], one) for d in dims]
                t = tally[jid][one.rubric_mode]
                t["calls"] += len(convs)
                t["prompt_tokens"] += sum(counters[jid][1].prompts(convs))
                t["completion_tokens"] += len(convs) * _answer_tokens(one, plan, counters[jid][1], dims)
    rows = []
    transport = "batch" if cfg.batch.enabled else "online"  # score --batch: the batch price is this run's
    for j in judges:
        info = price_info(j.model, cfg.prices)
        modes = {m: {**t, "cost_usd": priced(t, info)} for m, t in tally[j.judge_id].items()}
        rows.append({"judge": j.judge_id, "model": counters[j.judge_id][0], "rubric_mode": j.rubric_mode,
                     "transport": transport, "tokens": counters[j.judge_id][1].how, "price": info, "modes": modes,
                     "this_run_usd": modes[j.rubric_mode]["cost_usd"][transport]})
    return {"job": "score", "input": str(input_path), "dialogues_to_score": dialogues, "judges": rows,
            "completion_tokens": "per call: 1 for a constrained label, the JSON answer's tokens for one call per "
                                 "dialogue, max_tokens for a free answer (an upper bound)",
            **run_total(rows), "written": NOTHING_WRITTEN}


# -- per-reply safety ---------------------------------------------------------------------------
def reply_safety_estimate(cfg: ScoringConfig, input_path: str | Path) -> dict[str, Any]:
    """What `score --reply-safety` would send and cost: every question about every reply after risk
    emerged that a judge still owes (sim/jobs/reply_safety.py reply_items: a resume's answers not
    counted), its messages as the job builds them, its answer as its plan asks (1 token for a
    constrained label, else max_tokens: an upper bound); a context past the judge's counted whole (the
    job windows it: fewer tokens). Nothing sent or written."""
    from esc_eval.sim.emerging.patterns import SAFETY
    from esc_eval.sim.emerging.reply_prompts import pattern_params
    from esc_eval.sim.jobs.reply_safety import NO_EMERGING, done_keys, messages_for, reply_items, split_at_reply
    from esc_eval.sim.jobs.scoring_judges import prepared_judges
    from esc_eval.sim.runs.runfolder import RunFolder

    from esc_eval.sim.launch.emerging import ONLINE_ONLY

    if cfg.batch.enabled:
        raise ValueError(ONLINE_ONLY)
    cfg, plans, _ = prepared_judges(cfg)
    judges = {j.judge_id: j for j in cfg.judges}
    run = RunFolder(str(input_path), create=False)
    if next(reply_items(run, cfg.judges, set()), None) is None:
        raise ValueError(NO_EMERGING.format(run=run))
    counters = {jid: counter_for(j.model) for jid, j in judges.items()}
    tally = {jid: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0} for jid in judges}
    dialogues = 0
    for item in reply_items(run, cfg.judges, done_keys(run, set(judges))):
        dialogues += 1
        turns = [(t["speaker"], t["text"] or "") for t in item["turns"]]
        for jid, todo in item["todo"].items():
            judge, plan = judges[jid], plans[jid]
            convs, caps = [], 0
            for k, q in todo:
                context, (_, reply) = split_at_reply(turns, k)
                convs.append(messages_for(q, context, reply, item["language"], judge))
                params = (plan.params or judge.model.params) if q == SAFETY else (
                    pattern_params(plan.method) if plan.reads_logprobs else judge.model.params)
                caps += 1 if plan.reads_logprobs and params.choices else params.max_tokens
            t = tally[jid]
            t["calls"] += len(convs)
            t["prompt_tokens"] += sum(counters[jid][1].prompts(convs))
            t["completion_tokens"] += caps
    rows = []
    for jid, j in judges.items():
        info = price_info(j.model, cfg.prices)
        costs = priced(tally[jid], info)
        rows.append({"stage": "reply_safety", "model": jid, "spec": counters[jid][0], "tokens": counters[jid][1].how,
                     **tally[jid], "price": info, "cost_usd": costs, "this_run_usd": costs["online"]})
    return {"job": "score --reply-safety", "dialogues": dialogues, "models": rows,
            "assumed": "each reply after risk emerged asked both questions (safety, pattern), each answer as its plan "
                       "asks (1 token for a constrained label, else max_tokens: an upper bound); online (the job rates "
                       "replies online)", **run_total(rows), "written": NOTHING_WRITTEN}


def run_total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's estimate over its models: a sum, or None when an API model has no price."""
    costs = [r["this_run_usd"] for r in rows]
    unpriced = [r.get("judge") or r.get("model") for r in rows if r["this_run_usd"] is None]
    return {"estimate_usd": None if unpriced else round(sum(costs), 9), "unpriced": unpriced}


def check_max_cost(estimate: dict[str, Any], max_cost: float | None) -> None:
    """--max-cost: ValueError in one line when the estimate is over it (or cannot be checked); nothing was sent."""
    if max_cost is None:
        return
    if estimate["unpriced"]:
        raise ValueError(f"--max-cost {max_cost:g}: no price for {', '.join(estimate['unpriced'])} to check it with; add "
                         f"prices: {{<model>: {{prompt_per_1m: ..., completion_per_1m: ...}}}} to the config (nothing sent)")
    if estimate["estimate_usd"] > max_cost:
        raise ValueError(f"estimated ${estimate['estimate_usd']:.2f} at list prices is over --max-cost ${max_cost:g} "
                         f"({estimate['job']}: `--dry-run` shows the calls and tokens); nothing was sent")
