"""How long a planned run would take: arithmetic on measured per-GPU rates, not a measurement of the plan.

Per phase of the plan (serve/plan/planner.py):
- simulation: the most, over its self-hosted deployments, of tokens / rate. tokens = the calls the
  deployment answers (the role: every dialogue's seeker turns; a target: its own dialogues' turns) x
  the expected answer tokens (Workload, from the config). rate = the measured generated tokens/s per
  GPU x P_ref / P (decode reads every weight once per step: memory-bound, so a model twice as large
  decodes half as fast) x the deployment's GPUs (replicas x GPUs per replica, fractions included).
  In-process engines share their worker's GPUs: the phase's work over all the workers' GPUs.
- scoring: dialogues / (the judge's measured dialogues/s per GPU for the prompt order x P_ref / P x
  the measured dimensions / the scored ones) / the judge's GPUs.
- + ENGINE_START_S per phase: the engines start and compile before the first row.
API models are external: their time is not projected. Rates measured on another GPU type than the
plan's are refused (RatesError): decode follows memory bandwidth and prefill compute, and no one
factor of a peak table scales both; measure there with `esc-eval bench gpu`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from esc_eval.serve.plan.model import EnginePlan, Plan
from esc_eval.serve.plan.text import plural, tokens_k

ENGINE_START_S = 180.0  # first rows 1:30-3:00 after the command on the H100 (the longer: a fresh machine)
DIMENSIONS = 7


class RatesError(ValueError):
    """A rates file that cannot be used: one line naming the file and why."""


@dataclass(frozen=True)
class Rates:
    """Per-GPU rates a projection scales, and where they come from."""

    decode_tokens_per_s: float | None  # generated tokens/s per GPU
    decode_params: float | None  # parameters of the model(s) it was measured on (token-weighted mean)
    judge_dialogues_per_s: dict[str, float]  # per prompt order, per GPU
    judge_params: float | None
    judge_dimensions: int = DIMENSIONS
    gpu: str | None = None  # Ray's accelerator type, e.g. H100
    gpu_name: str | None = None  # as the driver names it
    batch: int | None = None  # sequences per GPU the decode rate was measured at (None: not recorded)
    source: str = ""

    def judge_rate(self, order: str, params_b: float | None, dimensions: int) -> float | None:
        """The judge's dialogues/s per GPU for a model of `params_b` billions scoring `dimensions`."""
        base = self.judge_dialogues_per_s.get(order)
        if base is None or not self.judge_params or not params_b:
            return None
        return base * self.judge_params / (params_b * 1e9) * self.judge_dimensions / max(dimensions, 1)

    def decode_rate(self, params_b: float | None) -> float | None:
        """Generated tokens/s per GPU for a model of `params_b` billions."""
        if not self.decode_tokens_per_s or not self.decode_params or not params_b:
            return None
        return self.decode_tokens_per_s * self.decode_params / (params_b * 1e9)

    def same_gpu(self, accelerator_type: str | None) -> bool:
        """Whether the rates were measured on a GPU of `accelerator_type` (unknown: assumed so)."""
        if not accelerator_type or not (self.gpu or self.gpu_name):
            return True
        kind = accelerator_type.lower()
        return kind == (self.gpu or "").lower() or (self.gpu is None and kind in (self.gpu_name or "").lower())


# The project's one GPU run (../shared/notes/gpu-h100.md): one H100 80GB HBM3, vLLM 0.26.0, random weights.
H100_RATES = Rates(
    decode_tokens_per_s=2052.0, decode_params=13.1e9,
    judge_dialogues_per_s={"dialogue_first": 12.1, "rubric_first": 3.73}, judge_params=7.38e9,
    gpu="H100", gpu_name="NVIDIA H100 80GB HBM3", batch=64,
    source="one H100 80GB run with random weights on vLLM 0.26 (../shared/notes/gpu-h100.md): decode 2,052 tok/s, "
           "plain vLLM on a 13.1B at 64 sequences; judge 7.38B, 12.1 dialogues/s dialogue_first at 64 in flight, "
           "3.73/s rubric_first at the old default concurrency 8")


def load_rates(path: str | Path) -> Rates:
    """Per-GPU rates from an `esc-eval bench gpu` JSON (RatesError: one line when it is not one)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise RatesError(f"--rates {p}: cannot read it ({e.strerror or e})") from None
    except ValueError:
        raise RatesError(f"--rates {p}: not JSON (an `esc-eval bench gpu` JSON is expected)") from None
    return rates_from_bench(data, str(p))


def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 else None


def rates_from_bench(data: Any, where: str = "rates") -> Rates:
    """Per-GPU rates from a bench gpu result (sim/bench/gpu/bench.py): `simulation.ours` generated tokens/s
    and `scoring[order].ours.dialogues_per_s`, over the machine's GPUs, with the models' parameters
    from each section's `prefill_bound.parameters`."""
    from esc_eval.serve.devices.gpus import accelerator_type

    if not isinstance(data, dict) or data.get("bench") != "gpu" or not isinstance(data.get("machine"), dict):
        raise RatesError(f"--rates {where}: not an `esc-eval bench gpu` JSON (no \"bench\": \"gpu\" with a \"machine\")")
    machine = data["machine"]
    gpus = [g for g in machine.get("gpus") or [] if isinstance(g, dict)]
    if machine.get("device") != "gpu" or not gpus:
        raise RatesError(f"--rates {where}: measured on the {machine.get('device') or 'unknown device'}, not a GPU: "
                         f"no per-GPU rates")
    n, name = len(gpus), str(gpus[0].get("name") or "")
    sections = [("simulation", (data.get("simulation") or {}).get("ours"))]
    sections += [(f"scoring.{k}", (v or {}).get("ours")) for k, v in (data.get("scoring") or {}).items()]
    failed = [k for k, o in sections if isinstance(o, dict) and (o.get("failed") or (o.get("outcome") or {}).get("error_rows"))]
    if failed:
        raise RatesError(f"--rates {where}: calls failed in {', '.join(failed)}: its rates time failures, not the GPU; "
                         f"measure again")
    sim = data.get("simulation") if isinstance(data.get("simulation"), dict) else {}
    decode, decode_params = _decode(sim, n)
    judge: dict[str, float] = {}
    judge_params = None
    for order, section in (data.get("scoring") or {}).items():
        rate = _num(((section or {}).get("ours") or {}).get("dialogues_per_s"))
        params = [v for v in (((section or {}).get("prefill_bound") or {}).get("parameters") or {}).values() if _num(v)]
        if rate and params:
            judge[order], judge_params = rate / n, float(params[0])
    if decode is None and not judge:
        raise RatesError(f"--rates {where}: neither a simulation decode rate nor a scoring rate with the model's "
                         f"parameters (simulation.ours.decode_tokens_per_s, scoring.<order>.ours.dialogues_per_s, "
                         f"prefill_bound.parameters)")
    dims = (data.get("settings") or {}).get("dimensions")
    versions = data.get("versions") or {}
    return Rates(decode_tokens_per_s=decode, decode_params=decode_params, judge_dialogues_per_s=judge,
                 judge_params=judge_params, judge_dimensions=len(dims) if isinstance(dims, list) and dims else DIMENSIONS,
                 gpu=accelerator_type(name), gpu_name=name or None, batch=None,
                 source=f"{where}: esc-eval bench gpu on {n} x {name or 'GPU'} (vLLM {versions.get('vllm', '?')}), "
                        f"ours, over the machine's {n} GPU{'s' if n != 1 else ''}")


def _decode(sim: dict[str, Any], gpus: int) -> tuple[float | None, float | None]:
    """(generated tokens/s per GPU, the token-weighted mean parameters of the models that made them)."""
    ours = sim.get("ours") or {}
    params = {k: float(v) for k, v in ((sim.get("prefill_bound") or {}).get("parameters") or {}).items() if _num(v)}
    rate = _num(ours.get("decode_tokens_per_s"))
    if rate is None and _num(ours.get("wall_s")) and _num(ours.get("generated_tokens_in_rows")):
        rate = ours["generated_tokens_in_rows"] / ours["wall_s"]  # the engines ran elsewhere (Serve): the rows' counts
    if rate is None or not params:
        return None, None
    # which model made how many tokens: ours' counts, else the reference's (same dialogues), else evenly
    counts = next((t for t in ((sim.get("ours") or {}).get("tokens"), (sim.get("reference") or {}).get("tokens"))
                   if isinstance(t, dict) and any(_num((c or {}).get("generation_tokens")) for c in t.values())), None)
    weights = {m: float((counts.get(m) or {}).get("generation_tokens") or 0) for m in params} if counts else {}
    total = sum(weights.values())
    mean = sum(params[m] * w for m, w in weights.items()) / total if total else sum(params.values()) / len(params)
    return rate / gpus, mean


@dataclass
class Workload:
    """What a run asks of its models, from its config (`esc-eval plan` counts it: sim/launch/run_plan.py)."""

    tokens: dict[str, float] = field(default_factory=dict)  # simulation: ref key -> tokens its calls generate
    answers: str = ""  # how the answer tokens were chosen, in words
    dialogues: int | None = None  # scoring: dialogues to score
    dimensions: int = DIMENSIONS
    prompt_order: str = "rubric_first"


@dataclass
class Part:
    """One deployment's (or the in-process workers') share of a phase."""

    name: str
    work: float  # tokens (simulation) or dialogues (scoring)
    gpus: float
    rate_per_gpu: float
    seconds: float
    sequences_per_gpu: float | None = None


@dataclass
class PhaseTime:
    phase: str
    seconds: float  # the slowest part, engine start not included
    start_s: float
    parts: list[Part]
    note: str = ""
    batch_limited_s: float | None = None  # each replica at the measured per-sequence speed (see _assumptions)

    @property
    def slowest(self) -> Part:
        return max(self.parts, key=lambda p: p.seconds)


@dataclass
class Projection:
    phases: list[PhaseTime]
    skipped: list[str]
    assumptions: list[str]

    @property
    def total_s(self) -> float:
        return sum(p.seconds + p.start_s for p in self.phases)

    def as_dict(self) -> dict[str, Any]:
        return {"total_s": round(self.total_s, 1), "phases": [asdict(p) | {"slowest": p.slowest.name} for p in self.phases],
                "not_projected": list(self.skipped), "assumptions": list(self.assumptions)}

    def lines(self) -> list[str]:
        out = ["projection (arithmetic on measured rates, not a measurement of this plan):"]
        for p in self.phases:
            out.append(f"  {p.phase}: {_t(p.seconds)} + {_t(p.start_s)} engine start; {p.note}")
        if self.phases:
            out.append(f"  total: {_t(self.total_s)}")
        out += [f"  not projected: {s}" for s in self.skipped]
        out += [f"  {a}" for a in self.assumptions]
        return out


def _t(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 5400 else f"{seconds / 60:.1f} min"


def _span(a: float, b: float) -> str:
    lo, hi = _t(a), _t(b)
    return f"{lo.rsplit(' ', 1)[0]}-{hi}" if lo.rsplit(" ", 1)[1] == hi.rsplit(" ", 1)[1] else f"{lo}-{hi}"


def _gpus(e: EnginePlan) -> float:
    lo = (e.replicas or (1, 1))[0]
    return lo * e.gpus_per_replica


def project(plan: Plan, work: Workload, rates: Rates = H100_RATES, *, worker_gpus: float = 0.0) -> Projection | None:
    """The projection of `plan` (None: a plan without GPUs). `worker_gpus`: the pool's GPUs in all
    (workers x GPUs per worker), what in-process engines share."""
    if not plan.hardware.gpus:
        return None
    phases, skipped = [], []
    external = [e.name for e in plan.engines if e.where.startswith("external")]
    if external:
        skipped.append(f"{', '.join(dict.fromkeys(external))} (API models: external)")
    for phase in dict.fromkeys(e.phase for e in plan.engines):
        hosted = [e for e in plan.engines if e.phase == phase and not e.where.startswith("external") and e.device == "gpu"]
        if not hosted:
            continue
        scoring = any("judge" in e.uses for e in hosted)
        made = _scoring(phase, hosted, work, rates, worker_gpus, skipped) if scoring else \
            _simulation(phase, hosted, work, rates, worker_gpus, skipped)
        if made is not None:
            phases.append(made)
    return Projection(phases, skipped, _assumptions(phases, plan, work, rates))


def _simulation(phase: str, hosted: list[EnginePlan], work: Workload, rates: Rates, worker_gpus: float,
                skipped: list[str]) -> PhaseTime | None:
    if not work.tokens:
        skipped.append(f"the {phase} phase (no dialogues counted: a Serve config, or no cards)")
        return None
    parts = []
    for e in hosted:
        tokens = sum(work.tokens.get(r, 0.0) for r in e.refs)
        rate = rates.decode_rate(e.params_b)
        if rate is None:
            skipped.append(f"{e.name} (no decode rate: " + ("its size is unknown)" if not e.params_b else "the rates have none)"))
            continue
        seqs = e.serve.get("max_num_seqs")
        per_gpu = seqs / e.gpus_per_replica if seqs and e.gpus_per_replica else None
        parts.append(Part(e.name, tokens, _gpus(e), rate, 0.0, per_gpu))
    if not parts:
        return None
    if hosted[0].where != "serve deployment":  # in-process: a worker's engines take turns on its GPUs
        gpus = worker_gpus or 1.0
        for p in parts:
            p.gpus, p.seconds = gpus, p.work / p.rate_per_gpu / gpus
        note = (f"in-process: {tokens_k(sum(p.work for p in parts))} tokens of {len(parts)} models on the workers' "
                f"{plural(gpus, 'GPU')}, the engines of a worker taking turns")
        return PhaseTime(phase, sum(p.seconds for p in parts), ENGINE_START_S, parts, note)
    for p in parts:
        p.seconds = p.work / (p.rate_per_gpu * p.gpus) if p.gpus else float("inf")
    slow = max(parts, key=lambda p: p.seconds)
    others = [p.seconds for p in parts if p is not slow]
    rest = (f" (the others {_span(min(others), max(others))})" if len(others) > 1 else
            f" (the other {_t(others[0])})" if others else "")
    note = (f"{slow.name} the slowest: {tokens_k(slow.work)} tokens at {slow.rate_per_gpu:,.0f} tok/s per GPU x "
            f"{plural(slow.gpus, 'GPU')}{rest}")
    return PhaseTime(phase, slow.seconds, ENGINE_START_S, parts, note, _batch_limited(parts, rates.batch))


def _batch_limited(parts: list[Part], batch: int | None) -> float | None:
    """The phase's time when a replica holding fewer sequences per GPU than the measured batch decodes
    only at the measured speed per sequence (rate / batch each), none faster than the rate itself."""
    if not batch or any(p.sequences_per_gpu is None for p in parts):
        return None
    return max(p.work / (p.rate_per_gpu * p.gpus * min(1.0, p.sequences_per_gpu / batch)) if p.gpus else float("inf")
               for p in parts)


def _scoring(phase: str, hosted: list[EnginePlan], work: Workload, rates: Rates, worker_gpus: float,
             skipped: list[str]) -> PhaseTime | None:
    """The scoring phase: each judge's dialogues at its rate on its GPUs; a panel's judges score in
    one pass, each on its own engine, so the slowest judge bounds the phase."""
    judges = [e for e in hosted if "judge" in e.uses]
    if not work.dialogues:
        skipped.append(f"the {phase} (the dialogues to score are not known: give --dialogues N)")
        return None
    parts = []
    for judge in judges:
        rate = rates.judge_rate(work.prompt_order, judge.params_b, work.dimensions)
        if rate is None:
            skipped.append(f"the {phase} (no judge rate for {work.prompt_order}" +
                           (f", {judge.name}'s size unknown)" if not judge.params_b else " in the rates)"))
            return None
        gpus = _gpus(judge) if judge.where == "serve deployment" else (worker_gpus or 1.0)
        parts.append(Part(judge.name, work.dialogues, gpus, rate, work.dialogues / (rate * gpus)))
    each = "; ".join(f"at {p.rate_per_gpu:.3g} dialogues/s per GPU x {plural(p.gpus, 'GPU')} of {p.name}" for p in parts)
    note = (f"{work.dialogues:,} dialogues x {work.dimensions} dimensions, {work.prompt_order}, {each}"
            + (" (a panel: its judges score in one pass, the slowest bounds it)" if len(parts) > 1 else ""))
    return PhaseTime(phase, max(p.seconds for p in parts), ENGINE_START_S, parts, note)


def _assumptions(phases: list[PhaseTime], plan: Plan, work: Workload, rates: Rates) -> list[str]:
    out = []
    if any(p.phase != "scoring" for p in phases) and work.answers:
        out.append(f"answers: {work.answers}")
    out.append(f"rates: {rates.source}; scaled by parameters (decode x P_ref / P), engine start "
               f"{ENGINE_START_S / 60:g} min per phase (first rows 1:30-3:00 after the command there)")
    if not plan.hardware.accelerator_type and rates.gpu:
        out.append(f"the plan's GPU type is not given: the rates' {rates.gpu} assumed (--accelerator-type)")
    scaled = [e.name for e in plan.engines if e.replicas and e.replicas[0] != e.replicas[1]]
    if scaled:
        out.append(f"projected at min_replicas: {', '.join(scaled)} may autoscale to more")
    if rates.batch:
        below = [(p.name, p.sequences_per_gpu) for ph in phases if ph.phase != "scoring" for p in ph.parts
                 if p.sequences_per_gpu is not None and p.sequences_per_gpu < rates.batch]
        limited = [p for p in phases if p.batch_limited_s is not None]
        if below:
            listed = ", ".join(f"{n} {s:.0f}" for n, s in sorted(below, key=lambda x: x[1])[:3])
            out.append(f"caution: the decode rate was measured at {rates.batch} sequences per GPU; {len(below)} "
                       f"deployment(s) hold fewer per GPU (max_num_seqs per GPU: {listed}{', ...' if len(below) > 3 else ''}), "
                       f"and long contexts read more KV cache per token: they decode slower than this arithmetic"
                       + ("; at the measured speed per sequence (rate / " + str(rates.batch) + ") the "
                          + ", the ".join(f"{p.phase} would take {_t(p.batch_limited_s or 0)}" for p in limited)
                          if limited else ""))
    return out


__all__ = ["ENGINE_START_S", "H100_RATES", "Part", "PhaseTime", "Projection", "Rates", "RatesError", "Workload",
           "load_rates", "project", "rates_from_bench"]
