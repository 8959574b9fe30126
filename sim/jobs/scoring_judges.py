"""The judges of a scoring job made ready before it runs: a registry judge as the release ran it
(its adapters, system message and generation defaults), each judge's plan on its backend (the
method it can use: a fallback to free answers changes its judge id, which says so), and the model
families the self-preference audit reads (the registry's `family`, or a panel judge's own).
One judge or a panel's several (sim/judging/panel.py) go through the same path."""
from __future__ import annotations

import logging
from typing import Any

from esc_eval.serve.chat.interface import backend_capabilities
from esc_eval.serve.registry.entry import default_adapter
from esc_eval.serve.registry.registry import default_registry, is_spec, resolve
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.judge_plan import JudgePlan, plan_judge
from esc_eval.sim.judging.one_call import plan_one_call

log = logging.getLogger("esc_eval.scoring")


def with_registry_adapters(judge: JudgeConfig) -> JudgeConfig:
    """A registry judge as the release ran it, without the config naming anything: its adapters
    (one used on every call; several, as ESC-RANK's, one LoRA per dimension via
    sim.judging.judges.judge_from_registry), its system message (ESC-RANK: InternLM2's meta instruction)
    and its generation defaults for free answers. What the config sets is left as it is."""
    if is_spec(judge.model.model):
        return judge
    entry = default_registry().get(judge.model.model)
    update: dict[str, Any] = {}
    if judge.system_prompt is None and entry.judge_system_prompt:
        update["system_prompt"] = entry.judge_system_prompt
    if not judge.model.params.model_fields_set:
        update["model"] = judge.model.model_copy(update={"params": entry.generation})
    if entry.adapters and not judge.adapters:
        single = default_adapter(entry)
        if single is not None:
            if not judge.model.adapter:
                update["model"] = update.get("model", judge.model).model_copy(update={"adapter": single})
        else:
            from esc_eval.sim.judging.judges import judge_from_registry

            if judge.rubric_mode == "one_call":
                raise ValueError(f"judge {judge.model.model!r} scores with one adapter per dimension: rubric_mode "
                                 "one_call asks one model for every dimension (score it per_dimension)")

            built = judge_from_registry(entry.name, method=judge.method, rubric=judge.rubric, dimensions=judge.dimensions)
            model = built.model.model_copy(update={"params": update.get("model", judge.model).params})
            # keep the id the caller knows this judge by (score rows, --official-out, parse-failure report), and
            # what it reads (a per-reply judge's id adds its tag to that name)
            name = judge.name or judge.model_copy(update={"reads": "dialogue"}).judge_id
            return built.model_copy(update={**update, "model": model, "parser": judge.parser, "name": name,
                                            "reads": judge.reads})
    return judge.model_copy(update=update) if update else judge


def judge_plan_for(judge: JudgeConfig) -> JudgePlan:
    """The judge's plan on its backend (without building the model), the fallback logged."""
    spec, implied = resolve(judge.model.model)
    caps = backend_capabilities(spec, **{**implied, **judge.model.options})
    plan = plan_one_call(judge, caps) if judge.rubric_mode == "one_call" else plan_judge(judge, caps)
    if plan.note:
        log.warning("%s", plan.note)
    return plan


def with_judges(cfg: ScoringConfig, judges: list[JudgeConfig]) -> ScoringConfig:
    """cfg with its judges (the one, or the panel's in order) replaced by `judges`."""
    if cfg.panel is None:
        return cfg.model_copy(update={"judge": judges[0]})
    members = [m.model_copy(update={"judge": j}) for m, j in zip(cfg.panel.judges, judges)]
    return cfg.model_copy(update={"panel": cfg.panel.model_copy(update={"judges": members})})


def prepared_judges(cfg: ScoringConfig) -> tuple[ScoringConfig, dict[str, JudgePlan], dict[str, dict[str, Any]]]:
    """The config with every judge made ready (registry adapters; the method its backend can use),
    each judge's plan and its method record ({configured, used, note}), by judge id. A fallback
    that makes two panel judges one id is refused in one line."""
    judges, plans, methods = [], {}, {}
    for judge in cfg.judges:
        resolve(judge.model.model)  # an unknown judge or a missing adapter fails before anything is read
        judge = with_registry_adapters(judge)
        plan = judge_plan_for(judge)
        configured = judge.method
        if plan.method == "generate" and configured != "generate":  # the fallback: rows and judge id say so
            judge = judge.model_copy(update={"method": "generate"})
        if judge.judge_id in plans:
            raise ValueError(f"two of the panel's judges are both {judge.judge_id!r} on this machine (a method "
                             "fallback made them one): give them different `name`s")
        judges.append(judge)
        plans[judge.judge_id] = plan
        methods[judge.judge_id] = {"configured": configured, "used": plan.method, "note": plan.note}
    return with_judges(cfg, judges), plans, methods


def registry_family(model: str) -> str | None:
    """The registry's family of a model: a registry name, or a spec whose model part is one
    (`vllm/embedded` is the `embedded` entry); None for other specs, unknown names or no family."""
    if not model:
        return None
    name = model.split("/", 1)[1].split("?", 1)[0] if is_spec(model) else model
    try:
        return default_registry().get(name).family
    except Exception:  # noqa: BLE001 - a target named by the user (ModelRef.name), or a path, is no registry entry
        return None


def model_families(cfg: ScoringConfig, targets: list[str], named: dict[str, str]) -> dict[str, dict[str, str | None]]:
    """{"targets": {target: family}, "judges": {judge id: family}}: the registry's `family` (a named
    target as the model it runs, `named`), a panel judge's own `family` first."""
    own = {m.judge.judge_id: m.family for m in cfg.panel.judges} if cfg.panel is not None else {}
    return {"targets": {t: registry_family(named.get(t, t)) for t in targets},
            "judges": {j.judge_id: own.get(j.judge_id) or registry_family(j.model.model) for j in cfg.judges}}
