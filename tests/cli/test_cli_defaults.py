"""One home per default (issue 52): a command's option never re-types a default the library owns. Read
from the syntax tree of every command under cli/: for each call into the library (a name imported from
`esc_eval.*` outside `esc_eval.cli`), the call's arguments are bound to the library function's
signature (read from its source, defaults that name a module constant followed to its value; nothing
is imported); an option passed to a parameter whose default equals the option's own literal default (a
str, int or float written in the CLI) fails: the option must name the library's constant instead
(`port: ... = SERVE_PORT`), so changing the default in the library changes the command's too.

What it cannot see: a parameter the library takes through **options (bench gpu / bench serve build
pydantic configs from them; their options name the configs' constants all the same) and a library
default that differs from the option's (a deliberate difference, not a copy).

EXCUSED names the options that still re-type a library default, with why; an entry that no longer
re-types one fails too, so the list cannot outlive what it excuses."""
from __future__ import annotations

import ast
import inspect
from functools import cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "cli"

# analysis/ owns these defaults and has no light module to take them from: importing any of analysis
# loads scipy and adds about 0.9 s to every `esc-eval` start (0.8 -> 1.7 s user on the 2-core machine),
# and analysis/ is another room's work (issue 52). Each needs a constant there that the CLI can import
# without the package's statistics.
_ANALYSIS = "analysis/ owns the default; no light module of analysis to import it from (scipy at CLI start)"
_SIM = "sim/jobs and sim/launch are other rooms' work in issue 52: their constant (DEMO_OUT, EVERY) comes with it"
EXCUSED_OPTIONS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("jobs/demo.py", "demo"): (("out",), _SIM),
    ("jobs/score.py", "score"): (("every",), _SIM),
    ("ops/bench.py", "bench_view"): (("dialogues", "models", "part_rows"), _ANALYSIS),
    ("ops/bench.py", "bench_annotate"): (("models", "annotate"), _ANALYSIS),
    ("ops/bench.py", "bench_trust_cmd"): (("models", "human"), _ANALYSIS),
    ("ops/bench.py", "bench_validity_cmd"): (("seeds", "n_boot"), _ANALYSIS),
    ("results/analysis.py", "compare_models"): (("dimension", "method", "n_resamples", "seed", "windowed"), _ANALYSIS),
    ("results/analysis.py", "judge_accuracy"): (("windowed",), _ANALYSIS),
    ("results/analysis.py", "seeker_check_cmd"): (("n_boot", "seed"), _ANALYSIS),
    ("results/analysis.py", "correlate_cmd"): (("level", "pairing", "n_boot", "seed", "windowed"), _ANALYSIS),
    ("results/analysis.py", "roleplay_export"): (("seed",), _ANALYSIS),
    ("results/analysis.py", "calibration_cmd"): (("method", "folds", "n_boot", "seed", "windowed"), _ANALYSIS),
    ("results/analysis.py", "rounds_cmd"): (("n_boot", "seed", "windowed"), _ANALYSIS),
    ("results/annotate.py", "serve"): (("host", "port"), _ANALYSIS),
    ("results/annotate.py", "study"): (("overlap", "strata", "seed"), _ANALYSIS),
    ("results/annotate.py", "export"): (("fmt",), _ANALYSIS),
    ("results/annotate.py", "sheets"): (("annotators", "seed"), _ANALYSIS),
    ("results/judge_bias.py", "length_bias"): (("n_boot", "seed", "windowed"), _ANALYSIS),
    ("results/pairwise_ratings.py", "pairwise"): (("n_boot", "seed"), _ANALYSIS),
    ("results/panels.py", "panel"): (("n_boot", "alpha_boot", "seed", "windowed"), _ANALYSIS),
    ("results/report.py", "leaderboard"): (("n_boot", "seed", "scores", "windowed"), _ANALYSIS),
    ("results/report.py", "report"): (("n_boot", "seed", "samples", "scores", "windowed", "embed_max"), _ANALYSIS),
    ("results/safety.py", "safety"): (("n_boot", "seed", "windowed"), _ANALYSIS),
    ("results/safety.py", "seekers"): (("dimension", "by", "n_boot", "seed", "windowed"), _ANALYSIS),
    ("results/view.py", "view"): (("host", "port"), _ANALYSIS),
}
EXCUSED = {(where, fn, option) for (where, fn), (options, _why) in EXCUSED_OPTIONS.items() for option in options}


def _literal(node: ast.expr | None) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float))
            and not isinstance(node.value, bool))


def _library_imports(nodes: list[ast.stmt] | ast.AST) -> dict[str, tuple[str, str]]:
    """Names bound by `from esc_eval.X import f [as g]` outside esc_eval.cli -> (module, attribute)."""
    out = {}
    for node in (ast.walk(nodes) if isinstance(nodes, ast.AST) else nodes):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("esc_eval.") \
                and not node.module.startswith("esc_eval.cli"):
            out |= {a.asname or a.name: (node.module, a.name) for a in node.names}
    return out


_UNKNOWN = object()  # a library default that is no literal and no module constant (a call, an expression)


@cache
def _module_tree(module: str) -> ast.Module | None:
    """The syntax tree of esc_eval.<module>, read from the checkout (nothing imported: analysis alone
    would load scipy, seconds of this test)."""
    base = REPO.joinpath(*module.split(".")[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return ast.parse(path.read_text(encoding="utf-8"))
    return None


def _definition(module: str, name: str, depth: int = 0) -> tuple[str, ast.AST] | None:
    """Where `name` of `module` is defined (following `from esc_eval.X import name` re-exports)."""
    tree = _module_tree(module)
    if tree is None or depth > 5:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return module, node
        if isinstance(node, ast.Assign) and any(isinstance(x, ast.Name) and x.id == name for x in node.targets):
            return module, node.value
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name and node.value:
            return module, node.value
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("esc_eval."):
            for a in node.names:
                if (a.asname or a.name) == name:
                    return _definition(node.module, a.name, depth + 1)
    return None


def _value(module: str, node: ast.expr) -> Any:
    """A default's value: a literal, or a module constant (UPPER = literal) followed to its home."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        found = _definition(module, node.id)
        if found and isinstance(found[1], ast.expr):
            return _value(*found)
    return _UNKNOWN


def _signature(module: str, name: str) -> inspect.Signature | None:
    """The signature of library function `name` as its source declares it, defaults resolved by _value."""
    found = _definition(module, name)
    if not found or not isinstance(found[1], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    home, func = found
    a = func.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + a.defaults
    P = inspect.Parameter
    params = [P(x.arg, P.POSITIONAL_ONLY if i < len(a.posonlyargs) else P.POSITIONAL_OR_KEYWORD,
                default=P.empty if d is None else _value(home, d)) for i, (x, d) in enumerate(zip(positional, defaults))]
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    params += [P(x.arg, P.KEYWORD_ONLY, default=P.empty if d is None else _value(home, d))
               for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def _option_of(arg: ast.expr, options: set[str]) -> str | None:
    """The option an argument passes on: `opt`, or `check(opt)` (a door check around it)."""
    if isinstance(arg, ast.Call) and len(arg.args) == 1 and not arg.keywords:
        arg = arg.args[0]
    return arg.id if isinstance(arg, ast.Name) and arg.id in options else None


def retyped_defaults(source: str, where: str = "<cli>") -> list[tuple[str, str, str]]:
    """(where, command function, option) for each option of a command in `source` whose literal default
    re-types the default of the library parameter it is passed to."""
    tree = ast.parse(source)
    module_imports = _library_imports([n for n in tree.body if isinstance(n, ast.ImportFrom)])
    found = []
    for func in tree.body:
        if not isinstance(func, ast.FunctionDef):
            continue
        args = func.args.args + func.args.kwonlyargs
        defaults = [None] * (len(func.args.args) - len(func.args.defaults)) + func.args.defaults + func.args.kw_defaults
        literal = {a.arg: d.value for a, d in zip(args, defaults) if _literal(d)}
        imports = module_imports | _library_imports(func)
        for call in ast.walk(func):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in imports) \
                    or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
                continue
            sig = _signature(*imports[call.func.id])
            if sig is None:
                continue
            try:
                bound = sig.bind_partial(*[_option_of(a, set(literal)) for a in call.args],
                                         **{k.arg: _option_of(k.value, set(literal)) for k in call.keywords})
            except (TypeError, ValueError):
                continue
            for param, option in bound.arguments.items():
                p = sig.parameters[param]
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or option is None:
                    continue
                if p.default is not p.empty and type(p.default) is type(literal[option]) and p.default == literal[option]:
                    found.append((where, func.name, option))
    return found


def test_no_command_retypes_a_library_default():
    found = []
    for path in sorted(CLI.rglob("*.py")):
        found += retyped_defaults(path.read_text(encoding="utf-8"), str(path.relative_to(CLI)))
    bad = [f"cli/{w}: {fn}(): option {opt!r} re-types the library's default; import its constant"
           for w, fn, opt in found if (w, fn, opt) not in EXCUSED]
    stale = [f"EXCUSED {key} no longer re-types a library default: drop it" for key in EXCUSED if key not in found]
    assert not bad and not stale, "\n".join(bad + stale)


COMMAND = '''
import typer
from esc_eval.serve.app.application import SERVE_PORT

def up(port: int = typer.Option(PORT_DEFAULT), host: str = "0.0.0.0", replicas: int = 3):
    from esc_eval.serve.app.commands import serve_up
    return serve_up(None, None, replicas, None, None, host, port=port)
'''


def test_the_check_fails_on_a_retyped_literal_and_passes_the_constant():
    """A tiny command: `port = 8000` re-types serve_up's default and is caught; SERVE_PORT is not; a
    default that differs from the library's (host, replicas) is the command's own choice."""
    assert retyped_defaults(COMMAND.replace("typer.Option(PORT_DEFAULT)", "8000")) == [("<cli>", "up", "port")]
    assert retyped_defaults(COMMAND.replace("typer.Option(PORT_DEFAULT)", "SERVE_PORT")) == []
    # Annotated options (the house style) keep the default after `=` too
    annotated = COMMAND.replace("port: int = typer.Option(PORT_DEFAULT)", "port: 'Annotated[int, typer.Option()]' = 8000")
    assert retyped_defaults(annotated) == [("<cli>", "up", "port")]
