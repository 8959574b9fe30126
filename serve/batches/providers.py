"""Which batch API a judge's spec goes to: OpenAI's (`openai/<model>` under OpenAI's rules,
`litellm/openai/<model>`) or Anthropic's (`litellm/anthropic/<model>`); any other spec has none here,
said in one line before any work."""
from __future__ import annotations

from typing import Any

from esc_eval.serve.backends.litellm_api import split_model
from esc_eval.serve.batches.anthropic_batches import AnthropicBatches
from esc_eval.serve.batches.openai_batches import OpenAIBatches
from esc_eval.serve.batches.transport import BatchTransport

SPECS = "openai/<model>, litellm/openai/<model> or litellm/anthropic/<model>"


def batch_transport(spec: str, options: dict[str, Any]) -> BatchTransport:
    """The batch API of the model `spec` (with its options); ValueError in one line where it has none."""
    prefix, _, name = spec.partition("/")
    if prefix == "openai":
        if options.get("api", "openai") != "openai":
            raise ValueError(f"model {spec!r}: a server under api: {options['api']} has no batch API; --batch needs "
                             f"OpenAI's ({SPECS})")
        return OpenAIBatches(name, base_url=options.get("base_url"), api_key_env=options.get("api_key_env"),
                             structured=options.get("structured_outputs"), extra_body=options.get("extra_body"))
    if prefix == "litellm":
        provider, model = split_model(name)
        if provider == "openai":
            return OpenAIBatches(model, base_url=options.get("api_base"), api_key_env=options.get("api_key_env"),
                                 through_litellm=True)
        if provider == "anthropic":
            return AnthropicBatches(model, api_base=options.get("api_base"), api_key_env=options.get("api_key_env"))
        raise ValueError(f"model {spec!r}: no batch API for provider {provider!r} here; --batch sends judge calls to "
                         f"OpenAI's or Anthropic's ({SPECS})")
    raise ValueError(f"model {spec!r} is no API model: --batch sends judge calls to a provider's batch API ({SPECS}); "
                     "score it without --batch")
