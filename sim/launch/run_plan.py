"""What `esc-eval plan` computes from a config: where each model would run, on how many GPUs, with how
much memory for weights and KV cache, what is refused, and (with GPUs) how long the run would take by
arithmetic on measured per-GPU rates (serve/plan/projection.py). Nothing is started. The GPUs are the
ones given, else those found as `esc-eval simulate` finds them at run time (serve/devices/gpus.py)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable


@dataclass
class PlanInputs:
    """What a config gives the plan: its model uses, its execution, each model's expected sequence
    length (what GPU deployments are sized by at run time: sim/pool/capacity.py size_serve_replicas), and
    the simulation and scoring configs the projection counts from (None where the config has none)."""

    uses: list
    execution: Any
    seq_tokens: Callable[[], dict[str, int]]
    simulation: Any = None
    scoring: Any = None


def load_any_config(path: Path):
    """(model uses, execution) of a simulation, scoring, pipeline or Serve (`serve up --config`) YAML,
    told apart by their keys; a Serve config is planned as deployments (placement mode serve)."""
    got = load_config_for_plan(path)
    return got.uses, got.execution


def load_config_for_plan(path: Path, cards: int | None = None) -> PlanInputs:
    """The config's PlanInputs. `cards`: the run is projected for that many cards, and when the
    config's card file is not on this machine, sequence lengths are estimated on the shipped sample cards."""
    from esc_eval.serve.config import ConfigError, load_config, read_yaml_mapping
    from esc_eval.serve.plan.planner import SERVE_MODEL_FIELDS_SET_BY_PLAN, ModelUse, PlacementConfig
    from esc_eval.serve.app.application import ServeConfig
    from esc_eval.serve.devices.cpu import KV_CACHE_ENV
    from esc_eval.sim.jobs.config import PipelineConfig, ScoringConfig, SimulationConfig
    from esc_eval.sim.launch.placed import model_uses
    from esc_eval.sim.pool.config import ExecutionConfig

    data = read_yaml_mapping(path, ConfigError)
    if isinstance(data.get("models"), list):
        serve_cfg = ServeConfig.from_yaml(path)
        set_by_plan = set(SERVE_MODEL_FIELDS_SET_BY_PLAN)
        models = {m.name: m.model_dump(exclude_defaults=True, exclude=set_by_plan) for m in serve_cfg.models}
        types = {m.accelerator_type for m in serve_cfg.models} - {None}
        utils = {m.gpu_memory_utilization for m in serve_cfg.models} - {None}
        placement = PlacementConfig(mode="serve", models=models, app_name=serve_cfg.app_name,
                                    accelerator_type=types.pop() if len(types) == 1 else None,
                                    **({"gpu_memory_utilization": utils.pop()} if len(utils) == 1 else {}))
        return PlanInputs([ModelUse(m.name, {}, "served") for m in serve_cfg.models],
                          ExecutionConfig(placement=placement, env={KV_CACHE_ENV: str(serve_cfg.kv_cache_gib)}),
                          dict)
    import esc_eval.sim.jobs.scoring as scoring
    import esc_eval.sim.jobs.simulation_items as simulation

    if "simulation" in data or "scoring" in data:
        cfg = load_config(path, PipelineConfig)
        sim = estimable(cfg.simulation, cards)
        return PlanInputs(model_uses(cfg.simulation, cfg.scoring), cfg.simulation.execution,
                          lambda: {**simulation.expected_seq_tokens(sim), **scoring.expected_seq_tokens(cfg.scoring, None)},
                          cfg.simulation, cfg.scoring)
    if "judge" in data or "panel" in data:  # a scoring config: one judge, or a panel of them
        score_cfg = load_config(path, ScoringConfig)
        return PlanInputs(model_uses(scoring=score_cfg), score_cfg.execution,
                          lambda: scoring.expected_seq_tokens(score_cfg, None), None, score_cfg)
    sim_cfg = load_config(path, SimulationConfig)
    sim = estimable(sim_cfg, cards)
    return PlanInputs(model_uses(sim_cfg), sim_cfg.execution, lambda: simulation.expected_seq_tokens(sim), sim_cfg)


def cards_here(cfg) -> bool:
    from esc_eval.sim.cards.card import card_file_path

    return card_file_path(cfg.cards).exists()


def estimable(cfg, cards: int | None):
    """The simulation config whose cards the sequence lengths are estimated on: its own, or with
    --cards and a card file not here, the shipped sample cards."""
    if not cards or cards_here(cfg):
        return cfg
    return cfg.model_copy(update={"cards": "sample", "card_ids": None, "limit": None, "languages": None})


def workload_for(got: PlanInputs, answers: dict[str, int], cards: int | None, dialogues: int | None):
    """What the run asks of its models (serve/plan/projection.py Workload), counted from the config: the
    role answers every dialogue's seeker turns, a target its own dialogues' turns, rounds each."""
    from esc_eval.serve.plan.planner import ref_key
    from esc_eval.serve.plan.projection import Workload
    from esc_eval.sim.dialogue.generation import effective_params
    from esc_eval.sim.jobs.simulation_items import select_cards

    work = Workload(dialogues=dialogues)
    if got.scoring is not None:
        judges = got.scoring.judges  # each of a panel's judges is its own model, projected as one judge
        # one order for the phase: dialogue_first only when every judge is (else the slower rubric_first rate)
        order = "dialogue_first" if all(j.prompt_order == "dialogue_first" for j in judges) else "rubric_first"
        work.dimensions, work.prompt_order = max(len(j.dimensions) for j in judges), order
    sim = got.simulation
    if sim is None:
        return work
    n_cards = cards or len(select_cards(sim))
    per_target = n_cards * len(sim.seeker_strategies) * len(sim.seeds) * sim.sessions  # a course: a dialogue a session
    caps = {"role": [effective_params(sim.role, sim.profile).max_tokens],
            "target": [effective_params(t, sim.profile).max_tokens for t in sim.targets]}
    role = ref_key(sim.role.model, sim.role.options)
    work.tokens[role] = per_target * len(sim.targets) * sim.rounds * (answers.get("role") or caps["role"][0])
    for t, cap in zip(sim.targets, caps["target"]):
        key = ref_key(t.model, t.options)
        work.tokens[key] = work.tokens.get(key, 0.0) + per_target * sim.rounds * (answers.get("target") or cap)
    work.dialogues = dialogues or per_target * len(sim.targets)
    said = {u: f"{u if u == 'role' else 'targets'} {answers.get(u) or _span(caps[u])}" for u in caps}
    given, capped = [said[u] for u in caps if u in answers], [said[u] for u in caps if u not in answers]
    work.answers = (f"{_n(n_cards, 'card')}{' (--cards)' if cards else ''} x {_n(len(sim.seeker_strategies), 'strategy')} x "
                    f"{_n(len(sim.seeds), 'seed')} x {_n(len(sim.targets), 'target')} = {per_target * len(sim.targets):,} "
                    f"dialogues of {sim.rounds} rounds; answer tokens: "
                    + "; ".join(([", ".join(given) + " (--answer-tokens)"] if given else [])
                                + ([", ".join(capped) + ": the max_tokens caps, the worst case (random weights reach it; "
                                    "--answer-tokens N for a realistic mean)"] if capped else [])))
    return work


def _span(values: list[int]) -> str:
    return f"{min(values)}-{max(values)}" if min(values) != max(values) else f"{values[0]}"


def _n(n: int, word: str) -> str:
    return f"{n:,} {word if n == 1 else (word[:-1] + 'ies' if word.endswith('y') else word + 's')}"


def plan_run(config: Path, *, gpus: int | None = None, gpu_mem: float | None = None, gpus_per_node: int | None = None,
             accelerator_type: str | None = None, rates: Path | None = None, answers: dict[str, int] | None = None,
             cards: int | None = None, dialogues: int | None = None):
    """The plan of the config's models (serve/plan/planner.py PlanResult) on the given or found GPUs, and
    its projection (None without GPUs or rates for their type). answers: expected answer tokens per use
    ("role", "target"; a use left out: its max_tokens cap)."""
    from esc_eval.serve.plan.planner import hardware_for
    from esc_eval.serve.plan.projection import H100_RATES, RatesError, load_rates, project
    from esc_eval.sim.pool.capacity import size_serve_replicas
    from esc_eval.sim.driver.placement import cluster_hardware, make_plan

    measured = load_rates(rates) if rates else H100_RATES
    got = load_config_for_plan(config, cards)
    sim = got.simulation
    if sim is not None and not cards and not cards_here(sim):
        raise ValueError(f"{sim.cards}: card file not found (planning away from it: --cards N plans for N cards)")
    execution = got.execution
    p = execution.placement
    if gpus is None:  # what the run would find (and the config's placement, which it follows)
        shape = {k: v for k, v in (("gpu_memory_gb", gpu_mem), ("gpus_per_node", gpus_per_node),
                                   ("accelerator_type", accelerator_type)) if v is not None}
        hardware = cluster_hardware(execution.model_copy(update={"placement": p.model_copy(update=shape)}))
    else:
        hardware = hardware_for(gpus, gpu_mem if gpu_mem is not None else p.gpu_memory_gb,
                                gpus_per_node or p.gpus_per_node, accelerator_type or p.accelerator_type)
    if rates and hardware.gpus and not measured.same_gpu(hardware.accelerator_type):
        raise RatesError(f"--rates {rates}: measured on {measured.gpu_name or measured.gpu}, the plan is for "
                         f"{hardware.accelerator_type}: measure there (esc-eval bench gpu), or plan for that GPU type")
    result = make_plan(execution, got.uses, hardware)
    size_serve_replicas(result, got.seq_tokens, p)  # GPU deployments sized as the run sizes them
    if cards and sim is not None and not cards_here(sim):
        result.notes.append(f"cards: {sim.cards} is not on this machine: sequence lengths estimated on the shipped "
                            f"sample cards, {cards:,} cards projected (--cards)")
    projection = None
    if result.ok and hardware.gpus:
        if measured.same_gpu(hardware.accelerator_type):
            # in-process engines share their workers' GPUs: the configured ones, or one each where auto fell back
            worker_gpus = result.execution.get("workers", execution.workers) * (execution.num_gpus_per_worker or 1.0)
            projection = project(result, workload_for(got, answers or {}, cards, dialogues), measured, worker_gpus=worker_gpus)
        else:
            result.notes.append(f"no projection: the built-in rates are one H100's; give --rates from `esc-eval bench gpu` "
                                f"run on a {hardware.accelerator_type}")
    return result, projection


def parse_answer_tokens(text: str | None) -> dict[str, int]:
    """--answer-tokens: "N" (every answer) or per use, "role=N,target=M" (a use left out: its cap);
    ValueError with one line on anything else."""
    if not text:
        return {}
    bad = (f"--answer-tokens {text!r}: give a number of tokens (every answer) or per use, e.g. role=150,target=100")
    out: dict[str, int] = {}
    for item in text.split(","):
        use, eq, n = item.strip().rpartition("=")
        if (eq and use not in ("role", "target")) or not n.strip().isdigit() or int(n) < 1:
            raise ValueError(bad)
        out.update({use: int(n)} if eq else {"role": int(n), "target": int(n)})
    return out


def plan_command(config: Path, as_json: bool = False, **options) -> tuple[int, list[str]] | None:
    """`esc-eval plan`: plan_run with `options`, printed on stdout as text (each refusal a line) or as
    JSON; None when every model has a place, else the exit status 1 (the refusals are printed already)."""
    import json

    result, projection = plan_run(config, **options)
    if as_json:
        print(json.dumps(result.as_dict() | {"projection": projection.as_dict() if projection else None}, indent=2,
                         ensure_ascii=False, default=str))
    else:
        from esc_eval.serve.plan.text import plan_lines

        lines = plan_lines(result)
        print("\n".join(lines[:-1] + (projection.lines() if projection else []) + lines[-1:]))
    return None if result.ok else (1, [])
