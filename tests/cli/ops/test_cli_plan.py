"""`esc-eval plan` with the projected run time (serve/plan/projection.py), as a user calls it (CliRunner),
on described GPUs: the shipped configs, the answer length, a bench gpu rates file, bad input."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from esc_eval.cli.app import app

ROOT = Path(__file__).resolve().parents[3]
ONE_GPU = ROOT / "cluster" / "configs" / "role-and-target-1gpu.yaml"
PAPER = ROOT / "cluster" / "configs" / "paper-run-8gpu.yaml"
BENCH = ROOT / "tests" / "serve" / "fixtures" / "bench_gpu_2xh100.json"


@pytest.fixture
def paper_models(monkeypatch):
    """ExTES-LLaMa and EmoLLM given folders (the README's ESC_EVAL_MODEL_PATHS), the registry reloaded."""
    from esc_eval.serve.registry import registry

    monkeypatch.setenv("ESC_EVAL_MODEL_PATHS", "extes-llama=/models/extes-llama,emollm=/models/emollm")
    monkeypatch.setattr(registry, "_DEFAULT", None)


def _run(*args):
    return CliRunner().invoke(app, ["plan", *map(str, args)])


def _projection(output: str) -> list[str]:
    lines = output.splitlines()
    return lines[lines.index("projection (arithmetic on measured rates, not a measurement of this plan):"):]


def test_role_and_target_on_one_h100_prints_the_projection():
    from esc_eval.serve.config import load_config
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.sim.jobs.simulation_items import select_cards

    cards = len(select_cards(load_config(ONE_GPU, SimulationConfig)))
    out = _run(ONE_GPU, "--gpus", 1, "--accelerator-type", "H100")
    assert out.exit_code == 0, out.output
    proj = _projection(out.output)
    # the role (14.17B) on 0.6261 of the GPU: cards x 5 seeker turns x 512 tokens at 2,052 x 13.1 / 14.17 tok/s per GPU
    role_s = cards * 5 * 512 / (2052 * 13.1 / 14.17 * 0.6261)
    assert proj[1].startswith(f"  simulation: {role_s / 60:.1f} min + 3.0 min engine start; esc-role the slowest: ")
    assert proj[2] == f"  total: {(role_s + 180) / 60:.1f} min"
    assert any(line.startswith("  rates: one H100 80GB run with random weights on vLLM 0.26 (../shared/notes/gpu-h100.md)")
               for line in proj)
    assert "role 512, targets 512: the max_tokens caps, the worst case" in out.output
    assert out.output.splitlines()[-1] == "ok: nothing refused"
    short = json.loads(_run(ONE_GPU, "--gpus", 1, "--accelerator-type", "H100", "--answer-tokens", 100, "--json").output)
    sim = short["projection"]["phases"][0]
    assert sim["phase"] == "simulation" and sim["seconds"] == pytest.approx(role_s * 100 / 512, rel=1e-3)
    assert "role 100, targets 100 (--answer-tokens)" in short["projection"]["assumptions"][0]
    cpu = _run(ONE_GPU, "--gpus", 0)
    assert "projection" not in cpu.output  # no GPUs: nothing to project (in-process: ESC-Role's LoRA is no folder here)
    a10g = _run(ONE_GPU, "--gpus", 4, "--accelerator-type", "A10G")
    assert "projection" not in a10g.output.split("note: no projection")[0]
    assert "note: no projection: the built-in rates are one H100's; give --rates from `esc-eval bench gpu` run on a A10G" \
        in a10g.output


def test_the_papers_whole_run_on_one_8_h100_node(paper_models):
    out = _run(PAPER, "--gpus", 8, "--accelerator-type", "H100", "--cards", 655)
    assert out.exit_code == 0, out.output
    assert "- esc-role [role]: Serve deployment esc-role, 4 replicas, 1 GPU per replica" in out.output
    assert "sequence lengths estimated on the shipped sample cards, 655 cards projected (--cards)" in out.output
    proj = _projection(out.output)
    role_s = 655 * 14 * 5 * 512 / (2052 * 13.1 / 14.17 * 4)
    score_s = 655 * 14 / (3.73 * 7.38 / 7.74 * 8)
    assert proj[1].startswith(f"  simulation: {role_s / 60:.1f} min + 3.0 min engine start; esc-role the slowest: 23.5M")
    assert proj[2].startswith(f"  scoring: {score_s / 60:.1f} min + 3.0 min engine start; 9,170 dialogues x 7 dimensions")
    assert proj[3] == f"  total: {(role_s + score_s + 360) / 60:.1f} min"
    assert "  not projected: gpt-4, chatgpt (API models: external)" in proj
    short = json.loads(_run(PAPER, "--gpus", 8, "--accelerator-type", "H100", "--cards", 655, "--answer-tokens", 100,
                            "--json").output)["projection"]
    assert short["total_s"] < 3600  # the target, at a realistic answer length


def test_rates_from_a_bench_gpu_json_and_bad_rates_in_one_line(tmp_path):
    measured = _run(ONE_GPU, "--gpus", 1, "--accelerator-type", "H100", "--rates", BENCH)
    assert measured.exit_code == 0, measured.output
    assert f"  rates: {BENCH}: esc-eval bench gpu on 2 x NVIDIA H100 80GB HBM3 (vLLM 0.32.0)" in measured.output
    other = _run(ONE_GPU, "--gpus", 1, "--accelerator-type", "A100", "--rates", BENCH)
    assert other.exit_code == 1 and other.output == ""  # nothing planned or printed
    assert str(other.exception) == (f"--rates {BENCH}: measured on NVIDIA H100 80GB HBM3, the plan is for A100: measure "
                                    f"there (esc-eval bench gpu), or plan for that GPU type")
    bad = tmp_path / "plan.json"
    bad.write_text(_run(ONE_GPU, "--gpus", 1, "--accelerator-type", "H100", "--json").output)  # a plan, not rates
    refused = _run(ONE_GPU, "--gpus", 1, "--rates", bad)
    assert refused.exit_code == 1 and refused.output == ""
    assert str(refused.exception).startswith(f"--rates {bad}: not an `esc-eval bench gpu` JSON")
    away = _run(PAPER, "--gpus", 8, "--accelerator-type", "H100")  # the release's cards are on the cluster
    assert away.exit_code == 1 and str(away.exception) == ("/results/cards/cards_en_zh.json: card file not found "
                                                           "(planning away from it: --cards N plans for N cards)")
    wrong = _run(ONE_GPU, "--gpus", 1, "--answer-tokens", "judge=5")
    assert wrong.exit_code == 2 and "--answer-tokens 'judge=5': give a number of tokens" in wrong.output


def test_a_scoring_config_is_projected_for_the_dialogues_given(tmp_path):
    cfg = tmp_path / "score.yaml"
    cfg.write_text("judge: {model: {model: esc-rank}, prompt_order: dialogue_first}\n")
    unknown = _run(cfg, "--gpus", 1, "--accelerator-type", "H100")
    assert "  not projected: the scoring (the dialogues to score are not known: give --dialogues N)" in unknown.output
    out = _run(cfg, "--gpus", 1, "--accelerator-type", "H100", "--dialogues", 8500)
    # the notes' 12.1 dialogues/s dialogue_first for the 7.38B judge, scaled to ESC-RANK's 7.74B, one GPU
    seconds = 8500 / (12.1 * 7.38 / 7.74)
    assert f"  scoring: {seconds / 60:.1f} min + 3.0 min engine start; 8,500 dialogues x 7 dimensions, dialogue_first" \
        in out.output, out.output
    assert f"  total: {(seconds + 180) / 60:.1f} min" in out.output


def test_a_panel_of_two_judges_shares_one_gpu_and_the_slowest_judge_bounds_the_scoring(tmp_path):
    """The issue's GPU case planned without a GPU: a panel of two 7B judges on one H100, each a Serve
    deployment with its share of the GPU (the default mode), projected as one pass."""
    cfg = tmp_path / "panel.yaml"
    cfg.write_text("panel:\n  judges:\n    - judge: {model: {model: esc-rank}, prompt_order: dialogue_first}\n"
                   "    - judge: {model: {model: qwen1.5-7b-chat}, prompt_order: dialogue_first}\n")
    out = _run(cfg, "--gpus", 1, "--accelerator-type", "H100", "--dialogues", 8500)
    assert out.exit_code == 0, out.output
    assert "- esc-rank [judge]: Serve deployment" in out.output and "- qwen1.5-7b-chat [judge]: Serve deployment" in out.output
    shares = re.search(r"GPU 0: (\S+) ([\d.]+) \+ (\S+) ([\d.]+)", out.output)
    assert shares and {shares.group(1), shares.group(3)} == {"esc-rank", "qwen1.5-7b-chat"}
    assert abs(float(shares.group(2)) + float(shares.group(4)) - 1.0) < 1e-3
    line = next(x for x in out.output.splitlines() if x.startswith("  scoring:"))
    assert "of esc-rank" in line and "of qwen1.5-7b-chat" in line and "the slowest bounds it" in line
    # the slower judge's time: the one with the smaller share of the GPU
    minutes = float(re.search(r"scoring: ([\d.]+) min", line).group(1))
    rates = {m.group(3): (float(m.group(1)), float(m.group(2))) for m in
             re.finditer(r"at ([\d.]+) dialogues/s per GPU x ([\d.]+) GPUs of (\S+)", line)}
    assert abs(minutes - max(8500 / (r * g) for r, g in rates.values()) / 60) < 0.01 * minutes  # rates print 3 digits
