"""`esc-eval bench serve`: ESC-Eval's workloads against any OpenAI-compatible serving stack.

    cfg = ServeBenchConfig(base_url="http://127.0.0.1:8000/v1", model="embedded", workload="dialogues")
    result = bench_serve(cfg)          # JSON-ready dict: one entry per arm, one per load level

An arm is one variant of the run: the endpoint as given, or one routing mode deployed as a fresh
Serve app (`routing`; arms of the same mode share it, their prefix caches emptied in between), or
one judge prompt order; every arm sees the same stream of units, and
with two arms or more `ratios` gives arm / first arm per level. The metrics are vLLM's
(serve_metrics.py), the workloads ESC-Eval's own (serve_workloads.py), the load shapes in
serve_load.py. An interrupt (Ctrl-C) stops the run and the result still holds every finished
request, the interrupted level marked `interrupted`.
"""
from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Literal

from pydantic import Field, model_validator

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.config import ConfigModel
from esc_eval.serve.devices.cpu import cpu_kv_cache_gib
from esc_eval.sim.bench.serve.client import BenchInputError, StreamingClient, check_endpoint
from esc_eval.sim.bench.serve.load import LevelRun, LoadShape, run_level
from esc_eval.sim.bench.serve.metrics import level_metrics, parse_slos, ratios, request_details
from esc_eval.sim.bench.serve.routing import ROUTING_MAX_NUM_SEQS
from esc_eval.sim.bench.serve.workloads import LIVE_STRATEGY, Unit
from esc_eval.sim.jobs.config import PAPER_ROUNDS

# `bench serve`'s defaults (ServeBenchConfig and the CLI read these):
SERVE_BENCH_WORKLOAD = "dialogues"  # ESC-Eval's own traffic: multi-turn dialogues
SERVE_BENCH_CONCURRENCY = 4  # one level, a few units in flight: a quick look, not a sweep
SERVE_BENCH_WARMUP = 1  # one unit per level left out: the first request pays for compilation and cold caches
SERVE_BENCH_MAX_TOKENS = 128  # a short reply keeps a CPU run in minutes
SERVE_BENCH_TEMPERATURE = 0.0  # greedy: the same prompt decodes alike in every arm
SERVE_BENCH_ROLE_MAX_TOKENS = 128  # a seeker's turn is short
SERVE_BENCH_CARDS = "sample"  # the shipped everyday cards
SERVE_BENCH_PROMPT_ORDER = "dialogue_first"  # a dialogue's seven prompts share a prefix: what a cache-aware router is for
SERVE_BENCH_JUDGE_METHOD = "logprob"  # one constrained token, as esc-eval's judges score
SERVE_BENCH_INPUT_LEN = 256  # random: about a judge prompt's dialogue part
SERVE_BENCH_REPLICAS = 2  # routing: the fewest replicas where routing makes a difference
SERVE_BENCH_TIMEOUT_S = 600.0  # one measured request past this counts as failed
SERVE_BENCH_SEED = 0  # random prompts and Poisson arrivals repeat run to run

PromptOrder = Literal["rubric_first", "dialogue_first"]
RoutingMode = Literal["default", "session", "prefix_cache"]


class ServeBenchConfig(ConfigModel):
    """One `bench serve` run: the endpoint, the workload, the load shapes, the arms."""

    base_url: str | None = Field(None, description="OpenAI-compatible base URL under test (…/v1); not with routing (the app is deployed).")
    model: str = Field(description="Model id the endpoint serves (routing: a registry model to deploy, e.g. embedded).")
    workload: Literal["dialogues", "judge", "random"] = Field(SERVE_BENCH_WORKLOAD, description="dialogues: multi-turn ESC-Eval dialogues; judge: seven rubric prompts per dialogue; random: fixed-length requests.")
    concurrency: list[int] = Field(default_factory=lambda: [SERVE_BENCH_CONCURRENCY], description="Units in flight, one load level each (a sweep); ignored with rate.")
    rate: list[float] | None = Field(None, description="New units per second (Poisson), one level each; None = fixed concurrency levels.")
    max_concurrency: int | None = Field(None, ge=1, description="With rate: the cap on units in flight (None: no cap).")
    num: int | None = Field(None, ge=1, description="Units measured per level (None: 2 x concurrency, at least 4; 16 with a rate), unless duration_s bounds it.")
    duration_s: float | None = Field(None, gt=0, description="Stop starting new units after this many seconds per level (units in flight finish).")
    warmup: int = Field(SERVE_BENCH_WARMUP, ge=0, description="Units run first at each level's shape and left out of its figures.")
    max_tokens: int = Field(SERVE_BENCH_MAX_TOKENS, ge=1, description="Max new tokens of each measured request (random: the output length).")
    temperature: float = Field(SERVE_BENCH_TEMPERATURE, ge=0, description="Sampling temperature of the measured requests.")
    rounds: int = Field(PAPER_ROUNDS, ge=1, le=50, description="dialogues: rounds per dialogue (at most the recorded seeker turns when replaying).")
    source: str | None = Field(None, description="dialogues (replay) and judge: a run folder or official dialogue JSON; default: the official samples in ../shared, else runs/demo.")
    language: Literal["en", "zh"] | None = Field(None, description="Keep only dialogues / cards in this language.")
    role_url: str | None = Field(None, description="dialogues: OpenAI base URL of a live role model (ESC-Role); None = replay the source's seeker turns.")
    role_model: str | None = Field(None, description="dialogues: model id of the live role model.")
    role_max_tokens: int = Field(SERVE_BENCH_ROLE_MAX_TOKENS, ge=1, description="dialogues: max new tokens of the live role model's turns.")
    cards: str = Field(SERVE_BENCH_CARDS, description="dialogues with a live role: role-card file, or 'sample' for the shipped cards.")
    strategy: str = Field(LIVE_STRATEGY, description="dialogues with a live role: role-play prompt strategy.")
    prompt_orders: list[PromptOrder] = Field(default_factory=lambda: [SERVE_BENCH_PROMPT_ORDER], description="judge: prompt orders, one arm each (both: the prefix-cache effect).")
    judge_method: Literal["logprob", "generate"] = Field(SERVE_BENCH_JUDGE_METHOD, description="judge: 'logprob' = one constrained token with the label log-probs (esc-eval's default); 'generate' = a free answer of max_tokens.")
    input_len: int = Field(SERVE_BENCH_INPUT_LEN, ge=2, description="random: prompt tokens per request.")
    tokenizer: str | None = Field(None, description="random: local tokenizer folder (default: the embedded model's, for model 'embedded').")
    ignore_eos: bool = Field(True, description="random: ask the server to decode exactly max_tokens (vLLM's ignore_eos).")
    slos: list[str] = Field(default_factory=list, description="Goodput SLOs METRIC:VALUE (ttft, tpot, e2el; ms, or with 'ms'/'s').")
    session_header: bool = Field(True, description="Send x-session-id (the dialogue's id) so a sticky router keeps a dialogue on one replica.")
    session_id: str | None = Field(None, description="Send this one x-session-id on every request instead (a sticky router then keeps the whole run on one replica).")
    routing: list[RoutingMode] | None = Field(None, description="Deploy the model as a Serve app once per routing mode (fresh replicas each) and run every arm.")
    replicas: int = Field(SERVE_BENCH_REPLICAS, ge=2, description="routing: replicas per app.")
    kv_cache_gib: int = Field(default_factory=cpu_kv_cache_gib, ge=1, description="routing: VLLM_CPU_KVCACHE_SPACE per CPU replica, GiB (default: this process's VLLM_CPU_KVCACHE_SPACE, else 2).")
    max_num_seqs: int = Field(ROUTING_MAX_NUM_SEQS, ge=1, description="routing: vLLM batch size per replica.")
    address: str | None = Field(None, description="routing: Ray cluster to deploy on (default: a local Ray for this run).")
    deploy_timeout_s: float = Field(900, gt=0, description="routing: seconds to wait for an app's replicas to be healthy.")
    timeout_s: float = Field(SERVE_BENCH_TIMEOUT_S, gt=0, description="Timeout of one measured request.")
    seed: int = Field(SERVE_BENCH_SEED, description="Seed of random prompts and Poisson arrivals.")
    save_detailed: bool = Field(False, description="Also write each level's per-request figures (launch order: units, turns, start_times, ttfts, itls, e2els, input/output lens, errors), as vllm bench serve --save-detailed does.")

    @model_validator(mode="after")
    def _check(self) -> "ServeBenchConfig":
        if self.routing and self.base_url:
            raise ValueError("give either --base-url (an endpoint to measure) or --routing (deploy one app per mode), not both")
        if not self.routing and not self.base_url:
            raise ValueError("--base-url is required (or --routing to deploy the model once per routing mode)")
        if bool(self.role_url) != bool(self.role_model):
            raise ValueError("a live role model needs both --role-url and --role-model")
        if any(c < 1 for c in self.concurrency) or not self.concurrency:
            raise ValueError("--concurrency: every level needs at least 1 unit in flight")
        if self.rate is not None and (not self.rate or any(r <= 0 for r in self.rate)):
            raise ValueError("--rate: every level needs a positive rate of new units per second")
        return self

    def levels(self) -> list[LoadShape]:
        def count(c: int | None) -> int | None:
            if self.num is not None:
                return self.num
            if self.duration_s is not None:
                return None
            return 16 if c is None else max(4, 2 * c)

        if self.rate:
            return [LoadShape(concurrency=self.max_concurrency, rate=r, count=count(None), duration_s=self.duration_s, warmup=self.warmup,
                              seed=self.seed) for r in self.rate]
        return [LoadShape(concurrency=c, count=count(c), duration_s=self.duration_s, warmup=self.warmup, seed=self.seed)
                for c in self.concurrency]


@dataclass
class Arm:
    """One variant of the run; `before` runs just ahead of it (e.g. a prefix-cache reset)."""

    name: str
    base_url: str | None = None
    routing: str | None = None
    session_header: bool = True
    prompt_order: str | None = None
    before: Callable[[], Any] | None = None
    app: str | None = None  # the Serve app serving it, when known: its replicas' prefix-cache use is measured


def default_arms(cfg: ServeBenchConfig) -> list[Arm]:
    orders = cfg.prompt_orders if cfg.workload == "judge" else [None]
    modes = cfg.routing or [None]
    arms = []
    for mode in modes:
        for order in orders:
            name = "/".join(x for x in (mode, order) if x) or "endpoint"
            arms.append(Arm(name=name, base_url=cfg.base_url, routing=mode, session_header=cfg.session_header,
                            prompt_order=order))
    return arms


# -- units --------------------------------------------------------------------------------------
class Workload:
    """The workload's input, loaded once before any load; `units(arm)` starts a fresh stream."""

    def __init__(self, cfg: ServeBenchConfig):
        import esc_eval.sim.bench.serve.workloads as w

        self.cfg = cfg
        self.info: dict[str, Any] = {}
        self.role = None  # the live role model of the current arm (its HTTP client closes with the arm)
        self.params = GenerationParams(max_tokens=cfg.max_tokens, temperature=cfg.temperature)
        if cfg.workload == "random":
            path = cfg.tokenizer
            if path is None:
                if cfg.model != "embedded":
                    raise BenchInputError(f"--tokenizer: the random workload needs the tokenizer of model {cfg.model!r} (a local folder)")
                from esc_eval.serve.engines.embedded import embedded_model_path

                path = str(embedded_model_path())
            self.tokenizer = w.load_tokenizer(path)
            self.info = {"kind": "random", "input_len": cfg.input_len, "output_len": cfg.max_tokens, "tokenizer": path}
        elif cfg.workload == "dialogues" and cfg.role_url:
            from esc_eval.sim.cards.card import load_cards, sample_cards

            cards = sample_cards(cfg.language) if cfg.cards == "sample" else load_cards(cfg.cards, cfg.language)
            from esc_eval.sim.dialogue.prompts import check_strategy

            try:
                check_strategy(cfg.strategy)  # a named strategy, or one with seeker controls
            except ValueError as e:
                raise BenchInputError(f"--strategy {cfg.strategy!r}: {e}") from None
            self.cards = cards
            self.info = {"kind": "live_role", "cards": cfg.cards, "role_url": cfg.role_url, "role_model": cfg.role_model,
                         "distinct": len(cards)}
        else:
            self.rows, info = w.load_dialogue_rows(Path(cfg.source) if cfg.source else None, cfg.language)
            self.info = {**info, "distinct": len(self.rows),
                         "kind": ("replayed_seeker:" if cfg.workload == "dialogues" else "judge:") + info["kind"]}

    def units(self, arm: Arm) -> Iterator[Unit]:
        import esc_eval.sim.bench.serve.workloads as w

        cfg = self.cfg
        if cfg.workload == "random":
            return w.random_units(self.tokenizer, cfg.input_len, cfg.max_tokens, cfg.seed)
        if cfg.workload == "judge":
            from esc_eval.sim.judging.config import JudgeConfig
            from esc_eval.serve.registry.ref import ModelRef

            judge = JudgeConfig(model=ModelRef(model=f"openai/{cfg.model}", params=self.params), method=cfg.judge_method,
                                prompt_order=arm.prompt_order or "dialogue_first", name="bench-serve")
            return w.judge_units(self.rows, judge)
        if cfg.role_url:
            from esc_eval.serve.backends.openai_http import OpenAIChatModel
            from esc_eval.serve.calls.retry import RetryingChatModel, RetryPolicy

            self.role = role = RetryingChatModel(
                OpenAIChatModel(cfg.role_model or "", base_url=cfg.role_url, timeout_s=cfg.timeout_s),
                RetryPolicy(max_attempts=3, timeout_s=cfg.timeout_s))
            return w.live_units(self.cards, role, cfg.rounds, self.params,
                                GenerationParams(max_tokens=cfg.role_max_tokens, temperature=cfg.temperature), cfg.strategy)
        return w.replay_units(self.rows, cfg.rounds, self.params)


# -- the run ------------------------------------------------------------------------------------
def _level_summary(run: LevelRun, slos: dict[str, float], seen: set[int], interrupted: bool = False,
                   detailed: bool = False) -> dict[str, Any]:
    shape = run.shape
    repeated = 0
    for idx in run.source_indices:
        repeated += idx in seen
        seen.add(idx)
    out = {"max_concurrency": shape.concurrency, "request_rate": shape.rate if shape.rate is not None else "inf",
           "num_units": shape.count, "duration_bound_s": shape.duration_s, "warmup_units": shape.warmup,
           "warmup_failed": run.warmup_failed, "units_started": run.launched, "repeated_units": repeated}
    out.update(level_metrics(run.recorder.records, run.duration_s, slos, run.units_completed, run.units_failed,
                             run.unit_errors))
    if detailed:
        out.update(request_details(run.recorder.records, run.started))
    if interrupted:
        out["interrupted"] = True
        out["units_in_flight_dropped"] = run.in_flight
    return out


async def _run_arm(arm: Arm, cfg: ServeBenchConfig, workload: Workload, levels: list[LoadShape], slos: dict[str, float],
                   state: dict[str, Any], on_progress: Callable[[str, LevelRun], None] | None) -> None:
    units = workload.units(arm)
    _stop_on_sigint(state)
    client = StreamingClient(arm.base_url or "", cfg.model, timeout_s=cfg.timeout_s, session_header=arm.session_header,
                             ignore_eos=cfg.ignore_eos and cfg.workload == "random", fixed_session=cfg.session_id)
    try:
        for shape in levels:
            run = LevelRun(shape)
            state["current"] = run
            await run_level(units, client, run, (lambda r: on_progress(arm.name, r)) if on_progress else None)
            state["current"] = None
            for idx in run.warmup_indices:
                state["seen"].add(idx)
            state["levels"].append(_level_summary(run, slos, state["seen"], detailed=cfg.save_detailed))
            if on_progress:
                on_progress(arm.name, run)
    finally:
        await client.close()
        if workload.role is not None:
            await workload.role.close()


def _stop_on_sigint(state: dict[str, Any]) -> None:
    """Ctrl-C stops the arm: the level starts no more units and this task is cancelled. Not left to
    asyncio.run's own handler, which only cancels the task: under load a run went on for a minute
    after Ctrl-C (a unit that swallowed the cancel kept its slot starting units)."""
    import signal

    loop, main = asyncio.get_running_loop(), asyncio.current_task()

    def stop() -> None:
        state["interrupted"] = True
        if state["current"] is not None:
            state["current"].stop = True
        if main is not None:
            main.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, stop)
    except (NotImplementedError, RuntimeError, ValueError):
        pass  # not the main thread (a caller's own loop): Ctrl-C is the caller's


def bench_serve(cfg: ServeBenchConfig, arms: list[Arm] | None = None,
                on_progress: Callable[[str, LevelRun], None] | None = None) -> dict[str, Any]:
    """Run every arm's sweep; returns the JSON-ready result (also after Ctrl-C: `interrupted`)."""
    slos = parse_slos(cfg.slos)  # a bad SLO stops us here, before any load
    levels = cfg.levels()
    arms = arms or default_arms(cfg)
    if cfg.routing:
        from esc_eval.serve.app.application import build_app_args
        from esc_eval.sim.bench.serve.routing import routing_config

        for mode in cfg.routing:  # an unknown model or bad setting stops us before Ray starts
            build_app_args(routing_config(mode, cfg.model, cfg.replicas, cfg.kv_cache_gib, cfg.max_num_seqs))
    if cfg.role_url:
        check_endpoint(cfg.role_url, cfg.role_model or "", what="--role-url")
    for arm in arms:
        if arm.routing is None:
            check_endpoint(arm.base_url or "", cfg.model)
    workload = Workload(cfg)
    result: dict[str, Any] = {
        "benchmark": "esc-eval bench serve", "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "workload": cfg.workload, "model_id": cfg.model, "base_url": cfg.base_url, "source": workload.info,
        "percentiles": [50, 90, 99], "config": cfg.model_dump(mode="json"), "arms": [], "interrupted": False,
    }
    deployed: dict[str, Any] = {}
    try:
        for arm in arms:
            state: dict[str, Any] = {"levels": [], "current": None, "seen": set()}
            entry: dict[str, Any] = {"name": arm.name, "routing": arm.routing, "prompt_order": arm.prompt_order,
                                     "session_header": arm.session_header, "levels": state["levels"]}
            result["arms"].append(entry)
            try:
                if arm.routing is not None:
                    entry.update(_deploy(arm, cfg, deployed))
                if arm.before is not None:
                    arm.before()
                entry["base_url"] = arm.base_url
                counts = _replica_counts(arm, cfg)
                try:
                    asyncio.run(_run_arm(arm, cfg, workload, levels, slos, state, on_progress))
                except asyncio.CancelledError:
                    if not state.get("interrupted"):
                        raise
                if counts is not None:
                    from esc_eval.sim.bench.serve.routing import prefix_cache_use

                    entry["prefix_cache"] = prefix_cache_use(counts, _replica_counts(arm, cfg) or [])
                if state.get("interrupted"):
                    raise KeyboardInterrupt
            except KeyboardInterrupt:
                result["interrupted"] = True
                if state["current"] is not None:
                    state["levels"].append(_level_summary(state["current"], slos, state["seen"], interrupted=True,
                                                          detailed=cfg.save_detailed))
                break
    finally:
        _undeploy(deployed)
    if len(result["arms"]) > 1:
        base = result["arms"][0]
        result["ratios_vs"] = base["name"]
        result["ratios"] = {a["name"]: [ratios(lv, bl) for lv, bl in zip(a["levels"], base["levels"])]
                            for a in result["arms"][1:]}
    return result


def _ray_serve():
    from esc_eval.serve.app.deploy import ray_modules

    return ray_modules()


def _replica_counts(arm: Arm, cfg: ServeBenchConfig) -> list[dict[str, Any]] | None:
    """The token counts of the replicas serving the arm (its Serve app known), else None."""
    if arm.app is None:
        return None
    from esc_eval.sim.bench.engine_probe import probe_replicas

    return probe_replicas([(cfg.model, arm.app)])


def _deploy(arm: Arm, cfg: ServeBenchConfig, deployed: dict[str, Any]) -> dict[str, Any]:
    """Serve the arm's routing mode: a fresh app, or the one already up for this mode with its
    replicas' prefix caches emptied (arms that differ only in prompt order share one deployment).
    Sets arm.base_url and checks the model is served."""
    from esc_eval.sim.bench.serve.routing import (delete_app, deploy_routing_app, ensure_serve, reset_prefix_cache,
                                                   routing_config)

    if deployed.get("mode") == arm.routing:
        arm.base_url, arm.app = deployed["url"], deployed["app"]
        return {"app": deployed["app"], "replicas": cfg.replicas, "deploy_s": 0.0,
                "prefix_cache_reset": reset_prefix_cache(deployed["app"], cfg.model)}
    if deployed.get("app"):
        delete_app(deployed.pop("app"))
    if "port" not in deployed:
        started, port = ensure_serve(cfg.address)
        deployed.update(started_ray=started, port=port)
    app_cfg = routing_config(arm.routing or "default", cfg.model, cfg.replicas, cfg.kv_cache_gib, cfg.max_num_seqs,
                             port=deployed["port"])
    deployed.update(app=app_cfg.app_name, mode=None)
    arm.base_url, seconds = deploy_routing_app(app_cfg, cfg.deploy_timeout_s)
    arm.app = app_cfg.app_name
    deployed.update(mode=arm.routing, url=arm.base_url)
    check_endpoint(arm.base_url, cfg.model)
    return {"app": app_cfg.app_name, "replicas": cfg.replicas, "deploy_s": round(seconds, 1)}


def _undeploy(deployed: dict[str, Any]) -> None:
    """Delete the last app, and stop the Ray this run started."""
    try:
        if deployed.get("app"):
            from esc_eval.sim.bench.serve.routing import delete_app

            delete_app(deployed.pop("app"))
    finally:
        if deployed.get("started_ray"):
            import ray

            _, serve = _ray_serve()
            try:
                serve.shutdown()
            finally:
                ray.shutdown()
