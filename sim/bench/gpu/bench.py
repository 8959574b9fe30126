"""`esc-eval bench gpu`: scoring and simulation on whatever this machine has (a GPU, else the CPU),
ours against a minimal vLLM reference on the same engines in the same run.

ours        what `esc-eval score` / `esc-eval simulate` run with the defaults as shipped and only
            the models given: the run's placement (sim/driver/placement.py), run_scoring / run_simulation
            on the Ray pool. One marked warm-up dialogue per worker first (engines started and
            compiled outside the clock), the engines' prefix caches emptied, then the clock runs
            over the whole call on N distinct inputs.
reference   sim/bench/gpu/reference.py: vLLM's offline `LLM.generate` over the same judge prompts;
            a two-engine asyncio loop over bare `AsyncLLM`s for the same 5-round dialogues. Same
            model folders, engine arguments and environment; run after ours, whose engines are gone.

Inputs are distinct (a repeated input is a prefix-cache hit, not a measurement): the source
dialogues repeated, each copy opened by its own case tag (sim/bench/loops/scale.scale_dialogues, as
../shared/tools/gpu/mkdialogues.py does on the GPU machine); the role cards repeated, each copy's
problem ending with its own tag. Per side: dialogues/s, the prompt tokens the prefix cache did not
serve (vLLM's own per-request counts: sim/bench/engine_probe.py for ours) per second, generated
tokens per second, and the share of the prefill-FLOP bound (sim/bench/gpu/hardware.py) the side
reached; ours / reference for each. vLLM's counts and the emptied prefix caches reach our engines
wherever the plan put them: the pool's workers (in-process) or the Serve replicas (serve mode, the
default on GPUs). Each side says how many GPUs it held (ours: the plan's, every replica on every GPU
it packed; the reference: its engines' tensor-parallel GPUs), and per-GPU rates beside the totals,
so on a node with more GPUs than one engine uses, `ours_vs_reference_per_gpu` compares like with like.
"""
from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Literal, Optional

from pydantic import BaseModel, Field

from esc_eval.serve.registry.ref import DEFAULT_MODEL, ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.bench.loops.scale import COPY_MARK

ORDERS = ("rubric_first", "dialogue_first")
PHASES = ("scoring", "simulation")  # what bench gpu measures unless told: both
# Sizes when none is given: what a GPU measures in minutes; a handful on the CPU.
DEFAULT_SIZES = {"gpu": (2000, 256), "cpu": (4, 4)}
# Worker settings a pool's actors are started with: two phases whose executions agree share a pool.
WORKER_SHAPE = ("executor", "ray_address", "workers", "num_cpus_per_worker", "num_gpus_per_worker", "env", "cpu_bind",
                "dtype", "placement_timeout_s", "worker_start_timeout_s")


class GpuBenchConfig(BaseModel):
    """What `esc-eval bench gpu` measures."""

    judge: str = Field(DEFAULT_MODEL, description="Judge of the scoring phase (registry name or vllm/ spec, e.g. vllm//models/j7b).")
    role: str = Field(DEFAULT_MODEL, description="Role-play model of the simulation phase.")
    target: str = Field(DEFAULT_MODEL, description="Model under test of the simulation phase.")
    dialogues: Optional[int] = Field(None, ge=1, description="Distinct dialogues scored (default: 2,000 on a GPU, 4 on the CPU).")
    sim_dialogues: Optional[int] = Field(None, ge=1, description="Distinct dialogues simulated (default: 256 on a GPU, 4 on the CPU).")
    prompt_orders: list[Literal["rubric_first", "dialogue_first"]] = Field(
        default_factory=lambda: list(ORDERS), min_length=1, description="Judge prompt orders measured, one scoring run each.")
    phases: list[Literal["scoring", "simulation"]] = Field(
        default_factory=lambda: list(PHASES), min_length=1, description="What to measure.")
    source: Optional[str] = Field(None, description="Dialogues to score: run folder or official JSON (default: ../shared's official samples, else runs/demo).")
    cards: Optional[str] = Field(None, description="Role cards (default: ../shared's official English cards, else the shipped samples).")
    max_tokens: Optional[int] = Field(None, ge=1, description="Max new tokens per turn of both sides (default: as shipped, the registry's).")
    dimensions: Optional[list[str]] = Field(None, min_length=1, description="Dimensions scored (default: all seven).")
    peak_tflops: Optional[float] = Field(None, gt=0, description="Peak dense bf16 TFLOP/s for the bound (default: the table's for the GPU; none for a CPU).")


# -- inputs ------------------------------------------------------------------------------------
def distinct_dialogues(source: str | None, n: int, mark: str = COPY_MARK) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """n dialogue rows, copies of the source's opened by their own tag, and where they came from."""
    from esc_eval.sim.bench.loops.scale import scale_dialogues
    from esc_eval.sim.bench.dialogues import load_bench_dialogues

    base, src = load_bench_dialogues(10**9, Path(source) if source else None)
    return list(scale_dialogues(base, n, mark=mark)), {**src, "distinct": n, "made_by": f"the {len(base)} source dialogues "
                                                       f"repeated, each copy's first turn opened by '({mark} k)'"}


def distinct_cards(source: str | None, n: int, mark: str = COPY_MARK) -> tuple[list[Any], str]:
    """n role cards, copies of the source's whose problem ends with its own tag."""
    from esc_eval.sim.bench.dialogues import REPO
    from esc_eval.sim.cards.card import load_cards, sample_cards

    official = REPO.parent / "shared" / "data" / "esc-eval" / "cards" / "card_high_en.json"
    path = Path(source) if source else (official if official.exists() else None)
    base = load_cards(path) if path else sample_cards(language="en")
    out = []
    for i in range(n):
        c = base[i % len(base)]
        tag = f" ({mark} {i})"
        out.append(c.model_copy(update={"id": f"{c.id}-{mark}{i}", "problem": c.problem + tag,
                                        "text_override": c.text_override + tag if c.text_override else None}))
    return out, f"{path or 'the shipped sample cards'}: {len(base)} cards repeated, each copy's problem ending with '({mark} k)'"


# -- ours ----------------------------------------------------------------------------------------
class _Pools:
    """One worker pool at a time: kept while the next phase's workers would be started the same way."""

    def __init__(self) -> None:
        self.pool, self.shape = None, None

    def get(self, ex: ExecutionConfig):
        from esc_eval.sim.pool.pool import WorkerPool

        shape = json.dumps(ex.model_dump(mode="json", include=set(WORKER_SHAPE)), sort_keys=True)
        if self.pool is None or shape != self.shape:
            self.close()
            self.pool, self.shape = WorkerPool(ex), shape
        return self.pool

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.pool = self.shape = None


def _measured(run: Callable[..., dict[str, Any]], pool, warm: Callable[[], Any], env: dict[str, str]) -> dict[str, Any]:
    """Warm-up, prefix caches emptied, then `run` timed; vLLM's counts over the timed call, from the
    engines in the pool's workers and in the Serve replicas the placement (`env`) names."""
    from esc_eval.sim.bench.engine_probe import counts_delta, probe_engines

    t0 = time.perf_counter()
    warm()
    warm_s = time.perf_counter() - t0
    before = probe_engines(pool, env, reset_prefix_cache=True)
    t0 = time.perf_counter()
    result = run()
    wall = time.perf_counter() - t0
    after = probe_engines(pool, env)
    keys = ("model", "where", "device", "dtype", "kv_cache", "engine_kwargs")
    return {"wall_s": round(wall, 3), "warm_up_s": round(warm_s, 1), "result": result,
            "vllm_counts": counts_delta(before, after), "engines": [{k: e.get(k) for k in keys} for e in after]}


def ours_gpus(plan: dict[str, Any] | None, execution: ExecutionConfig, phase: str) -> float:
    """GPUs our side held in a phase: serve mode, the GPUs the plan packed the phase's replicas on (its
    layout holds max_replicas); in-process, the workers' GPUs; none on the CPU."""
    if plan and plan.get("mode") == "serve":
        layout = (plan.get("layout") or {}).get(phase)
        if layout:
            return float(len(layout))
        return float(sum((e.get("gpu_fraction") or e.get("gpus") or 0) * ((e.get("replicas") or [1, 1])[-1])
                         for e in plan.get("engines") or [] if e.get("where") == "serve deployment"))
    return float(execution.workers * execution.num_gpus_per_worker)


def reference_gpus(engine_kwargs: list[dict[str, str]], device: str) -> float:
    """GPUs the reference's engines held: in one process on the first GPUs, its widest tensor-parallel
    engine's (engine kwargs as repr'd strings); none on the CPU."""
    if device != "gpu":
        return 0.0
    return float(max([int(k.get("tensor_parallel_size", "1")) for k in engine_kwargs] or [1]))


def _placement(run_dir: Path) -> dict[str, Any] | None:
    """The plan the command followed, as it recorded it in the run's manifest (None: nothing placed)."""
    from esc_eval.sim.runs.runfolder import RunFolder

    return RunFolder(str(run_dir), create=False).read_manifest().get("placement")


def ours_scoring(rows, warm_rows, cfg: ScoringConfig, pools: _Pools, folder: Path,
                 say) -> tuple[dict[str, Any], ScoringConfig, dict[str, Any] | None]:
    """`score` on `rows` (a run folder written first, as a user's exists), timed after a warm-up:
    (figures, the config as placed, the plan as the run recorded it)."""
    from esc_eval.sim.launch.placed import placed_scoring
    from esc_eval.sim.runs.runfolder import RunFolder
    from esc_eval.sim.jobs.scoring import run_scoring

    order = cfg.judge.prompt_order
    run_dir, warm_dir = folder / f"{order}-run", folder / f"{order}-warm"
    for path, rs in ((warm_dir, warm_rows), (run_dir, rows)):
        RunFolder(path).write_part("dialogues", rs)  # a user's run folder exists before `score`
    with placed_scoring(cfg, str(run_dir), say=say) as cfg:  # what `esc-eval score` does
        pool = pools.get(cfg.execution)
        m = _measured(lambda: run_scoring(cfg, str(run_dir), pool=pool), pool,
                      lambda: run_scoring(cfg, str(warm_dir), pool=pool), cfg.execution.env)
    res = m.pop("result")
    m.update(path="run_scoring on the Ray pool (what `esc-eval score` runs)", dialogues=len(rows), scored=res["items"],
             failed=res["failed"], outcome=res["outcome"], prompt_tokens_in_rows=res["tokens"],
             execution=cfg.execution.model_dump(mode="json"))
    return m, cfg, _placement(run_dir)


def ours_simulation(cards, warm_cards, cfg: SimulationConfig, pools: _Pools, folder: Path,
                    say) -> tuple[dict[str, Any], SimulationConfig, dict[str, Any] | None]:
    """`simulate` on `cards`, timed after a warm-up: (figures, the config as placed, the plan)."""
    from esc_eval.sim.cards.card import write_cards
    from esc_eval.sim.launch.placed import placed_simulation
    from esc_eval.sim.jobs.simulation import run_simulation

    run_cfg = cfg.model_copy(update={"cards": str(write_cards(cards, folder / "cards.json"))})
    warm_cards_file = str(write_cards(warm_cards, folder / "warm-cards.json"))
    run_dir = folder / "sim-run"
    with placed_simulation(run_cfg, str(run_dir), say=say) as run_cfg:  # what `esc-eval simulate` does
        pool = pools.get(run_cfg.execution)
        warm_cfg = run_cfg.model_copy(update={"cards": warm_cards_file, "rounds": 1})
        m = _measured(lambda: run_simulation(run_cfg, run_dir, pool=pool), pool,
                      lambda: run_simulation(warm_cfg, folder / "sim-warm", pool=pool), run_cfg.execution.env)
    res = m.pop("result")
    m.update(path="run_simulation on the Ray pool (what `esc-eval simulate` runs)", dialogues=len(cards),
             completed=res["items"], failed=res["failed"], outcome=res["outcome"], generated_tokens_in_rows=res["tokens"],
             execution=run_cfg.execution.model_dump(mode="json"))
    return m, run_cfg, _placement(run_dir)


# -- figures ---------------------------------------------------------------------------------------
def failed_phases(out: dict[str, Any]) -> list[str]:
    """One line per phase of ours that did not answer every call: its rate times failures, not the
    engines (`bench gpu` writes its JSON, then exits 1 with these lines)."""
    sections = [("simulation", (out.get("simulation") or {}).get("ours"))]
    sections += [(f"scoring {order}", s.get("ours")) for order, s in (out.get("scoring") or {}).items()]
    lines = []
    for phase, o in sections:
        if not o:
            continue
        outcome = o.get("outcome") or {}
        bad = (o.get("failed") or 0) + (outcome.get("error_rows") or 0)
        if bad:
            first = f"; first error: {outcome['first_error']}" if outcome.get("first_error") else ""
            lines.append(f"{phase}: {o.get('failed') or 0} of {o.get('dialogues')} dialogues failed, "
                         f"{outcome.get('error_rows') or 0} judge calls failed{first}: not a measurement")
    return lines


RATES = ("dialogues_per_s", "uncached_prefill_tokens_per_s", "decode_tokens_per_s")


def _rates(side: dict[str, Any], tokens: dict[str, dict[str, int]] | None, n: int, gpus: float = 0.0) -> None:
    """Per-second figures of one side, from its wall time and vLLM's counts per model folder; with
    the GPUs it held, the same per GPU."""
    wall = side["wall_s"]
    side["dialogues_per_s"] = round(n / wall, 3) if wall > 0 else None
    if not tokens:
        side.update(tokens=None, uncached_prefill_tokens_per_s=None, decode_tokens_per_s=None)
    else:
        for c in tokens.values():
            c["uncached_prompt_tokens"] = c.get("prompt_tokens", 0) - c.get("cached_prompt_tokens", 0)
        uncached = sum(c["uncached_prompt_tokens"] for c in tokens.values())
        decoded = sum(c.get("generation_tokens", 0) for c in tokens.values())
        side.update(tokens=tokens, uncached_prefill_tokens_per_s=round(uncached / wall, 1),
                    decode_tokens_per_s=round(decoded / wall, 1))
    side["gpus"] = gpus
    side["per_gpu"] = {k: round(side[k] / gpus, 3) if side.get(k) is not None else None for k in RATES} if gpus else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def compare(ours: dict[str, Any], ref: dict[str, Any], params: dict[str, float | None], peak: dict[str, Any] | None) -> dict[str, Any]:
    """ours / reference per rate, and the prefill-FLOP bound: 2 x parameters x the fewer uncached
    prompt tokens of the two sides (per model folder) at the peak, and the share each side reached."""
    from esc_eval.sim.bench.gpu.hardware import prefill_bound_s

    out: dict[str, Any] = {"ours_vs_reference": {k: _ratio(ours.get(k), ref.get(k)) for k in RATES}}
    if ours.get("per_gpu") and ref.get("per_gpu"):  # GPUs held on both sides: like with like on any node
        out["ours_vs_reference_per_gpu"] = {k: _ratio(ours["per_gpu"][k], ref["per_gpu"][k]) for k in RATES}
    sides = [s["tokens"] for s in (ours, ref) if s.get("tokens")]
    models = sorted({m for t in sides for m in t})
    uncached = {m: min(t[m]["uncached_prompt_tokens"] for t in sides if m in t) for m in models}
    bound = prefill_bound_s(params, uncached, peak["tflops"] if peak else None)
    out["prefill_bound"] = {
        "uncached_prompt_tokens": uncached, "parameters": {m: params.get(m) for m in models},
        "peak_bf16_tflops": peak["tflops"] if peak else None, "bound_s": round(bound, 3) if bound is not None else None,
        "share_ours": _ratio(bound, ours["wall_s"]), "share_reference": _ratio(bound, ref["wall_s"]),
        "note": None if bound is not None else ("no peak for this device (a CPU has no entry: --peak-tflops)" if not peak
                                                else "a model's parameter count is unknown")}
    return out


def _params(refs: list[ModelRef], execution: ExecutionConfig, plan) -> dict[str, float | None]:
    """Parameter count per model folder (the key vLLM's counts use)."""
    from esc_eval.serve.backends.vllm_engine import resolve_model_path
    from esc_eval.sim.bench.gpu.reference import model_setup
    from esc_eval.sim.bench.gpu.hardware import model_params

    return {resolve_model_path(model_setup(r, execution, plan)[0]): model_params(r.model) for r in refs}


# -- the benchmark -------------------------------------------------------------------------------------
def run_bench_gpu(cfg: GpuBenchConfig, say: Callable[[str], None] = print,
                  on_part: Callable[[str, dict[str, Any]], None] = lambda name, part: None) -> dict[str, Any]:
    """Everything `bench gpu` measures, as one JSON-able dict (no printing but `say`'s progress lines);
    `on_part` gets each side's raw figures as soon as they are measured (what a caller keeps when it
    has to stop the benchmark before its end: `esc-eval check`'s deadline)."""
    from esc_eval.serve.registry.registry import resolve
    import esc_eval.sim.bench.gpu.reference as reference
    from esc_eval.sim.bench.gpu.hardware import machine, versions

    for m in (cfg.judge, cfg.role, cfg.target):
        resolve(m)  # an unknown model: one line before anything starts
    where = machine(cfg.peak_tflops)
    n_score, n_sim = cfg.dialogues or DEFAULT_SIZES[where["device"]][0], cfg.sim_dialogues or DEFAULT_SIZES[where["device"]][1]
    sim_cfg = SimulationConfig(role=_ref(cfg.role, cfg.max_tokens), targets=[_ref(cfg.target, cfg.max_tokens)])
    judge = {"model": {"model": cfg.judge}, **({"dimensions": cfg.dimensions} if cfg.dimensions else {})}
    score_cfgs = [ScoringConfig(judge=JudgeConfig(**judge, prompt_order=o)) for o in cfg.prompt_orders]
    out: dict[str, Any] = {"bench": "gpu", "machine": where, "versions": versions(),
                           "settings": {**cfg.model_dump(mode="json"), "dialogues": n_score, "sim_dialogues": n_sim}}
    pools = _Pools()
    ours: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="esc-bench-gpu-") as tmp:
        folder = Path(tmp)
        try:
            if "simulation" in cfg.phases:
                cards, out["settings"]["cards_source"] = distinct_cards(cfg.cards, n_sim)
                warm_cards, _ = distinct_cards(cfg.cards, max(1, sim_cfg.execution.workers), mark="warm-up")
                say(f"[bench gpu] simulation, ours: {n_sim} dialogues")
                ours["simulation"], sim_cfg, sim_plan = ours_simulation(cards, warm_cards, sim_cfg, pools, folder, say)
                on_part("simulation.ours", ours["simulation"])
                out["settings"]["simulation_config"] = sim_cfg.model_dump(mode="json")
                out["settings"]["simulation_placement"] = sim_plan
            if "scoring" in cfg.phases:
                rows, out["settings"]["dialogues_source"] = distinct_dialogues(cfg.source, n_score)
                warm_rows, _ = distinct_dialogues(cfg.source, max(1, score_cfgs[0].execution.workers), mark="warm-up")
                for i, sc in enumerate(score_cfgs):
                    say(f"[bench gpu] scoring, ours: {n_score} dialogues, {sc.judge.prompt_order}")
                    ours[sc.judge.prompt_order], score_cfgs[i], score_plan = ours_scoring(rows, warm_rows, sc, pools,
                                                                                          folder, say)
                    on_part(f"scoring.{sc.judge.prompt_order}.ours", ours[sc.judge.prompt_order])
                out["settings"]["scoring_config"] = score_cfgs[0].model_dump(mode="json")
                out["settings"]["scoring_placement"] = score_plan
        finally:
            pools.close()  # the references get the devices ours used
    if "simulation" in cfg.phases:
        say(f"[bench gpu] simulation, reference: {n_sim} dialogues")
        ref = reference.simulation_reference(cards, warm_cards, sim_cfg, sim_plan)
        on_part("simulation.reference", ref)
        o = ours["simulation"]
        _rates(o, o["vllm_counts"], n_sim, ours_gpus(sim_plan, sim_cfg.execution, "simulation"))
        _rates(ref, ref["tokens"], n_sim, reference_gpus([e["engine_kwargs"] for e in ref["engines"].values()],
                                                         where["device"]))
        out["simulation"] = {"ours": o, "reference": ref,
                             **compare(o, ref, _params([sim_cfg.role, *sim_cfg.targets], sim_cfg.execution, sim_plan),
                                       where["peak_bf16"])}
    if "scoring" in cfg.phases:
        say(f"[bench gpu] scoring, reference: {n_score} dialogues, {', '.join(cfg.prompt_orders)}")
        ref = reference.score_reference(rows, warm_rows, score_cfgs[0].judge, list(cfg.prompt_orders),
                                        score_cfgs[0].execution, score_plan)
        on_part("scoring.reference", ref)
        judge_params = _params([score_cfgs[0].judge.model], score_cfgs[0].execution, score_plan)
        out["scoring"] = {}
        for order in cfg.prompt_orders:
            o, r = ours[order], {**ref["by_order"][order], "engine_start_s": ref["engine_start_s"],
                                 **{k: ref[k] for k in ("engine", "model_path", "engine_kwargs", "sampling")}}
            _rates(o, o["vllm_counts"], n_score, ours_gpus(score_plan, score_cfgs[0].execution, "scoring"))
            _rates(r, r["tokens"], n_score, reference_gpus([r["engine_kwargs"]], where["device"]))
            out["scoring"][order] = {"ours": o, "reference": r, **compare(o, r, judge_params, where["peak_bf16"])}
    out["notes"] = NOTES
    return out


def _ref(model: str, max_tokens: int | None) -> ModelRef:
    """A configured model as `simulate --role/--target` gives it (max_tokens only when overridden)."""
    return ModelRef(model=model, params={"max_tokens": max_tokens}) if max_tokens else ModelRef(model=model)


NOTES = [
    "ours: the command's own path (placement, run_scoring / run_simulation on the Ray pool) with the shipped defaults; "
    "one marked warm-up dialogue per worker and engine start are outside wall_s (warm_up_s)",
    "reference: vLLM's offline LLM.generate over the same judge prompts; bare AsyncLLM engines for the same 5-round "
    "dialogues, every dialogue in flight; same model folders, engine arguments and environment, run after ours",
    "inputs are distinct: every copy of a source dialogue or card carries its own tag; prefix caches are emptied "
    "before each timed run",
    "tokens: vLLM's per-request counts (prompt, prefix-cache hits, generated); uncached = prompt - cached; "
    "ours' come from the engines in the pool's workers or the Serve replicas the plan deployed",
    "gpus: what each side held (ours: the GPUs the plan packed the phase on; the reference: its engines' "
    "tensor-parallel GPUs); per_gpu and ours_vs_reference_per_gpu compare the sides on a node with more GPUs",
    "prefill bound = 2 x parameters x uncached prompt tokens (the fewer of the two sides, per model) / the card's "
    "peak dense bf16 FLOP/s; share = bound / wall time (decode and attention FLOPs left out: a floor)",
]


__all__ = ["GpuBenchConfig", "compare", "distinct_cards", "distinct_dialogues", "ours_gpus", "reference_gpus",
           "run_bench_gpu"]
