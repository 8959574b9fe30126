"""What a scoring job records in the run folder's manifest as it starts (record_scoring): its config,
judges and their methods, the panel (panel_record: analysis/panels reads it), the runtime, how its
calls go (online, or provider batches: sim/batching), and the targets' and judges' families
(merged_families: self-preference reads them)."""
from __future__ import annotations

from typing import Any

from esc_eval.serve.devices.cpu import execution_runtime
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring_judges import model_families
from esc_eval.sim.runs.runfolder import RunFolder


def record_scoring(run: RunFolder, cfg: ScoringConfig, methods: dict[str, dict[str, Any]], **more: Any) -> None:
    """The manifest's `scoring` as a scoring starts: its config, judges, their methods, the panel, the
    runtime, how its calls went (`transport`: online, or batch with `batch` saying what the batches
    came to: sim/batching) and the families."""
    ex, first_id = cfg.execution, cfg.judges[0].judge_id
    run.update_manifest(scoring={"config": cfg.model_dump(mode="json"), "judge": first_id,
                                 "judges": [j.judge_id for j in cfg.judges],
                                 "judge_models": {j.judge_id: j.model.model for j in cfg.judges},
                                 "judge_method": methods[first_id], "judge_methods": methods,
                                 "panel": panel_record(cfg),
                                 "runtime": execution_runtime(ex.dtype, gpu=ex.num_gpus_per_worker > 0),
                                 "transport": "online", "batch": None, **more},
                        families=merged_families(run, cfg))


def panel_record(cfg: ScoringConfig) -> dict[str, Any] | None:
    """What the manifest says of a panel (analysis/panels reads it): its rule and, per judge, its id,
    weight, family and model; None for one judge (a panel of an earlier scoring no longer holds)."""
    if cfg.panel is None:
        return None
    families = model_families(cfg, [], {})["judges"]
    return {"rule": cfg.panel.rule, "judges": [{"judge": m.judge.judge_id, "weight": m.weight,
                                                "family": families[m.judge.judge_id], "model": m.judge.model.model}
                                               for m in cfg.panel.judges]}


def merged_families(run: RunFolder, cfg: ScoringConfig) -> dict[str, dict[str, str | None]]:
    """The manifest's `families` with this scoring's targets and judges added (a run folder scored by
    several judges, one command each, keeps every judge's family)."""
    manifest = run.read_manifest()
    targets = sorted({d["target_model"] for d in run.iter_rows("dialogues", columns=["target_model"]) if d["target_model"]})
    # a named target (ModelRef.name) is the model it runs
    named = {t["name"]: t["model"] for t in ((manifest.get("simulation") or {}).get("config") or {}).get("targets", [])
             if isinstance(t, dict) and t.get("name")}
    new = model_families(cfg, targets, named)
    old = manifest.get("families") or {}
    # a family the registry does not know (None) never erases one the folder already holds
    return {k: {**(old.get(k) or {}), **{n: f for n, f in new[k].items() if f is not None or n not in (old.get(k) or {})}}
            for k in ("targets", "judges")}


__all__ = ["merged_families", "panel_record", "record_scoring"]
