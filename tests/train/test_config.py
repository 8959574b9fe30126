"""Job configs: YAML validated at the door, DeepSpeed/Ray settings for CPU and GPU, resource checks."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from esc_eval.train.config import RankJobConfig, RoleJobConfig, TrainConfig, load_rank_config, load_role_config
from esc_eval.train.jobs.deepspeed_config import (
    build_deepspeed_config, check_resources, global_batch_size, scaling_config_kwargs, torch_backend, total_steps,
)
from esc_eval.train.errors import TrainConfigError

CONFIGS = Path(__file__).resolve().parents[2] / "train" / "configs"


def write(tmp_path, data) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def role_job(**train):
    return {"task": "role", "train": train, "data": {"sources": [{"path": "dialogues.json"}]}}


def test_example_configs_validate():
    role = load_role_config(CONFIGS / "role_cpu.yaml")
    assert role.train.model == "embedded" and role.train.num_workers == 2 and not role.train.use_gpu
    assert role.data.sources[0].path.is_absolute() and role.data.sources[0].path.name == "llama3_en.json"
    assert role.train.output_dir == Path("runs/train/esc-role")  # output_dir stays relative to the cwd
    gpu = load_role_config(CONFIGS / "role_gpu.yaml")
    assert gpu.train.use_gpu and gpu.train.deepspeed_stage == 3
    rank = load_rank_config(CONFIGS / "rank_cpu.yaml")
    assert rank.data.layout == "multitask" and rank.data.annotations[0].format == "official_scores"


@pytest.mark.parametrize("train,match", [
    ({"deepspeed_stage": 1}, r"train\.deepspeed_stage"),
    ({"lora": {"r": 0}}, r"train\.lora\.r"),
    ({"num_workers": 0}, r"train\.num_workers"),
    ({"learning_rate": -1}, r"train\.learning_rate"),
    ({"precision": "fp16"}, r"field 'train': .*fp16 needs GPUs"),
    ({"batch": 4}, r"train\.batch': Extra inputs are not permitted"),
])
def test_bad_fields_are_named(tmp_path, train, match):
    with pytest.raises(TrainConfigError, match=match):
        load_role_config(write(tmp_path, role_job(**train)))


def test_missing_data_and_bad_yaml(tmp_path):
    with pytest.raises(TrainConfigError, match=r"field 'data': Field required"):
        load_role_config(write(tmp_path, {"task": "role"}))
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [unclosed")
    with pytest.raises(TrainConfigError, match="not valid YAML"):
        load_role_config(bad)
    with pytest.raises(TrainConfigError, match="not found"):
        load_role_config(tmp_path / "none.yaml")
    with pytest.raises(TrainConfigError, match=r"data\.dimensions"):
        load_rank_config(write(tmp_path, {"task": "rank", "data": {
            "dialogues": [{"path": "d.json"}], "annotations": [{"path": "a.csv"}], "dimensions": ["kindness"]}}))


def test_model_path_must_be_a_model_folder(tmp_path):
    with pytest.raises(TrainConfigError, match=r"train\.model"):
        TrainConfig(model=str(tmp_path)).resolved_model_path()


def test_cpu_deepspeed_config():
    cfg = TrainConfig(micro_batch_size=2, gradient_accumulation_steps=3, num_workers=2, precision="bf16")
    ds = build_deepspeed_config(cfg, steps=10)
    assert ds["train_batch_size"] == 12 == global_batch_size(cfg)
    assert ds["optimizer"]["type"] == "AdamW" and ds["optimizer"]["params"]["torch_adam"] is True
    assert ds["bf16"]["enabled"] and not ds["fp16"]["enabled"]
    assert ds["zero_optimization"]["stage"] == 2 and not ds["zero_optimization"]["overlap_comm"]
    assert "offload_optimizer" not in ds["zero_optimization"]
    assert ds["scheduler"]["params"]["warmup_min_lr"] == cfg.learning_rate  # warmup 0 = constant lr
    assert torch_backend(cfg) == "gloo"
    assert scaling_config_kwargs(cfg) == {"num_workers": 2, "use_gpu": False, "resources_per_worker": {"CPU": 1.0}}


def test_gpu_deepspeed_config_built_on_cpu():
    cfg = TrainConfig(use_gpu=True, gpus_per_worker=1, num_workers=8, cpus_per_worker=4, deepspeed_stage=3,
                      precision="fp16", warmup_steps=5)
    ds = build_deepspeed_config(cfg, steps=100)
    assert "torch_adam" not in ds["optimizer"]["params"]  # DeepSpeed's fused AdamW on GPUs
    assert ds["fp16"]["enabled"] and not ds["bf16"]["enabled"]
    z = ds["zero_optimization"]
    assert z["stage"] == 3 and z["overlap_comm"] and z["stage3_gather_16bit_weights_on_model_save"]
    assert ds["scheduler"]["params"]["warmup_num_steps"] == 5 and ds["scheduler"]["params"]["warmup_min_lr"] == 0.0
    assert torch_backend(cfg) == "nccl"
    assert scaling_config_kwargs(cfg)["resources_per_worker"] == {"CPU": 4.0, "GPU": 1.0}


def test_gpu_config_on_a_cpu_cluster_fails_before_training():
    cfg = TrainConfig(use_gpu=True, num_workers=2)
    with pytest.raises(TrainConfigError, match=r"train\.use_gpu: the config asks for 2 GPU\(s\).*has 0"):
        check_resources(cfg, {"CPU": 2.0})
    check_resources(cfg, {"CPU": 16.0, "GPU": 2.0})
    with pytest.raises(TrainConfigError, match=r"train\.num_workers"):
        check_resources(TrainConfig(num_workers=4), {"CPU": 2.0})


def _skip_with_gpus():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has GPUs: the CPU-only refusal cannot be shown here")


def test_gpu_job_on_this_machine_fails_before_ray_starts(tmp_path):
    """The whole job refuses a GPU config on a CPU-only machine before any worker starts."""
    import ray

    from esc_eval.train.jobs.run import ray_session

    _skip_with_gpus()
    cfg = TrainConfig(use_gpu=True, model=str(tmp_path))
    with pytest.raises(TrainConfigError, match="train.use_gpu"):
        with ray_session(cfg):
            pass
    assert not ray.is_initialized()


def test_total_steps():
    cfg = TrainConfig(num_workers=2, micro_batch_size=1, gradient_accumulation_steps=2, epochs=2)
    assert total_steps(cfg, 10) == 5
    assert total_steps(TrainConfig(max_steps=7), 1000) == 7
    with pytest.raises(TrainConfigError):
        total_steps(cfg, 0)


def test_job_models_have_descriptions_everywhere():
    from pydantic import BaseModel

    seen = set()

    def walk(model: type[BaseModel]):
        if model in seen:
            return
        seen.add(model)
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"
            for arg in getattr(field.annotation, "__args__", ()) + (field.annotation,):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    walk(arg)

    walk(RoleJobConfig)
    walk(RankJobConfig)
    assert len(seen) >= 8


def test_gpu_role_job_fails_before_data_is_read(tmp_path):
    """run_role_job on this CPU-only machine with use_gpu: the first thing checked, no Ray, no data read."""
    import ray

    from esc_eval.train.config import DialogueSourceConfig, RoleDataConfig
    from esc_eval.train.jobs.role import run_role_job

    _skip_with_gpus()
    cfg = RoleJobConfig(train=TrainConfig(use_gpu=True, model=str(tmp_path)),
                        data=RoleDataConfig(sources=[DialogueSourceConfig(path=tmp_path / "does-not-exist.json")]))
    with pytest.raises(TrainConfigError, match="train.use_gpu"):
        run_role_job(cfg)
    assert not ray.is_initialized()


def test_precision_auto_follows_the_cpu(monkeypatch):
    from esc_eval.serve.devices import cpu

    parse = cpu.cpu_info
    for flags, expected in (("avx2", "fp32"), ("avx2 avx512f avx512_bf16", "bf16")):
        info = parse(f"model name: X\nflags: {flags}\n", cores=2)
        monkeypatch.setattr(cpu, "cpu_info", lambda *a, _i=info, **k: _i)
        cfg = TrainConfig()
        assert cfg.precision == "auto" and cfg.resolved_precision == expected
        ds = build_deepspeed_config(cfg, steps=10)
        assert ds["bf16"]["enabled"] is (expected == "bf16") and not ds["fp16"]["enabled"]
    assert TrainConfig(use_gpu=True).resolved_precision == "bf16"
    assert TrainConfig(precision="fp32").resolved_precision == "fp32"
