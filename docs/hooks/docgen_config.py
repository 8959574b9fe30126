"""The configuration reference, generated from the pydantic models: for each config file the model
that reads it, then every model it uses (walked through the field types, each once), with every
field's type, default, bounds and description."""
from __future__ import annotations

import enum
import importlib
import inspect
import types
import typing
from dataclasses import dataclass
from typing import Any, Iterable

import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined, to_jsonable_python

from docgen_text import anchor, cell, code, escape


@dataclass(frozen=True)
class ConfigFile:
    """A kind of file a user writes, and the model that validates it."""

    title: str
    model: str  # "module:Class"
    read_by: str  # which commands read it (Markdown)


# The files a user writes, in the order a newcomer meets them. Every model they use is found by
# walking their fields, so a new nested model appears without being listed here.
CONFIG_FILES = [
    ConfigFile("Simulation", "esc_eval.sim.jobs.config:SimulationConfig", "`esc-eval simulate -c FILE`, `esc-eval plan FILE`"),
    ConfigFile("Scoring", "esc_eval.sim.jobs.config:ScoringConfig", "`esc-eval score -c FILE`, `esc-eval plan FILE`"),
    ConfigFile("Pipeline (simulation, then scoring)", "esc_eval.sim.jobs.config:PipelineConfig",
               "`esc-eval demo -c FILE`, `esc-eval plan FILE`"),
    ConfigFile("Model registry entry", "esc_eval.serve.registry.entry:ModelEntry",
               "every entry under `models:` of `serve/registry/data/registry.yaml` (local weights: `ESC_EVAL_MODEL_PATHS`, `ESC_EVAL_MODEL_PATHS_FILE`)"),
    ConfigFile("Serve application", "esc_eval.serve.app.application:ServeConfig", "`esc-eval serve up --config FILE`, `esc-eval plan FILE`"),
    ConfigFile("Training ESC-Role", "esc_eval.train.config:RoleJobConfig", "`esc-eval train role --config FILE`"),
    ConfigFile("Training ESC-RANK", "esc_eval.train.config:RankJobConfig", "`esc-eval train rank --config FILE`"),
    ConfigFile("Building role cards", "esc_eval.sim.cardbuild.config:CardBuildConfig", "`esc-eval cards build FILE`"),
    ConfigFile("Role card", "esc_eval.sim.cards.card:RoleCard", "each card of a card file (`cards:` of a simulation, `esc-eval cards ...`)"),
    ConfigFile("Seeker-distress judge", "esc_eval.sim.jobs.distress:DistressConfig",
               "`esc-eval analysis fidelity --config FILE` (with `--judge`: docs/guides/seeker-fidelity.md)"),
    ConfigFile("Human-evaluation study", "esc_eval.analysis.annotation.study:StudyConfig",
               "`esc-eval annotate study` (its options) and the page's \"new study\"; stored with the study"),
]


def load(ref: str) -> type[BaseModel]:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def _args(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp)


def _origin(tp: Any) -> Any:
    return typing.get_origin(tp)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def models_in(tp: Any) -> list[type[BaseModel]]:
    """The pydantic models inside a field type (list[X], dict[str, X], X | None, Annotated[X, ...])."""
    if _is_model(tp):
        return [tp]
    found: list[type[BaseModel]] = []
    for arg in _args(tp):
        for m in models_in(arg):
            if m not in found:
                found.append(m)
    return found


def walk_models(roots: Iterable[type[BaseModel]]) -> list[type[BaseModel]]:
    """The roots and every model their fields use, each once, breadth first."""
    order: list[type[BaseModel]] = []
    queue = list(roots)
    while queue:
        m = queue.pop(0)
        if m in order:
            continue
        order.append(m)
        for field in m.model_fields.values():
            queue += [x for x in models_in(field.annotation) if x not in order]
    return order


def anchors(models: list[type[BaseModel]]) -> dict[type[BaseModel], str]:
    """Each model's section id: its name, or its module and name where two models share a name."""
    names = [m.__name__ for m in models]
    return {m: anchor(m.__name__ if names.count(m.__name__) == 1 else f"{m.__module__}.{m.__name__}")
            for m in models}


def type_text(tp: Any, linked: dict[type[BaseModel], str]) -> str:
    """A field type as Markdown, each documented model a link to its section."""
    if tp is type(None) or tp is None:
        return "null"
    if _is_model(tp):
        return f"[{tp.__name__}](#{linked[tp]})" if tp in linked else tp.__name__
    origin, args = _origin(tp), _args(tp)
    if origin is typing.Annotated:
        return type_text(args[0], linked)
    if origin is typing.Literal:
        return " \\| ".join(code(repr(a) if isinstance(a, str) else str(a)) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_text(a, linked) for a in args)
    if origin in (list, tuple, set, frozenset):
        inner = [a for a in args if a is not Ellipsis]
        return "list of " + (_grouped(inner[0], linked) if inner else "any")
    if origin is dict:
        key, value = args if args else (str, Any)
        return f"mapping of {_grouped(key, linked)} to {_grouped(value, linked)}"
    if tp is Any:
        return "any"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return " \\| ".join(code(repr(m.value)) for m in tp)
    names = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if tp in names:
        return names[tp]
    return escape(getattr(tp, "__name__", None) or str(tp).replace("typing.", ""))


def _grouped(tp: Any, linked: dict[type[BaseModel], str]) -> str:
    text = type_text(tp, linked)
    return f"({text})" if " \\| " in text else text


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):  # what the default sets, as a config file would
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return to_jsonable_python(value)


def default_text(field: Any) -> str:
    """The default as it would be written in YAML; `required` when there is none."""
    if field.is_required():
        return "required"
    value = field.default
    if value is PydanticUndefined and field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:  # a factory of the validated data: depends on other fields
            return "computed"
    if isinstance(value, BaseModel) and not value.model_dump(exclude_unset=True):
        return "its defaults"
    plain = _plain(value)
    text = yaml.safe_dump(plain, default_flow_style=True, allow_unicode=True, width=10_000).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    return code(text) if len(text) <= 120 else code(text[:117] + "...")


def bounds_text(field: Any) -> str:
    marks = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "length ≥", "max_length": "length ≤"}
    out = []
    for meta in field.metadata:
        for attr, mark in marks.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{mark} {value}")
    return ", ".join(out)


def _doc(model: type[BaseModel]) -> str:
    doc = model.__dict__.get("__doc__")
    return inspect.cleandoc(doc) if doc else ""


def render_model(model: type[BaseModel], linked: dict[type[BaseModel], str], level: int = 3) -> list[str]:
    lines = [f"{'#' * level} {model.__name__} {{ #{linked[model]} }}", "",
             f"`{model.__module__}.{model.__qualname__}`", ""]
    doc = _doc(model)
    if doc:
        lines += [escape(doc), ""]
    if model.model_config.get("extra") != "forbid":
        lines += [f"Unknown fields are {'kept' if model.model_config.get('extra') == 'allow' else 'ignored'}.", ""]
    lines += ["| Field | Type | Default | Description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        key = field.alias or name
        bounds = bounds_text(field)
        typ = type_text(field.annotation, linked) + (f" ({bounds})" if bounds else "")
        lines.append(f"| {code(key)} | {typ} | {default_text(field)} | {cell(field.description or '')} |")
    return lines + [""]


def render_config(files: list[ConfigFile] | None = None) -> str:
    """Every config file's model and every model it uses, as Markdown."""
    files = CONFIG_FILES if files is None else files
    roots = [load(f.model) for f in files]
    models = walk_models(roots)
    linked = anchors(models)
    lines = ["## Files and the models that read them", "",
             "| File | Model | Read by |", "|---|---|---|"]
    for f, m in zip(files, roots):
        lines.append(f"| {f.title} | [{m.__name__}](#{linked[m]}) | {f.read_by} |")
    lines += ["", "## Config files", ""]
    for m in roots:
        lines += render_model(m, linked)
    parts = [m for m in models if m not in roots]
    if parts:
        lines += ["## The models they use", "",
                  "Found by walking the fields of the files' models, each listed once.", ""]
        for m in parts:
            lines += render_model(m, linked)
    return "\n".join(lines)
