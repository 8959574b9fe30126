"""Integration: real training on Ray Train + DeepSpeed (2 CPU workers, gloo), checkpoints and
resume, and the trained SmolLM2 adapter served by vLLM changing its output.

Run with: flock /tmp/esc-eval-heavy.lock .venv/bin/python -m pytest tests/train -m slow
"""
from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from esc_eval.train.config import DialogueSourceConfig, RoleDataConfig, RoleJobConfig, TrainConfig

pytestmark = [pytest.mark.slow, pytest.mark.beside]

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "esc-eval" / "torch_extensions"))

MEMO = "Zanzibar the purple giraffe ate my homework again!"


def memorable_esconv(path: Path, n: int = 4) -> Path:
    """A tiny ESConv-format file whose seeker always says the same odd sentence."""
    data = [{"problem_type": "academic pressure", "emotion_type": "anxiety", "situation": f"Student {i} lost homework.",
             "dialog": [{"speaker": "seeker", "content": MEMO},
                        {"speaker": "supporter", "content": "Oh no. Can you tell me more?"},
                        {"speaker": "seeker", "content": MEMO}]} for i in range(n)]
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def train_ray(tmp_path_factory):
    """One Ray for the module's four training runs, started as training starts it (train.jobs.run.ray_session,
    the runs' defaults: 2 workers of 1 CPU): run_training joins a running Ray, and each Ray start and
    shutdown costs ~10 s on a 2-core CPU. Shut down after the module, so no later test finds it."""
    import ray

    from esc_eval.train.jobs.run import ray_session

    if ray.is_initialized():  # another module's Ray: not the one training would start
        ray.shutdown()
    with ray_session(TrainConfig(output_dir=tmp_path_factory.mktemp("train-ray"))):
        yield


@pytest.fixture(autouse=True)
def no_ray_left_from_other_tests(train_ray):
    """tests/train/conftest.py's fixture of this name shuts down any Ray before each test (tests that
    check bad input fails before Ray starts); here the module's own Ray stays up between its tests."""
    yield


def test_tiny_llama_trains_checkpoints_and_resumes(tmp_path, tiny_llama_dir):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from esc_eval.train.adapter_registry import load_registry_entry
    from esc_eval.train.jobs.role import run_role_job

    data = RoleDataConfig(sources=[DialogueSourceConfig(path=memorable_esconv(tmp_path / "esconv.json", 6))],
                          validation_fraction=0.2)
    train = TrainConfig(model=str(tiny_llama_dir), max_steps=3, checkpoint_every=2, keep_checkpoints=2,
                        max_seq_len=1024, num_workers=2, precision="fp32", deepspeed_stage=2, learning_rate=1e-2,
                        output_dir=tmp_path / "out")
    steps: list[dict] = []
    summary = run_role_job(RoleJobConfig(train=train, data=data), on_step=steps.append)
    run = summary["runs"][0]
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert steps[-1]["val_loss"] is not None and steps[-1]["loss"] < steps[0]["loss"]
    adapter = Path(run["adapter_path"])
    assert (adapter / "adapter_config.json").exists() and (adapter / "adapter_model.safetensors").exists()
    ckpts = sorted(p for p in (tmp_path / "out" / "ray" / "esc-role").glob("checkpoint_*") if p.is_dir())
    assert len(ckpts) == 2  # step 2 and step 3 (num_to_keep=2)
    assert json.loads((ckpts[-1] / "train_state.json").read_text())["step"] == 3
    assert len(list((ckpts[-1] / "deepspeed" / "state").glob("zero_pp_rank_*_optim_states.pt"))) == 2
    entry = load_registry_entry(tmp_path / "out")
    assert entry.kind == "role" and entry.adapters == {"esc-role": str(adapter)}
    # the saved adapter loads with PEFT and is not the zero-initialised LoRA any more
    base = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    peft_model = PeftModel.from_pretrained(base, adapter)
    lora_b = [p for n, p in peft_model.named_parameters() if "lora_B" in n]
    assert lora_b and any(float(p.abs().sum()) > 0 for p in lora_b)

    # resume: 2 more steps continue from the step-3 checkpoint (same layout: ZeRO-2, 2 workers)
    more = train.model_copy(update={"max_steps": 5, "resume": True})
    resumed: list[dict] = []
    run_role_job(RoleJobConfig(train=more, data=data), on_step=resumed.append)
    new_steps = [s["step"] for s in resumed if s["step"] > 3]
    assert new_steps == [4, 5]
    assert all(s["total_steps"] == 5 for s in resumed if s["step"] > 3)


def test_tiny_llama_zero3_judge_multitask(tmp_path, tiny_llama_dir):
    """ZeRO-3 (partitioned LoRA gathered on save) on the judge job, no evaluation; bf16, so DeepSpeed's
    bf16 path on CPU is tested on every machine (on a tiny model it costs nothing even where bf16 is
    emulated)."""
    from esc_eval.train.config import AnnotationSourceConfig, EvalConfig, RankDataConfig, RankJobConfig
    from esc_eval.train.jobs.rank import run_rank_job
    from esc_eval.sim.judging.dimensions import DIMENSION_NAMES

    dialogues = {str(i): ["AI assistant：Hello, tell me.", f"ESC-Role：Problem number {i}.", "AI assistant：I see."]
                 for i in range(10)}
    (tmp_path / "m_en.json").write_text(json.dumps(dialogues, ensure_ascii=False))
    rows = [{"dialogue_id": f"m_en:{i}", "dimension": d, "score": i % 5, "annotator": "t"}
            for i in range(10) for d in DIMENSION_NAMES[:2]]
    (tmp_path / "ann.json").write_text(json.dumps(rows))
    cfg = RankJobConfig(
        train=TrainConfig(model=str(tiny_llama_dir), max_steps=2, checkpoint_every=2, max_seq_len=2048, num_workers=2,
                          precision="bf16", deepspeed_stage=3, learning_rate=1e-3, output_dir=tmp_path / "out"),
        data=RankDataConfig(dialogues=[DialogueSourceConfig(path=tmp_path / "m_en.json")],
                            annotations=[AnnotationSourceConfig(path=tmp_path / "ann.json")], layout="multitask"),
        evaluation=EvalConfig(enabled=False),
    )
    summary = run_rank_job(cfg)
    [run] = summary["runs"]
    assert run["name"] == "esc-rank" and run["total_steps"] == 2 and run["n_train"] == 14
    from safetensors.torch import load_file

    weights = load_file(str(Path(run["adapter_path"]) / "adapter_model.safetensors"))
    assert weights and all(t.numel() > 0 for t in weights.values())  # gathered, not empty ZeRO-3 shards


def test_smollm2_adapter_changes_vllm_output(tmp_path, monkeypatch):
    """Train the embedded SmolLM2 for a few steps (Ray Train, DeepSpeed ZeRO-2, 2 CPU workers, the
    default precision: this CPU's fast dtype) on a tiny memorable role-play set, then serve base +
    adapter in one vLLM engine."""
    from esc_eval.serve.chat.interface import ChatMessage, GenerationParams
    from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt
    from esc_eval.train.adapter_registry import load_registry_entry
    from esc_eval.train.jobs.role import run_role_job

    cfg = RoleJobConfig(
        train=TrainConfig(model="embedded", max_steps=6, checkpoint_every=6, max_seq_len=256, num_workers=2,
                          deepspeed_stage=2, learning_rate=3e-3, lora={"r": 16, "alpha": 32, "dropout": 0.0},
                          output_dir=tmp_path / "out"),
        data=RoleDataConfig(sources=[DialogueSourceConfig(path=memorable_esconv(tmp_path / "memo.json"))],
                            validation_fraction=0.0),
    )
    steps: list[dict] = []
    summary = run_role_job(cfg, on_step=steps.append)
    assert steps[-1]["loss"] < steps[0]["loss"]
    entry = load_registry_entry(tmp_path / "out")
    # a 1 GiB KV cache (not the suite's 2) holds 1024-token sequences many times over and starts ~6 s sooner
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    model = entry.chat_model(max_model_len=1024, enforce_eager=True)
    card = "Age: not mentioned\nGender: not mentioned\nOccupation: student\nProblem: Someone else lost homework."
    messages = [ChatMessage(role="system", content=roleplay_system_prompt(card, "en")),
                ChatMessage(role="user", content=opener("en"))]
    params = GenerationParams(max_tokens=24, temperature=0.0, logprobs=1)

    async def both():
        try:
            return (await model.chat(messages, params), await model.chat(messages, params, adapter="esc-role"))
        finally:
            await model.close()

    base, tuned = asyncio.run(both())
    report = {"base": base.text, "adapter": tuned.text, "steps": steps, "run": summary["runs"][0]}
    (tmp_path / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: report[k] for k in ("base", "adapter")}, indent=2))
    print("mean s/step", summary["runs"][0]["mean_step_time_s"], "first step after", summary["runs"][0]["first_step_at_s"])
    assert tuned.text != base.text
    assert "giraffe" in tuned.text.lower() or "zanzibar" in tuned.text.lower()
    assert "giraffe" not in base.text.lower()
