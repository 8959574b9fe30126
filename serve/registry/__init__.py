"""serve.registry: the models by name. The packaged registry (data/registry.yaml: the paper's 14
targets, ESC-Role, ESC-RANK, the embedded model; data/templates/ chat templates), one entry and what
it implies for its backend (`entry.py`), a model reference in a run config (`ref.py`), loading,
overrides and the one name-or-spec resolver (`registry.py`), and a model's size (`size.py`).

Layer: above calls, chat and config; beside engines (neither imports the other)."""
from esc_eval.serve.registry.entry import MissingAdapterError, ModelEntry, RegistryError, TokenPrice
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import (Registry, build_chat_model, default_registry, is_spec, load_registry,
                                              model_groups, resolve, resolve_spec)
from esc_eval.serve.registry.size import ModelFacts, model_facts

__all__ = ["MissingAdapterError", "ModelEntry", "ModelFacts", "ModelRef", "Registry", "RegistryError", "TokenPrice",
           "build_chat_model", "default_registry", "is_spec", "load_registry", "model_facts", "model_groups", "resolve",
           "resolve_spec"]
