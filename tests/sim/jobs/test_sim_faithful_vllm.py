"""A registry entry's LoRA adapter on the real vLLM engine: naming the entry is enough for every
role call to go through its adapter (ESC-Role's case), and the rows say so."""
import pytest

import esc_eval.serve.registry.registry as registry_mod
from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import load_registry
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny_role_adapter(tmp_path_factory):
    """A tiny random PEFT LoRA over the embedded SmolLM2 (rank 4 on q/v)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from esc_eval.serve.engines.embedded import embedded_model_path

    folder = tmp_path_factory.mktemp("tiny-role") / "esc-role"
    base = AutoModelForCausalLM.from_pretrained(str(embedded_model_path()), dtype=torch.float32)
    torch.manual_seed(7)
    # init_lora_weights=False: random A and B (PEFT's default zero B would equal the base model)
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=32, target_modules=["q_proj", "v_proj"],
                                            init_lora_weights=False))
    model.save_pretrained(str(folder))
    return folder


def test_registry_role_adapter_applies_to_every_call_in_the_engine(tiny_role_adapter, embedded_model, tmp_path, monkeypatch):
    reg = load_registry(env={}, overrides={"tiny-role": {
        "title": "tiny role", "group": "role", "source": "embedded", "spec": "vllm/embedded", "languages": ["en"],
        "system_prompt": None, "max_model_len": 2048, "adapters": {"esc-role": str(tiny_role_adapter)}}})
    monkeypatch.setattr(registry_mod, "_DEFAULT", reg)
    from esc_eval.serve.backends.vllm_engine import engines_started_here

    def simulate(role: str, out: str, **options):
        cfg = SimulationConfig(cards="sample", languages=["en"], limit=1, rounds=2,
                               role=ModelRef(model=role, params=GenerationParams(max_tokens=24), options=options),
                               targets=[ModelRef(model="fake/fixed?reply=I am listening.")],
                               execution=ExecutionConfig(executor="local"))
        run_simulation(cfg, tmp_path / out)
        return next(iter(RunFolder(tmp_path / out).iter_rows("dialogues")))

    with engines_started_here():  # the adapter's engine goes after the test; the session's shared engine stays up
        with_lora = simulate("tiny-role", "lora", max_model_len=2048)
        # the base model on the session's engine (its default arguments: no engine start for the comparison)
        base = simulate("vllm/embedded", "base")
    assert with_lora["status"] == "ok" and base["status"] == "ok", (with_lora["error"], base["error"])
    assert with_lora["role_adapter"] == "esc-role" and base["role_adapter"] is None
    seeker = lambda row: [t["text"] for t in row["turns"] if t["speaker"] == "seeker"]  # noqa: E731
    assert len(seeker(with_lora)) == 2
    # greedy, same prompts: every seeker turn differs from the base model's only through the adapter
    assert all(a != b for a, b in zip(seeker(with_lora), seeker(base))), (seeker(with_lora), seeker(base))
