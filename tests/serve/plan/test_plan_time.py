"""The projected run time (serve/plan/projection.py): arithmetic on per-GPU rates, checked against hand
arithmetic; the rates read from an `esc-eval bench gpu` JSON (tests/serve/fixtures); bad rates files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from esc_eval.serve.plan.planner import EnginePlan, Hardware, Plan, hardware_for
from esc_eval.serve.plan.projection import (ENGINE_START_S, H100_RATES, Rates, RatesError, Workload, load_rates, project,
                                      rates_from_bench)

BENCH = Path(__file__).resolve().parents[1] / "fixtures" / "bench_gpu_2xh100.json"  # shared with tests/cli
H100 = hardware_for(8, None, 8, "H100")
RATES = Rates(decode_tokens_per_s=2000.0, decode_params=10e9, judge_dialogues_per_s={"rubric_first": 4.0,
              "dialogue_first": 12.0}, judge_params=8e9, gpu="H100", batch=64, source="test rates")


def _deployment(name, use, params_b, replicas=1, fraction=None, phase="simulation", seqs=None):
    serve = {"name": name, **({"max_num_seqs": seqs} if seqs else {})}
    return EnginePlan(name=name, refs=[f"{name}|{{}}"], uses=[use], where="serve deployment", device="gpu", phase=phase,
                      params_b=params_b, replicas=(replicas, replicas), gpus=1, gpu_fraction=fraction, serve=serve)


def _plan(*engines, hardware=H100):
    return Plan(mode="serve", hardware=hardware, engines=list(engines))


def test_the_projection_is_the_hand_arithmetic():
    role = _deployment("role", "role", 20.0, replicas=2, seqs=16)  # 2,000 x 10/20 = 1,000 tok/s per GPU x 2 GPUs
    target = _deployment("t", "target", 5.0, fraction=0.25, seqs=32)  # 4,000 tok/s per GPU x 0.25 GPU
    api = EnginePlan(name="gpt-4", refs=["gpt-4|{}"], uses=["target"], where="external (openai)", device="-")
    judge = _deployment("judge", "judge", 16.0, replicas=4, phase="scoring")  # 4 x 8/16 = 2 dialogues/s per GPU x 4
    work = Workload(tokens={"role|{}": 1_200_000.0, "t|{}": 300_000.0, "gpt-4|{}": 300_000.0}, dialogues=4_000,
                    answers="as given")
    p = project(_plan(role, target, api, judge), work, RATES)
    sim, score = p.phases
    assert [x.seconds for x in sim.parts] == pytest.approx([600.0, 300.0])  # 1.2M / 2,000; 300K / 1,000
    assert sim.seconds == pytest.approx(600.0) and sim.slowest.name == "role"
    assert score.seconds == pytest.approx(500.0)  # 4,000 / (2 x 4)
    assert p.total_s == pytest.approx(600 + 500 + 2 * ENGINE_START_S)
    assert p.skipped == ["gpt-4 (API models: external)"]
    # at the measured 64 sequences per GPU's speed each: the role holds 16 -> a quarter of its rate
    assert sim.batch_limited_s == pytest.approx(2400.0)
    text = "\n".join(p.lines())
    assert "simulation: 10.0 min + 3.0 min engine start; role the slowest: 1.2M tokens at 1,000 tok/s per GPU x 2 GPUs" in text
    assert "total: 24.3 min" in text and "the simulation would take 40.0 min" in text
    # the judge's rate per prompt order and per dimension scored
    order = project(_plan(judge), Workload(dialogues=4_000, dimensions=14, prompt_order="dialogue_first"), RATES)
    assert order.phases[0].seconds == pytest.approx(4_000 / (12 * 0.5 * 0.5 * 4))
    assert json.loads(json.dumps(p.as_dict()))["phases"][0]["slowest"] == "role"


def test_in_process_engines_share_the_workers_gpus_and_cpu_plans_are_not_projected():
    role = EnginePlan(name="role", refs=["role|{}"], uses=["role"], where="in-process", device="gpu", params_b=10.0, gpus=1)
    target = EnginePlan(name="t", refs=["t|{}"], uses=["target"], where="in-process", device="gpu", params_b=5.0, gpus=1)
    p = project(_plan(role, target), Workload(tokens={"role|{}": 400_000.0, "t|{}": 800_000.0}), RATES, worker_gpus=2)
    # GPU-seconds: 400K / 2,000 + 800K / 4,000 = 400, over the workers' 2 GPUs
    assert p.phases[0].seconds == pytest.approx(200.0)
    assert project(_plan(role, target, hardware=Hardware()), Workload(tokens={"role|{}": 1.0}), RATES) is None


def test_what_cannot_be_projected_is_said():
    judge = _deployment("judge", "judge", 8.0, phase="scoring")
    p = project(_plan(judge), Workload(), RATES)  # a scoring config: no dialogue count
    assert p.phases == [] and p.skipped == ["the scoring (the dialogues to score are not known: give --dialogues N)"]
    unsized = _deployment("x", "target", None)
    p = project(_plan(unsized), Workload(tokens={"x|{}": 10.0}), RATES)
    assert p.skipped == ["x (no decode rate: its size is unknown)"]


def test_the_built_in_rates_are_the_h100_notes_figures():
    assert H100_RATES.decode_rate(13.1) == pytest.approx(2052.0) and H100_RATES.decode_rate(6.55) == pytest.approx(4104.0)
    assert H100_RATES.judge_rate("rubric_first", 7.38, 7) == pytest.approx(3.73)
    assert H100_RATES.judge_rate("dialogue_first", 7.38, 7) == pytest.approx(12.1)
    assert H100_RATES.same_gpu("H100") and not H100_RATES.same_gpu("A10G") and H100_RATES.same_gpu(None)
    assert "../shared/notes/gpu-h100.md" in H100_RATES.source and "vLLM 0.26" in H100_RATES.source


def test_rates_from_a_bench_gpu_json():
    r = load_rates(BENCH)
    # 3,000 generated tok/s over the machine's 2 GPUs, made 60:40 by the 13.1B and the 7.38B
    assert r.decode_tokens_per_s == pytest.approx(1500.0)
    assert r.decode_params == pytest.approx((0.6 * 13.1 + 0.4 * 7.38) * 1e9)
    assert r.judge_dialogues_per_s == {"rubric_first": 4.0, "dialogue_first": 12.5} and r.judge_params == 7.38e9
    assert r.gpu == "H100" and r.batch is None and r.judge_dimensions == 7
    assert r.same_gpu("H100") and not r.same_gpu("A100")
    assert str(BENCH) in r.source and "vLLM 0.32.0" in r.source
    # without ours' per-model counts: the rows' tokens over the wall time, the reference's split
    data = json.loads(BENCH.read_text())
    sim = data["simulation"]
    sim["reference"]["tokens"] = sim["ours"].pop("tokens")
    sim["ours"]["decode_tokens_per_s"] = None
    again = rates_from_bench(data)
    assert again.decode_tokens_per_s == pytest.approx(300000 / 100.0 / 2) and again.decode_params == r.decode_params


@pytest.mark.parametrize("section", ["simulation", "scoring"])
def test_a_bench_whose_calls_failed_gives_no_rates(tmp_path, section):
    data = json.loads(BENCH.read_text())
    ours = data["simulation"]["ours"] if section == "simulation" else data["scoring"]["dialogue_first"]["ours"]
    ours["failed"] = 3
    f = tmp_path / "rates.json"
    f.write_text(json.dumps(data))
    with pytest.raises(RatesError, match=f"calls failed in {section}"):
        load_rates(f)


@pytest.mark.parametrize("content, why", [
    ("not json", "not JSON"),
    (json.dumps({"mode": "serve", "engines": []}), "not an `esc-eval bench gpu` JSON"),
    (json.dumps({"bench": "gpu", "machine": {"device": "cpu", "gpus": []}}), "measured on the cpu, not a GPU"),
    (json.dumps({"bench": "gpu", "machine": {"device": "gpu", "gpus": [{"name": "NVIDIA L4"}]}}),
     "neither a simulation decode rate nor a scoring rate"),
])
def test_a_rates_file_that_is_not_a_bench_gpu_json_is_one_line(tmp_path, content, why):
    f = tmp_path / "rates.json"
    f.write_text(content)
    with pytest.raises(RatesError) as e:
        load_rates(f)
    assert str(e.value).startswith(f"--rates {f}: ") and why in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(RatesError, match="cannot read it"):
        load_rates(tmp_path / "missing.json")
