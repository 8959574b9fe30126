"""The model under test as a dialogue sees it: its name in rows and dialogue ids, and the system
prompt its registry entry asks for."""
from __future__ import annotations

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import is_spec
from esc_eval.sim.dialogue.prompts import target_system_prompt


def target_name(ref: ModelRef) -> str:
    """The target's name in rows and dialogue ids (ModelRef.target_name)."""
    return ref.target_name


def registry_system_prompt(ref: ModelRef) -> str | None:
    """The system prompt a registry entry asks for: None = the release's default for the card's
    language, "" = no system message (templates without a system role)."""
    if is_spec(ref.model):
        return None
    from esc_eval.serve.registry.registry import default_registry

    entry = default_registry().get(ref.model)
    if entry.system_prompt == target_system_prompt("en"):
        return None
    return entry.system_prompt or ""


def configured_system_prompt(ref: ModelRef) -> str | None:
    """The target's system prompt as configured: the config's, else its registry entry's (None = the
    release's default for the card's language, "" = no system message)."""
    return ref.system_prompt if ref.system_prompt is not None else registry_system_prompt(ref)


def target_system(configured: str | None, language: str) -> str:
    """The system prompt a target's calls carry for a card in `language`, from its
    configured_system_prompt ("" = no system message)."""
    return target_system_prompt(language) if configured is None else configured
