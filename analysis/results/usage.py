"""Usage and cost from the runs' manifests (`usage`, written by sim.runs.usage at the end of each job)
for the report, the leaderboard CSV and the viewer."""
from __future__ import annotations

import pandas as pd

USAGE_COLUMNS = ["run", "stage", "model", "spec", "calls", "prompt_tokens", "completion_tokens", "call_seconds",
                 "dollars"]


def usage_rows(manifests: dict[str, dict]) -> pd.DataFrame:
    """One row per (run, stage, model) from each manifest's usage.by_stage."""
    rows = []
    for run, m in manifests.items():
        for r in ((m.get("usage") or {}).get("by_stage") or []):
            rows.append({"run": run, **{c: r.get(c) for c in USAGE_COLUMNS[1:]}})
    return pd.DataFrame(rows, columns=USAGE_COLUMNS)


ENGINE_COLUMNS = ["run", "model", "spec", "engine_seconds", "gpu_seconds", "held_as"]


def engine_rows(manifests: dict[str, dict]) -> pd.DataFrame:
    """One row per (run, engine-hosted model): engine- (or Serve replica-) seconds, the GPU-seconds charged
    to what held the GPUs, and how they were held ("Serve replicas x 0.62 GPU", "in-process, 0.6 of 1 GPU
    per worker"; empty on CPU and in manifests from before the charge was recorded)."""
    rows = [{"run": run, **e} for run, m in manifests.items() for e in ((m.get("usage") or {}).get("engines") or [])]
    return pd.DataFrame(rows, columns=ENGINE_COLUMNS)


def add_usage_columns(leaderboard: pd.DataFrame, manifests: dict[str, dict]) -> pd.DataFrame:
    """The target stage's usage per model (summed over runs and languages) as leaderboard columns:
    usage_calls, usage_prompt_tokens, usage_completion_tokens, usage_dollars, usage_engine_seconds,
    usage_gpu_seconds (NaN where a run has no usage, e.g. official score files)."""
    if leaderboard.empty:
        return leaderboard
    u = usage_rows(manifests)
    u = u[u["stage"] == "target"]
    agg = (u.groupby("model")[["calls", "prompt_tokens", "completion_tokens", "dollars"]].sum(min_count=1)
           if not u.empty else pd.DataFrame(columns=["calls", "prompt_tokens", "completion_tokens", "dollars"]))
    e = engine_rows(manifests)
    eng = e.groupby("model")[["engine_seconds", "gpu_seconds"]].sum() if not e.empty else pd.DataFrame(
        columns=["engine_seconds", "gpu_seconds"])
    joined = agg.join(eng, how="outer").add_prefix("usage_")
    return leaderboard.merge(joined, left_on="model", right_index=True, how="left")


def usage_table_rows(manifests: dict[str, dict]) -> list[list]:
    """Rows for the report's usage table: run, stage, model, calls, tokens, call-seconds, engine- and
    GPU-seconds with how the GPUs were held, dollars."""
    u = usage_rows(manifests)
    engines = engine_rows(manifests)
    e = engines.set_index(["run", "model"]) if not engines.empty else None
    out = []
    for r in u.itertuples():
        eng = e.loc[(r.run, r.model)] if e is not None and (r.run, r.model) in e.index else None
        held = eng.get("held_as") if eng is not None else None
        out.append([r.run, r.stage, r.model, r.calls, r.prompt_tokens, r.completion_tokens, r.call_seconds,
                    None if eng is None else float(eng["engine_seconds"]), None if eng is None else float(eng["gpu_seconds"]),
                    held if isinstance(held, str) and held else "",
                    "n/a" if r.dollars is None or pd.isna(r.dollars) else f"${r.dollars:,.4f}"])
    return out


USAGE_HEADERS = ["Run folder", "Stage", "Model", "Calls", "Prompt tokens", "Completion tokens", "Call-seconds",
                 "Engine-seconds", "GPU-seconds", "GPUs held as", "Dollars"]
