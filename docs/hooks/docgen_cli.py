"""The command-line reference, generated from the typer app: every command and group, its help,
its usage, and every argument and option with its type, default and help, as `--help` shows them.

Works on any typer app or click-style command (typer vendors its own click, so the objects are
read by their attributes, not by their classes)."""
from __future__ import annotations

import enum
import inspect
from typing import Any, Iterator

from docgen_text import anchor, cell, code, escape


def command_of(app: Any) -> Any:
    """The click-style command of a typer app (the command itself when given one)."""
    if hasattr(app, "registered_commands") or hasattr(app, "registered_groups"):
        import typer.main

        return typer.main.get_command(app)
    return app


def _context(cmd: Any, name: str, parent: Any = None) -> Any:
    return cmd.context_class(cmd, info_name=name, parent=parent)


def _is_group(cmd: Any) -> bool:
    return hasattr(cmd, "list_commands") and hasattr(cmd, "get_command")


def walk(cmd: Any, prog: str) -> Iterator[tuple[str, Any, Any]]:
    """(full name, command, context) for the root and every command under it, depth first, in the
    order `--help` lists them; hidden commands are left out as `--help` leaves them out."""
    def visit(c: Any, name: str, path: str, parent: Any) -> Iterator[tuple[str, Any, Any]]:
        ctx = _context(c, name, parent)
        yield path, c, ctx
        if _is_group(c):
            for sub in c.list_commands(ctx):
                child = c.get_command(ctx, sub)
                if child is None or getattr(child, "hidden", False):
                    continue
                yield from visit(child, sub, f"{path} {sub}", ctx)

    yield from visit(cmd, prog, prog, None)


def command_names(app: Any, prog: str = "esc-eval") -> list[str]:
    """Every command's full name under `prog` ("esc-eval bench serve"), groups included."""
    return [path for path, _, _ in walk(command_of(app), prog)][1:]


def _help(cmd: Any) -> str:
    text = inspect.cleandoc(getattr(cmd, "help", None) or getattr(cmd, "short_help", None) or "")
    # click's `\b` marks a paragraph not to rewrap; Markdown has no such thing
    return "\n".join(line for line in text.splitlines() if line.strip() != "\b")


def _is_argument(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "argument" or type(param).__name__.endswith("Argument")


def _type(param: Any, ctx: Any) -> str:
    try:
        shown = param.display_type(ctx) if callable(getattr(param, "display_type", None)) else ""
    except TypeError:
        shown = ""
    if not shown:
        shown = getattr(getattr(param, "type", None), "name", "") or ""
    shown = str(shown).strip("<>").replace(" range", "")
    if shown.startswith("list[") and shown.endswith("]"):
        shown = shown[5:-1]
    if getattr(param, "is_flag", False) and not getattr(param, "secondary_opts", None):
        return "flag"
    shown = _WORDS.get(shown, shown)
    bounds = []
    lo, hi = getattr(param, "min", None), getattr(param, "max", None)
    if lo is not None:
        bounds.append(f"≥ {lo}")
    if hi is not None:
        bounds.append(f"≤ {hi}")
    if getattr(param, "multiple", False) or (_is_argument(param) and getattr(param, "nargs", 1) == -1):
        shown += ", repeatable" if not _is_argument(param) else ", one or more"
    return shown + (f" ({', '.join(bounds)})" if bounds else "")


_WORDS = {"str": "text", "int": "integer", "float": "number", "bool": "boolean"}


def _value(value: Any) -> str:
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, (list, tuple)):
        return ", ".join(_value(v) for v in value)
    return str(value)


def _default(param: Any) -> str:
    if getattr(param, "required", False):
        return "required"
    value = getattr(param, "default", None)
    if callable(value) and not isinstance(value, type):
        return "computed"
    secondary = getattr(param, "secondary_opts", None)
    if secondary and isinstance(value, bool):
        return code(param.opts[0] if value else secondary[0])
    if getattr(param, "is_flag", False) and isinstance(value, bool):
        return "on" if value else "off"
    if value is None or value == () or value == []:
        return ""
    return code(_value(value))


def _names(param: Any) -> str:
    if _is_argument(param):
        return code(param.name.upper())
    opts = sorted(param.opts, key=lambda o: (not o.startswith("--"), o))
    names = ", ".join(code(o) for o in opts)
    if getattr(param, "secondary_opts", None):
        names += " / " + ", ".join(code(o) for o in param.secondary_opts)
    return names


def _usage(path: str, cmd: Any) -> str:
    pieces = [path]
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    if any(not _is_argument(p) for p in params):
        pieces.append("[OPTIONS]")
    for p in params:
        if _is_argument(p):
            arg = p.name.upper() + ("..." if getattr(p, "nargs", 1) == -1 else "")
            pieces.append(arg if getattr(p, "required", False) else f"[{arg}]")
    if _is_group(cmd):
        pieces.append("COMMAND [ARGS]...")
    return " ".join(pieces)


def _params_table(cmd: Any, ctx: Any) -> list[str]:
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    if not params:
        return []
    rows = ["| Argument or option | Type | Default | Description |", "|---|---|---|---|"]
    for p in params:
        rows.append(f"| {_names(p)} | {cell(_type(p, ctx))} | {_default(p)} | {cell(getattr(p, 'help', None) or '')} |")
    return rows + [""]


def render_cli(app: Any, prog: str = "esc-eval") -> str:
    """The reference of every command of `app` as Markdown: one section per command, headed by its
    full name (id: the name after `prog`, words joined by '-'), groups before their commands."""
    root = command_of(app)
    lines: list[str] = []
    for path, cmd, ctx in walk(root, prog):
        depth = path.count(" ")
        sub = path[len(prog):].strip()
        if depth == 0:
            lines += [f"## {prog} {{ #{anchor(prog)} }}", ""]
        else:
            lines += [f"{'#' * min(depth + 1, 6)} {prog} {sub} {{ #{anchor(sub)} }}", ""]
        help_text = _help(cmd)
        if help_text:
            lines += [escape(help_text), ""]
        lines += ["```text", _usage(path, cmd), "```", ""]
        lines += _params_table(cmd, ctx)
        if _is_group(cmd):
            subs = [c for c in cmd.list_commands(ctx) if (x := cmd.get_command(ctx, c)) is not None
                    and not getattr(x, "hidden", False)]
            short = {c: _help(cmd.get_command(ctx, c)).split("\n\n")[0] for c in subs}
            lines += ["| Command | What it does |", "|---|---|"]
            lines += [f"| [{prog if depth == 0 else prog + ' ' + sub} {c}](#{anchor((sub + ' ' + c).strip())}) | "
                      f"{cell(short[c])} |" for c in subs]
            lines.append("")
    return "\n".join(lines)
