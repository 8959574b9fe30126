"""The jobs from the options `esc-eval simulate` and `esc-eval score` take: each config (a YAML file
with the command's options set over it; for scoring, a registry judge with one adapter per dimension
made into its judge), and each job run on its placed models (for scoring, with the official JSON
layout and the judge's unscored answers after it)."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, ContextManager

from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.judging.config import JudgeConfig


def scoring_config(config: Path | None = None, judge: str | list[str] | None = None, method: str | None = None,
                   parser: str | None = None, rubric: str | None = None, address: str | None = None,
                   dimensions: str | None = None, batch: bool | None = None,
                   batch_fallback: str | None = None, rubric_mode: str | None = None) -> ScoringConfig:
    """The scoring config: `config` (YAML, or the defaults) with each option given set over it;
    `dimensions` comma-separated; `batch`, `batch_fallback`: the judge calls as provider batches
    (sim/batching); `rubric_mode`: one call per dimension or per dialogue (sim/judging/one_call). `judge`: one judge, or several (`--judge` repeated): a panel of
    them, weight 1 each, every option set on each; a config's own panel takes the options on each
    of its judges. A registry judge with adapters (ESC-RANK) becomes one engine with one LoRA per
    dimension."""
    from esc_eval.serve.config import load_config
    from esc_eval.serve.config.base import validate_config
    from esc_eval.sim.judging.panel import PanelConfig, PanelJudge

    names = [judge] if isinstance(judge, str) else list(judge or [])
    dims = [d.strip() for d in dimensions.split(",") if d.strip()] if dimensions else None
    batched = {"batch.enabled": batch or None, "batch.fallback": batch_fallback}
    base = load_config(config, ScoringConfig, {"execution.ray_address": address, **batched})
    if batch_fallback and not base.batch.enabled:
        raise ValueError("--batch-fallback says what becomes of a request that failed in a batch: give --batch too")
    if base.panel is not None or len(names) > 1:
        if base.panel is not None and names:
            raise ValueError(f"{config}: its panel names the judges; give no --judge beside it")
        members = base.panel.judges if base.panel is not None else [PanelJudge(judge=base.judge) for _ in names]
        members = [m.model_copy(update={"judge": with_options(m.judge, names[i] if names else None, method, parser,
                                                               rubric, dims, rubric_mode=rubric_mode)})
                   for i, m in enumerate(members)]
        rule = base.panel.rule if base.panel is not None else "mean"
        # validated again: each judge once, now that the options are set
        panel = validate_config(PanelConfig, {"judges": [m.model_dump(exclude_unset=True) for m in members], "rule": rule},
                                "--judge" if names else f"{config}: panel")
        return base.model_copy(update={"judge": ScoringConfig().judge, "panel": panel})
    o: dict[str, Any] = {"judge.model.model": names[0] if names else None, "judge.method": method,
                         "judge.parser": parser, "judge.rubric": rubric, "execution.ray_address": address,
                         "judge.dimensions": dims, "judge.rubric_mode": rubric_mode, **batched}
    cfg = load_config(config, ScoringConfig, o)
    if names:
        cfg.judge = with_options(cfg.judge, None, None, parser, None, None, registry_adapters=names[0])
    return cfg


def with_options(judge: JudgeConfig, name: str | None, method: str | None, parser: str | None, rubric: str | None,
                 dims: list[str] | None, registry_adapters: str | None = None,
                 rubric_mode: str | None = None) -> JudgeConfig:
    """A judge config with the command's options set over it (what it left unset stays unset: a
    registry judge's generation defaults still apply); a registry judge with one adapter per
    dimension (ESC-RANK) built as the release ran it."""
    from esc_eval.serve.registry.registry import default_registry, is_spec
    from esc_eval.sim.judging.judges import judge_from_registry

    data = judge.model_dump(exclude_unset=True)
    data.update({k: v for k, v in {"method": method, "parser": parser, "rubric": rubric, "dimensions": dims,
                                   "rubric_mode": rubric_mode}.items() if v is not None})
    if name is not None:
        data["model"] = {**data.get("model", {}), "model": name}
    judge = JudgeConfig.model_validate(data)
    name = name or registry_adapters
    if name and not is_spec(name) and default_registry().get(name).adapters:
        if judge.rubric_mode == "one_call":
            raise ValueError(f"judge {name!r} scores with one adapter per dimension: rubric_mode one_call asks one "
                             "model for every dimension (score it per_dimension)")
        built = judge_from_registry(name, method=judge.method, rubric=judge.rubric, dimensions=judge.dimensions)
        built.parser, built.reads = judge.parser, judge.reads
        return built
    return judge


def score_run(cfg: ScoringConfig, input_path: str, out: str | None = None, official_out: Path | None = None,
              progress: Callable[[], ContextManager[Any]] | None = None,
              say: Callable[[str], None] = print) -> dict[str, Any]:
    """Score the input's dialogues (sim/jobs/scoring.py `run_scoring`, or with the config's `batch` on,
    sim/batching `run_batch_scoring`) on the judge placed where it runs (placed.py); `progress` opens,
    once the models are placed, what follows the job (its on_summary and on_start:
    sim/driver/progress.py `job_progress`). The result adds `official_files`
    (with official_out) and `parse_failures`: the (target model, dimension) pairs whose answers did
    not all become scores, worst first."""
    from esc_eval.sim.launch.placed import placed_scoring
    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.runs.parse_failures import parse_failure_report

    if official_out and cfg.panel is not None:
        raise ValueError("--official-out writes one judge's scores in the release's layout: score with one --judge")
    if cfg.batch.enabled:
        from esc_eval.sim.batching import batch_transports

        batch_transports(cfg)  # a judge without a batch API: one line, before anything starts
    with placed_scoring(cfg, out or input_path, say=say) as placed:
        if placed.batch.enabled:  # the batches own their progress; an online fallback opens `progress`
            from esc_eval.sim.batching import run_batch_scoring

            result = run_batch_scoring(placed, input_path, out, progress=progress)
        else:
            with (progress or contextlib.nullcontext)() as jp:
                result = run_scoring(placed, input_path, out, on_summary=jp.on_summary if jp else None,
                                     on_start=jp.on_start if jp else None)
    judge_id = result.get("judge", placed.judge.judge_id)  # the judge id of the method used (a fallback says generate)
    if official_out:
        result["official_files"] = [str(p) for p in write_run_official_scores(result["run_dir"], official_out, judge_id)]
    result["parse_failures"] = []
    for jid in result.get("judges") or [judge_id]:  # each of a panel's judges
        report = parse_failure_report(result["run_dir"], judge=jid)
        result["parse_failures"] += [{"judge": jid, **r} for r in report[report["failure_rate"] > 0].to_dict(orient="records")]
    return result


def score_by_round_run(cfg: ScoringConfig, input_path: str, out: str | None, every: int = 1,
                       progress: Callable[[], ContextManager[Any]] | None = None,
                       say: Callable[[str], None] = print, rule: str = "prefix") -> dict[str, Any]:
    """Scores by round (sim/runs/by_round.py): the input run's dialogues cut after each round into the
    run folder `out`, then scored there as score_run scores any run folder. rule 'prefix': the judge
    rates each prefix as a whole dialogue (the dialogue so far); 'reply': each prefix's last reply, in
    the context before it (JudgeConfig.reads 'reply', under the judge id + ':reply', so both rules'
    scores can sit in one folder). The result adds `by_round`."""
    from esc_eval.sim.jobs.scoring_judges import with_judges
    from esc_eval.sim.judging.dimensions import DIMENSION_NAMES
    from esc_eval.sim.runs.by_round import BY_ROUND_RULES, write_round_prefixes
    from esc_eval.sim.runs.runfolder import RunFolder

    if rule not in BY_ROUND_RULES:
        raise ValueError(f"scores by round: rule {rule!r}, expected one of {', '.join(BY_ROUND_RULES)}")
    if not out:
        raise ValueError("--by-round: give --out, a run folder for the dialogues cut by round and their scores")
    if rule == "reply":
        beyond = sorted({d for j in cfg.judges for d in j.dimensions if d not in DIMENSION_NAMES})
        if beyond:
            raise ValueError(f"--by-reply: no per-reply rubric for {', '.join(beyond)} (the seven dimensions have one)")
        cfg = with_judges(cfg, [j.model_copy(update={"reads": "reply"}) for j in cfg.judges])
    prefixes = write_round_prefixes(RunFolder(input_path, create=False), RunFolder(out), every)
    say(f"by round ({rule}): {prefixes['prefixes']} prefixes of {prefixes['dialogues']} dialogues in {out} "
        f"({prefixes['written']} new), {sum(len(j.dimensions) for j in cfg.judges)} judge calls each")
    return {**score_run(cfg, out, None, None, progress=progress, say=say), "by_round": {**prefixes, "rule": rule}}


def write_run_official_scores(run_dir: str, out_dir: Path, judge_id: str) -> list[Path]:
    """A run folder's scores by one judge in the official JSON layout (sim/runs/official.py)."""
    from esc_eval.sim.runs.official import write_official_scores
    from esc_eval.sim.runs.runfolder import RunFolder

    run = RunFolder(run_dir, create=False)
    scores = [r for r in run.iter_rows("scores") if r["judge"] == judge_id]
    return write_official_scores(scores, list(run.iter_rows("dialogues")), out_dir)


def simulation_config(config: Path | None = None, cards: Path | None = None, targets: list[str] | None = None,
                      role: str | None = None, limit: int | None = None, language: str | None = None,
                      address: str | None = None, workers: int | None = None,
                      concurrency: int | None = None, rounds: int | None = None,
                      seeker_stop: bool | None = None, strategies: list[str] | None = None,
                      controls: list[str] | None = None, sessions: int | None = None,
                      memory: str | None = None, seeker_ratings: bool | None = None) -> SimulationConfig:
    """The simulation config: `config` (YAML, or the defaults) with each option given set over it.
    controls: the CLI's `control=level[,level...]` items (sim/dialogue/seeker_controls.py parse_sweep)."""
    from esc_eval.serve.config import load_config
    from esc_eval.sim.dialogue.seeker_controls import parse_sweep

    o: dict[str, Any] = {"cards": str(cards) if cards else None, "limit": limit, "rounds": rounds, "seeker_stop": seeker_stop,
                         "seeker_ratings": seeker_ratings,
                         "languages": [language] if language else None,
                         "execution.ray_address": address, "execution.workers": workers,
                         "execution.concurrency": concurrency, "sessions": sessions, "memory": memory}
    if targets:
        o["targets"] = [{"model": t} for t in targets]
    if role:
        o["role.model"] = role
    if strategies:
        o["strategies"] = list(strategies)
    if controls:
        o["controls"] = parse_sweep(controls)
    return load_config(config, SimulationConfig, o)


def simulate_run(cfg: SimulationConfig, out: str, progress: Callable[[], ContextManager[Any]] | None = None,
                 say: Callable[[str], None] = print) -> tuple[dict[str, Any], SimulationConfig]:
    """The simulation (sim/jobs/simulation.py `run_simulation`) on its models, placed first (in the
    workers, or Serve deployments on GPU clusters: placed.py); `progress` as for score_run. The
    result, and the config as placed."""
    from esc_eval.sim.launch.placed import placed_simulation
    from esc_eval.sim.jobs.simulation import run_simulation

    with placed_simulation(cfg, out, say=say) as placed, (progress or contextlib.nullcontext)() as jp:
        result = run_simulation(placed, out, on_summary=jp.on_summary if jp else None,
                                on_start=jp.on_start if jp else None)
    return result, placed
