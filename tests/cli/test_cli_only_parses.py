"""The CLI only parses and calls (the house rule; issue 52): every function of a module under cli/ is a
declaration of options and ONE call into the library, as vLLM's `cmd(args): main(args)`, with a
small allowance read from its syntax tree:

- imports and the docstring are free;
- door checks are free: `if <bad option>: raise ...` (an `if` whose whole body is one `raise`, no
  `else`), and `try: <one statement> except ...: raise ...` (a library error turned into a one-line
  `typer.BadParameter`);
- what is left is at most MAX_STATEMENTS simple statements (the call, showing its result, the exit
  status), with no branch, loop, `with`, `try`, nested function, lambda, comprehension or
  conditional expression in them;
- at most one of the calls in them goes into the library: a name imported from `esc_eval.*` outside
  `esc_eval.cli` (the CLI's own helpers, emit and exit_for_outcome, and typer/builtins do not count).

The CLI's own plumbing, which is no command's logic, is named in PLUMBING with why; a name there that
no longer exists fails too, so the list cannot outlive what it excuses."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLI = REPO / "cli"
MAX_STATEMENTS = 3

PLUMBING = {
    ("app.py", "_main"): "the root's --debug/--verbose flags and the engines' quiet default, before any command",
    ("app.py", "_unwrap"): "a Ray-wrapped error shown as its cause, by the root's error handler",
    ("app.py", "main"): "the root's error handler: one `error:` line and the exit code for every command",
    ("common.py", "emit"): "the result's JSON on stdout (and in -o's file where a benchmark has one)",
    ("common.py", "exit_for"): "the exit status and its lines, from the verdict a command's call returned",
    ("common.py", "renamed"): "an old command name kept for one release: a note on stderr, then the command",
}

SIMPLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Raise, ast.Pass)
LOGIC = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
         ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
         ast.IfExp, ast.Match)


def _library_names(tree: ast.AST) -> set[str]:
    """Names bound by an import from esc_eval outside esc_eval.cli, anywhere in the module."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("esc_eval.") \
                and not node.module.startswith("esc_eval.cli"):
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names
                      if a.name.startswith("esc_eval.") and not a.name.startswith("esc_eval.cli")}
    return names


def _root(func: ast.expr) -> str | None:
    while isinstance(func, (ast.Attribute, ast.Call, ast.Subscript)):
        func = func.value if not isinstance(func, ast.Call) else func.func
    return func.id if isinstance(func, ast.Name) else None


def _is_door_check(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.If):
        return not stmt.orelse and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Raise)
    if isinstance(stmt, ast.Try):
        return (len(stmt.body) == 1 and isinstance(stmt.body[0], SIMPLE) and not stmt.orelse and not stmt.finalbody
                and all(len(h.body) == 1 and isinstance(h.body[0], ast.Raise) for h in stmt.handlers))
    return False


def _is_main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__": main()` (cli/__main__.py)."""
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__" and len(node.body) == 1 and not node.orelse)


def function_problems(func: ast.FunctionDef | ast.AsyncFunctionDef, library: set[str]) -> list[str]:
    """Why `func` is more than options and one call (none: it is not)."""
    body = list(func.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring
    body = [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom)) and not _is_door_check(s)]
    problems = []
    if len(body) > MAX_STATEMENTS:
        problems.append(f"{len(body)} statements besides imports and door checks (at most {MAX_STATEMENTS})")
    for stmt in body:
        if not isinstance(stmt, SIMPLE):
            problems.append(f"line {stmt.lineno}: a {type(stmt).__name__} statement")
            continue
        for node in ast.walk(stmt):
            if isinstance(node, LOGIC):
                problems.append(f"line {node.lineno}: a {type(node).__name__}")
    calls = [n for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Call) and _root(n.func) in library]
    if len(calls) > 1:
        problems.append(f"{len(calls)} calls into the library (lines {', '.join(str(c.lineno) for c in calls)}): "
                        "at most one")
    return problems


def module_problems(path: Path) -> list[str]:
    """Every function of the module at `path` that holds logic, and any logic at its top level."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    library = _library_names(tree)
    rel = str(path.relative_to(CLI))
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if (rel, node.name) in PLUMBING:
                continue
            out += [f"cli/{rel} {node.name}(): {p}" for p in function_problems(node, library)]
        elif isinstance(node, ast.ClassDef):
            out.append(f"cli/{rel} line {node.lineno}: class {node.name} (a class is the library's)")
        elif _is_main_guard(node):
            continue
        elif not isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.Expr)):
            out.append(f"cli/{rel} line {node.lineno}: a {type(node).__name__} at the top level")
        elif isinstance(node, (ast.Assign, ast.Expr)) and any(isinstance(n, LOGIC) for n in ast.walk(node)):
            out.append(f"cli/{rel} line {node.lineno}: logic at the top level")
    return out


def test_every_cli_function_is_options_and_one_call():
    modules = sorted(CLI.rglob("*.py"))
    assert len(modules) > 20
    problems = [p for m in modules for p in module_problems(m)]
    assert not problems, "the CLI only parses and calls; move this into the library:\n" + "\n".join(problems)


def test_the_plumbing_it_excuses_still_exists():
    for rel, name in PLUMBING:
        tree = ast.parse((CLI / rel).read_text(encoding="utf-8"))
        assert any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body), f"cli/{rel} {name}(): gone"


def _problems_of(source: str) -> list[str]:
    tree = ast.parse(source)
    return [p for f in tree.body if isinstance(f, ast.FunctionDef) for p in function_problems(f, _library_names(tree))]


def test_a_command_with_logic_fails_and_one_with_door_checks_passes():
    thin = '''
from esc_eval.analysis.report.leaderboard_command import leaderboard_of_runs
from esc_eval.cli.common import emit
def leaderboard(run_dirs, by=None, humans=None):
    """Table 2."""
    import typer
    if by and humans:
        raise typer.BadParameter("--by does not take --humans")
    emit(leaderboard_of_runs(run_dirs, by=by, humans=humans))
'''
    assert _problems_of(thin) == []
    branchy = thin.replace("    emit(leaderboard_of_runs(run_dirs, by=by, humans=humans))",
                           "    if by:\n        emit(leaderboard_of_runs(run_dirs, by=by))\n"
                           "    else:\n        emit(leaderboard_of_runs(run_dirs, humans=humans))")
    assert any("If statement" in p for p in _problems_of(branchy))
    two_calls = thin.replace("emit(leaderboard_of_runs(run_dirs, by=by, humans=humans))",
                             "emit(leaderboard_of_runs(leaderboard_of_runs(run_dirs), by=by))")
    assert any("2 calls into the library" in p for p in _problems_of(two_calls))
    closure = thin.replace('    """Table 2."""', '    """Table 2."""\n    def rate(x):\n        return x')
    assert any("FunctionDef" in p for p in _problems_of(closure))
    long = thin.replace('    """Table 2."""', '    """Table 2."""\n    a = 1\n    b = 2\n    c = 3')
    assert any("4 statements" in p for p in _problems_of(long))
