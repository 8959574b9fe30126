"""The one base of every esc-eval config (simulation, scoring, training, card building, serving,
the model registry) and the one way its errors are told: YAML in, validated at the door, and a
bad field is one line naming the file and the field, e.g.

    runs/sim.yaml: field 'execution.workers': Input should be greater than or equal to 1

It lives in serve/, the bottom layer, because every other package builds on it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError


class ConfigModel(BaseModel):
    """Base of all config models: unknown fields are errors (a typo never passes silently)."""

    model_config = ConfigDict(extra="forbid")


M = TypeVar("M", bound=BaseModel)


def describe_validation_error(e: ValidationError, where: str) -> str:
    """Every error of `e` on one line: "<where>: field '<a.b.c>': <message>[; ...]"."""
    def one_line(text: str) -> str:  # a key or message from the file may hold line breaks
        return " ".join(repr(text)[1:-1].split()) if any(c in text for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029") else text

    parts = []
    for err in e.errors():
        loc = ".".join(str(x) for x in err.get("loc", ())) or "(top level)"
        parts.append(f"field '{one_line(loc)}': {one_line(str(err.get('msg')))}")
    return f"{where}: " + "; ".join(parts)


def read_yaml_mapping(path: str | Path, error: type[Exception] = ValueError) -> dict[str, Any]:
    """A YAML file whose top level is a mapping; `error` names the file on every failure."""
    import yaml

    p = Path(path)
    if not p.exists():
        raise error(f"{p}: config file not found")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError:
        raise error(f"{p}: not UTF-8 text") from None
    except yaml.YAMLError as e:
        raise error(f"{p}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise error(f"{p}: expected a mapping at the top level, got {type(data).__name__}")
    return data


def validate_config(cls: type[M], data: Any, where: str, error: type[Exception] = ValueError) -> M:
    """cls.model_validate(data), with a validation error re-raised as `error` in the one format."""
    if not isinstance(data, dict):
        raise error(f"{where}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise error(describe_validation_error(e, where)) from None


def comma_list(value: str | None, cast: Callable[[str], Any] = str) -> list | None:
    """A comma-separated option as a list of `cast` values (None stays None; empty items are dropped);
    ValueError from `cast` on an item it cannot read."""
    if value is None:
        return None
    return [cast(v.strip()) for v in value.split(",") if v.strip()]


def load_config_file(path: str | Path, cls: type[M], error: type[Exception] = ValueError) -> M:
    """Read and validate a YAML config file."""
    return validate_config(cls, read_yaml_mapping(path, error), str(path), error)


class ConfigError(ValueError):
    """A config file is missing, malformed or invalid; the message names the file and field."""


def load_config(path: str | Path | None, cls: type[M], overrides: dict[str, Any] | None = None) -> M:
    """Load a YAML config into `cls` (a run's: simulation, scoring, pipeline), with `overrides` by
    dotted field name (a command's options, None = not given); errors are ConfigError naming the
    file and the field."""
    where = str(path) if path else "config"
    data: dict[str, Any] = read_yaml_mapping(path, ConfigError) if path is not None else {}
    for key, value in (overrides or {}).items():
        if value is not None:
            _set_path(data, key, value)
    return validate_config(cls, data, where, ConfigError)


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    cur = data
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
