"""`esc-eval check` on this CPU, as a lab runs it, with a small budget: the real steps, each in its own
process (so they cannot borrow this session's in-process engine; they reuse its converted embedded
model folder). Left out to keep CI short, each tested where its path already runs: the workload step
is `bench gpu` (run_bench_gpu), which test_sim_bench_gpu_slow.py measures on the session's engine; the
demo step reads `esc-eval demo`'s JSON, whose engines test_sim_pipeline_vllm.py checks on its demo run
(and test_node_check.py the step's verdict). About 50 s on the AVX-512 EPYC; the whole check, every
step, took 230 s there."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_the_check_proves_this_cpu_node_step_by_step(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from esc_eval.cli.app import app
    from esc_eval.serve.devices.cpu import resolve_dtype
    from esc_eval.sim.bench.node.steps import BAD_ARCHITECTURE

    # the steps' engines (their processes inherit this) with a 1 GiB KV cache, not the suite's 2: the
    # check answers once per phase, and an engine touching 1 GiB starts ~6 s sooner on a 2-core CPU
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    out = tmp_path / "check.json"
    res = CliRunner().invoke(app, ["check", "--budget-min", "4", "--steps", "machine,plan,engines,bad_engine",
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    steps = {s["name"]: s for s in data["steps"]}
    assert list(steps) == ["machine", "plan", "engines", "bad_engine"]
    assert all(s["status"] == "ok" for s in data["steps"]), [(s["name"], s["why"]) for s in data["steps"]]
    assert data["ok"] and data["stopped_at"] is None and data["device"] == "cpu" and data["seconds"] <= 240
    assert all(s["seconds"] <= s["deadline_s"] for s in data["steps"])
    dtype = resolve_dtype("auto")

    machine = steps["machine"]["result"]
    assert machine["decision"]["kind"] == "cpu" and machine["decision"]["problem"] is None
    assert machine["versions"]["vllm"] and machine["versions"]["torch"] and machine["versions"]["ray"]
    assert steps["plan"]["result"]["plan"]["mode"] == "in_process" and steps["plan"]["result"]["text"]

    for phase in ("simulation", "scoring"):  # every engine started in the default mode, answering once
        p = steps["engines"]["result"]["phases"][phase]
        assert p["items"] == 1 and p["failed"] == 0 and p["mode"] == "in_process"
        assert {(e["device"], e["dtype"], e["where"]) for e in p["engines"]} == {("cpu", dtype, "pool worker")}
        assert all(e["kv_cache"]["tokens"] > 0 for e in p["engines"])

    bad = steps["bad_engine"]["result"]
    assert BAD_ARCHITECTURE in bad["cause"] and bad["score_parts"] == 0 and bad["seconds"] < 120

    steps_dir = tmp_path / "check-steps"  # each step's log and run folders, kept beside the JSON
    assert all((steps_dir / name / "step.log").exists() for name in steps)
    assert (steps_dir / "engines" / "simulation-run" / "manifest.json").exists()
