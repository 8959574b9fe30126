"""Usage and cost per model and stage, written to the manifest at the end of every job."""
from __future__ import annotations

import json

import pytest

from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.usage import compute_usage


def _stage(usage, stage, model):
    return next(r for r in usage["by_stage"] if r["stage"] == stage and r["model"] == model)


def test_jobs_write_usage_to_the_manifest(tmp_path):
    cfg = SimulationConfig(cards="sample", limit=3, role=ModelRef(model="fake/seeker"),
                           targets=[ModelRef(model="fake/echo")],
                           execution=ExecutionConfig(executor="local", concurrency=4, workers=2, num_gpus_per_worker=0.5))
    run_simulation(cfg, tmp_path)
    usage = json.loads((tmp_path / "manifest.json").read_text())["usage"]
    rows = list(RunFolder(tmp_path).iter_rows("dialogues"))
    target = _stage(usage, "target", "fake/echo")
    role = _stage(usage, "role", "fake/seeker")
    turns = [t for r in rows for t in r["turns"] if (t["prompt_tokens"] or t["completion_tokens"])]
    assert target["calls"] + role["calls"] == len(turns) and role["calls"] == 3 * 5
    assert target["prompt_tokens"] == sum(t["prompt_tokens"] for t in turns if t["speaker"] == "assistant") > 0
    assert role["completion_tokens"] == sum(t["completion_tokens"] for t in turns if t["speaker"] == "seeker") > 0
    assert target["dollars"] is None  # self-hosted: its cost is engine time
    engines = {e["model"]: e for e in usage["engines"]}
    assert set(engines) == {"fake/echo", "fake/seeker"}
    assert engines["fake/echo"]["engine_seconds"] > 0
    assert engines["fake/echo"]["gpu_seconds"] == pytest.approx(engines["fake/echo"]["engine_seconds"] * 0.5, rel=1e-3)
    # Scoring adds the judge stage; the earlier stages are recomputed, not doubled.
    run_scoring(ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake/judge")),
                              execution=ExecutionConfig(executor="local")), tmp_path)
    usage2 = json.loads((tmp_path / "manifest.json").read_text())["usage"]
    judge = _stage(usage2, "judge", "fake/judge:logprob:official")  # the judge id of the score rows
    assert judge["calls"] == 3 * 7 and judge["spec"] == "fake/judge" and judge["completion_tokens"] == 21
    assert {e["model"] for e in usage2["engines"]} == {"fake/echo", "fake/seeker", "fake/judge"}
    assert _stage(usage2, "role", "fake/seeker")["calls"] == role["calls"]


def test_dollars_from_the_shipped_list_prices_and_config_overrides(tmp_path):
    from esc_eval.analysis.results.fake_runs import write_fake_run

    run = RunFolder(write_fake_run(tmp_path / "r", 10, models=["gpt-4", "openai/gpt-3.5-turbo", "fake/echo"]))
    usage = compute_usage(run)
    gpt4 = _stage(usage, "target", "gpt-4")
    from esc_eval.serve.registry.prices import shipped_price

    price = shipped_price("openai/gpt-4")  # the registry's gpt-4 is openai/gpt-4, priced by the shipped list
    assert price is not None and price.prompt_per_1m == 30.0 and gpt4["spec"] == "openai/gpt-4"
    want = gpt4["prompt_tokens"] / 1e6 * price.prompt_per_1m + gpt4["completion_tokens"] / 1e6 * price.completion_per_1m
    assert gpt4["dollars"] == pytest.approx(want) and want > 0
    # A spec is priced by the list too (chatgpt = openai/gpt-3.5-turbo).
    assert _stage(usage, "target", "openai/gpt-3.5-turbo")["dollars"] > 0
    assert _stage(usage, "target", "fake/echo")["dollars"] is None
    cheap = compute_usage(run, {"gpt-4": TokenPrice(prompt_per_1m=1.0, completion_per_1m=0.0)})
    assert _stage(cheap, "target", "gpt-4")["dollars"] == pytest.approx(gpt4["prompt_tokens"] / 1e6)
    assert usage["total_dollars"] == pytest.approx(sum(r["dollars"] or 0 for r in usage["by_stage"]))


def test_bad_price_is_named():
    with pytest.raises(ValueError, match="prompt_per_1m"):
        SimulationConfig(prices={"gpt-4": {"prompt_per_1m": -1, "completion_per_1m": 1}})


def _run_with_events(tmp_path, events):
    """A fake run whose manifest has these job end events and GPU charges (in the order given: a charge
    belongs to the end event before it, as sim/driver/placement.py records it)."""
    from esc_eval.analysis.results.fake_runs import write_fake_run

    run = RunFolder(write_fake_run(tmp_path / "r", 20, models=["vllm/t1", "vllm/t2"]))  # role fake/seeker
    ends, charges, last = [], [], None
    for i, e in enumerate(events):
        if e["kind"].endswith("_end"):
            last = {**e, "at": f"2026-01-01T00:00:{i:02d}+00:00"}
            ends.append(last)
        else:
            charges.append({k: v for k, v in e.items() if k != "kind"} | {"end_at": last["at"] if last else None})
            last = None
    run.update_manifest(events=ends, gpu_charges=charges)
    return run


def _engines(usage):
    return {e["model"]: e for e in usage["engines"]}


IN_PROCESS = {"kind": "engine_usage", "job": "simulation", "mode": "in_process", "workers": 2, "gpus_per_worker": 1.0,
              "models": {"fake/seeker": {"gpu_share": 0.6, "one_at_a_time": False},
                         "vllm/t1": {"gpu_share": 0.4, "one_at_a_time": True},
                         "vllm/t2": {"gpu_share": 0.4, "one_at_a_time": True}}}
SERVE = {"kind": "engine_usage", "job": "simulation", "mode": "serve", "app": "run",
         "models": {"fake/seeker": {"deployment": "seeker", "replica_seconds": 100.0, "gpus_per_replica": 0.6261,
                                    "gpu_seconds": 62.61, "most_replicas": 2},
                    "vllm/t1": {"deployment": "t1", "replica_seconds": 50.0, "gpus_per_replica": 0.3739,
                                "gpu_seconds": 18.695, "most_replicas": 1}}}


def test_in_process_engines_are_charged_their_share_of_the_workers_gpus(tmp_path):
    run = _run_with_events(tmp_path, [{"kind": "simulation_end", "wall_s": 100.0}, IN_PROCESS])
    e = _engines(compute_usage(run))
    # the role all the time at 0.6 of each of 2 workers' GPU; the targets one at a time (equal call-seconds here)
    assert (e["fake/seeker"]["engine_seconds"], e["fake/seeker"]["gpu_seconds"]) == (200.0, 120.0)
    assert (e["vllm/t1"]["engine_seconds"], e["vllm/t1"]["gpu_seconds"]) == (100.0, 40.0)
    assert sum(x["gpu_seconds"] for x in e.values()) == 200.0  # 2 workers x 1 GPU x 100 s, charged once
    assert e["vllm/t2"]["held_as"] == "in-process, 0.4 of 1 GPU per worker"
    # without the event (fake models, older manifests): every model the whole job, the config's GPUs per worker
    old = _run_with_events(tmp_path / "old", [{"kind": "simulation_end", "wall_s": 100.0}])
    assert {m: x["gpu_seconds"] for m, x in _engines(compute_usage(old)).items()} == {
        "fake/seeker": 0.0, "vllm/t1": 0.0, "vllm/t2": 0.0}  # the fake run's config: no GPUs


def test_serve_replicas_are_charged_for_the_time_they_ran_over_every_run(tmp_path):
    run = _run_with_events(tmp_path, [{"kind": "simulation_end", "wall_s": 100.0}, IN_PROCESS,
                                      {"kind": "simulation_end", "wall_s": 40.0}, SERVE,  # resumed on Serve
                                      SERVE])  # a run that stopped before its end event: its replicas count too
    e = _engines(compute_usage(run))
    assert e["fake/seeker"]["engine_seconds"] == pytest.approx(200 + 2 * 100)
    assert e["fake/seeker"]["gpu_seconds"] == pytest.approx(120 + 2 * 62.61)
    assert e["vllm/t1"]["gpu_seconds"] == pytest.approx(40 + 2 * 18.695)
    assert e["vllm/t2"]["gpu_seconds"] == pytest.approx(40)  # no replica of its own on Serve
    assert e["fake/seeker"]["held_as"] == "Serve replicas x 0.6261 GPU; in-process, 0.6 of 1 GPU per worker"


def test_the_report_shows_how_the_gpus_were_held(tmp_path):
    from esc_eval.analysis.results.usage import USAGE_HEADERS, usage_table_rows
    from esc_eval.sim.runs.usage import record_usage

    run = _run_with_events(tmp_path, [{"kind": "simulation_end", "wall_s": 40.0}, SERVE])
    record_usage(run)
    rows = usage_table_rows({"r": run.read_manifest()})
    role = next(r for r in rows if r[1] == "role")
    col = dict(zip(USAGE_HEADERS, role))
    assert col["GPU-seconds"] == pytest.approx(62.61) and col["GPUs held as"] == "Serve replicas x 0.6261 GPU"
