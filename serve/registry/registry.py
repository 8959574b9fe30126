"""The model registry: the paper's 14 target models, ESC-Role, ESC-RANK and the embedded CPU model.

Entries live in `serve/registry/data/registry.yaml` and are validated at the door by `ModelEntry`
(serve/registry/entry.py, with what an entry implies for its backend).
A registry name resolves to a chat-model spec (`<backend>/<name>`, see `serve.chat.interface.BACKENDS`):

    >>> resolve_spec("qwen1.5-7b-chat")      # 'vllm/Qwen/Qwen1.5-7B-Chat'
    >>> resolve_spec("fake/echo")            # a spec with a known backend passes through

Local weights override the hub id (`source`) without editing the YAML:
  * env `ESC_EVAL_MODEL_PATHS="qwen1.5-7b-chat=/models/qwen,esc-rank:fluency_en=/lora/f"`
    (`name=path` overrides the model; `name:adapter=path` overrides one adapter);
  * a YAML file of the same mapping, passed as `paths_file=` or named by env
    `ESC_EVAL_MODEL_PATHS_FILE`.
"""
from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from esc_eval.serve.chat.interface import BACKENDS, UnknownModelError
from esc_eval.serve.config.base import ConfigModel, describe_validation_error
from esc_eval.serve.registry.entry import DROP_ADAPTER, PATHS_ENV, ModelEntry, RegistryError, backend_options

DEFAULT_REGISTRY_PATH = Path(__file__).parent / "data" / "registry.yaml"
PATHS_FILE_ENV = "ESC_EVAL_MODEL_PATHS_FILE"


class Registry(ConfigModel):
    """All known models, by registry name."""

    models: dict[str, ModelEntry] = Field(description="Registry name -> entry.")

    def get(self, name: str) -> ModelEntry:
        try:
            return self.models[name]
        except KeyError:
            close = difflib.get_close_matches(name.lower(), list(self.models), n=3, cutoff=0.4)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownModelError(
                f"model {name!r} is not in the registry{hint} (known: {', '.join(sorted(self.models))})"
            ) from None

    def names(self) -> list[str]:
        return list(self.models)

    def targets(self, language: str | None = None) -> list[ModelEntry]:
        """The paper's Table 2 target models, optionally those evaluated in one language."""
        return [m for m in self.models.values() if m.paper_target and (language is None or language in m.languages)]

    def resolve_spec(self, name_or_spec: str) -> str:
        """A spec with a known backend prefix passes through; anything else is a registry name."""
        return resolve(name_or_spec, self)[0]


def parse_path_overrides(text: str) -> dict[str, str]:
    """Parse 'name=path,name:adapter=path' into a mapping (keys keep the ':adapter' part)."""
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise RegistryError(f"{PATHS_ENV}: expected name=path, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _read_yaml(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: not valid YAML: {exc}") from exc


def _apply_paths(raw: dict[str, dict[str, Any]], paths: dict[str, str], origin: str) -> None:
    for key, value in paths.items():
        name, _, adapter = key.partition(":")
        if name not in raw:
            close = difflib.get_close_matches(name, list(raw), n=3)
            raise UnknownModelError(f"{origin}: unknown model {name!r}" + (f"; did you mean {', '.join(close)}?" if close else ""))
        if adapter and value == DROP_ADAPTER:
            # 'esc-role:esc-role=-': the local weights already have the LoRA merged in
            raw[name].setdefault("adapters", {}).pop(adapter, None)
        elif adapter:
            raw[name].setdefault("adapters", {})[adapter] = value
        else:
            raw[name]["local_path"] = value


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_registry(
    path: str | Path | None = None,
    overrides: dict[str, dict[str, Any]] | None = None,
    *,
    paths_file: str | Path | None = None,
    env: dict[str, str] | None = None,
) -> Registry:
    """Load and validate the registry.

    path: the registry YAML (default: the packaged serve/registry/data/registry.yaml).
    overrides: name -> {field: value}, deep-merged into entries (a new name adds an entry).
    paths_file: YAML mapping name (or name:adapter) -> local path; default env ESC_EVAL_MODEL_PATHS_FILE.
    env: the environment to read (default os.environ); ESC_EVAL_MODEL_PATHS is applied last.
    """
    env = os.environ if env is None else env
    path = Path(path) if path is not None else DEFAULT_REGISTRY_PATH
    data = _read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise RegistryError(f"{path}: expected a mapping with a 'models:' mapping of name -> entry")
    raw: dict[str, dict[str, Any]] = {}
    for name, entry in data["models"].items():
        if not isinstance(entry, dict):
            raise RegistryError(f"{path}: models.{name}: expected a mapping of fields")
        raw[str(name)] = {"name": str(name), **entry}
    for name, extra in (overrides or {}).items():
        raw[name] = _deep_merge(raw.get(name, {"name": name}), extra)
    paths_file = paths_file or env.get(PATHS_FILE_ENV)
    if paths_file:
        pf = _read_yaml(Path(paths_file)) or {}
        if not isinstance(pf, dict):
            raise RegistryError(f"{paths_file}: expected a mapping of name -> local path")
        _apply_paths(raw, {str(k): str(v) for k, v in pf.items()}, str(paths_file))
    if env.get(PATHS_ENV):
        _apply_paths(raw, parse_path_overrides(env[PATHS_ENV]), PATHS_ENV)
    for name, entry in raw.items():
        if entry.get("name", name) != name:
            raise RegistryError(f"{path}: models.{name}.name: must equal its key {name!r}")
    try:
        return Registry(models=raw)
    except ValidationError as exc:
        raise RegistryError(describe_validation_error(exc, f"model registry {path}")) from None


_DEFAULT: Registry | None = None


def default_registry() -> Registry:
    """The packaged registry with the environment's path overrides (cached per process)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_registry()
    return _DEFAULT


def is_spec(name_or_spec: str) -> bool:
    """True for a backend spec such as 'openai/gpt-4' or 'fake/echo'; False for a registry name."""
    backend, sep, rest = str(name_or_spec).partition("/")
    return bool(sep and rest and backend in BACKENDS)


def resolve(name_or_spec: str, registry: Registry | None = None) -> tuple[str, dict[str, Any]]:
    """The one resolver: a registry name or a spec -> (spec, backend options the entry implies).

    'openai/gpt-4' passes through with no options; 'qwen1.5-7b-chat' becomes
    ('vllm/Qwen/Qwen1.5-7B-Chat', {...engine options from its entry...})."""
    if is_spec(name_or_spec):
        return name_or_spec, {}
    entry = (registry or default_registry()).get(name_or_spec)
    return entry.resolved_spec(), backend_options(entry)


def resolve_spec(name_or_spec: str, registry: Registry | None = None) -> str:
    """resolve() without the options: the concrete spec of a name or spec."""
    return resolve(name_or_spec, registry)[0]


PAPER_GROUPS = ("close", "open", "domain")


def model_groups(models: list[str], registry: Registry | None = None) -> dict[str, str]:
    """model -> close | open | domain (the paper's Table 2 groups) for the models the registry
    knows: by registry name (an ':adapter' suffix ignored, any case), by spec, or by resolved spec.
    Unknown models are left out (reports show them as unassigned)."""
    reg = registry or default_registry()
    by_spec: dict[str, ModelEntry] = {}
    for e in reg.models.values():
        by_spec.setdefault(e.spec, e)
        if e.weights or "{path}" not in e.spec:
            by_spec.setdefault(e.resolved_spec(), e)
    out = {}
    for m in models:
        m = str(m)
        entry = reg.models.get(m.split(":")[0].lower()) or by_spec.get(m)
        if entry is not None and entry.group in PAPER_GROUPS:
            out[m] = entry.group
    return out


def build_chat_model(name_or_spec: str, registry: Registry | None = None, **options: Any):
    """get_chat_model for a registry name or a spec; registry-implied options are overridden by `options`."""
    from esc_eval.serve.chat.interface import get_chat_model

    spec, implied = resolve(name_or_spec, registry)
    return get_chat_model(spec, **{**implied, **options})
