"""The package layout: one import namespace, a statically composed CLI, the layer contracts, no import cycle."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import grimp
import typer.main

REPO = Path(__file__).resolve().parents[2]


def test_one_import_namespace_from_any_folder(tmp_path):
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    code = ("import importlib\n"
            f"for m in {packages!r}:\n"
            "    importlib.import_module(m)\n"
            "for bare in ('serve', 'sim', 'train', 'analysis', 'cluster', 'cli'):\n"
            "    try:\n"
            "        importlib.import_module(bare)\n"
            "    except ImportError:\n"
            "        continue\n"
            "    raise SystemExit(f'a generic top-level module {bare!r} is importable')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_every_python_folder_is_a_mapped_package():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {str(p.parent.relative_to(REPO)) for p in REPO.glob("*/**/__init__.py")
               if not any(part.startswith(".") or part == "tests" for part in p.relative_to(REPO).parts)}
    folders |= {p.parent.name for p in REPO.glob("*/__init__.py")}
    mapped = set(cfg["package-dir"].values())
    assert folders == mapped, f"unmapped: {folders - mapped}; stale: {mapped - folders}"
    assert set(cfg["packages"]) == set(cfg["package-dir"])


def test_every_room_is_a_layer_of_its_package():
    """A package with rooms (sub-packages) says in a layers contract how they stand to each other: a
    new room left out of it would be free to import anything of its siblings."""
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    packages = set(cfg["tool"]["setuptools"]["packages"])
    layered: dict[str, set[str]] = {}
    for contract in cfg["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "layers":
            for container in contract["containers"]:
                layered.setdefault(container, set()).update(
                    name.strip() for layer in contract["layers"] for name in layer.split("|"))
    for package in sorted(packages):
        rooms = {p.rsplit(".", 1)[1] for p in packages if p.rsplit(".", 1)[0] == package}
        if rooms:
            assert package in layered, f"{package} has rooms {sorted(rooms)} but no layers contract"
            assert rooms <= layered[package], f"{package}'s layers contract leaves out {sorted(rooms - layered[package])}"


def test_the_tests_mirror_the_packages():
    """tests/<folder> holds the tests of the package in <folder> (tests/docs: the docs hooks), and no two
    test modules share a name (the suite imports them by base name: no __init__.py under tests/)."""
    folders = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"].values())
    modules = list((REPO / "tests").glob("**/test_*.py"))
    test_folders = {str(p.parent.relative_to(REPO / "tests")) for p in modules} - {".", "docs"}
    folders |= {f for f in test_folders if any((REPO / f).glob("*.py"))}  # cluster/local: scripts, not a package
    assert test_folders <= folders, f"test folders with no package: {sorted(test_folders - folders)}"
    names = [p.name for p in modules]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def _commands(group, prefix: str = "") -> list[str]:
    ctx = type(group).context_class(group) if hasattr(group, "context_class") else click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        out.append(prefix + name)
        cmd = group.get_command(ctx, name)
        if hasattr(cmd, "list_commands"):  # a group (typer vendors its own click)
            out += _commands(cmd, prefix + name + " ")
    return out


def test_cli_composes_every_group_statically_and_once():
    from esc_eval.cli.app import app

    names = _commands(typer.main.get_command(app))
    assert len(names) == len(set(names))
    expected = {"demo", "check", "simulate", "score", "report", "leaderboard", "cards validate", "cards build", "cards stats",
                "cards export", "serve up", "serve status", "serve down", "serve write-config", "train role",
                "train rank", "bench sim", "bench score", "bench serve", "analysis compare-models",
                "analysis judge-accuracy", "annotate sheets", "annotate agreement",
                "analysis roleplay-fidelity", "analysis calibration", "bench trust", "annotate serve", "annotate study", "annotate export", "annotate import", "docs"}
    assert expected <= set(names), expected - set(names)


def test_one_name_per_command_and_old_names_hidden():
    """A name means one thing: a last word shared by two visible commands is a `bench` command that
    measures its namesake, or a group's own `export`/`serve`. Renamed commands stay, hidden, for one release."""
    from esc_eval.cli.app import app

    root = typer.main.get_command(app)
    names = _commands(root)

    def command(path: str):
        cmd = root
        for part in path.split():
            cmd = cmd.get_command(click.Context(cmd), part)
        return cmd

    visible = [n for n in names if not command(n).hidden]
    by_last: dict[str, list[str]] = {}
    for n in visible:
        by_last.setdefault(n.split()[-1], []).append(n)
    for last, paths in by_last.items():
        others = [p for p in paths if not p.startswith("bench ")]
        assert len(others) <= 1 or last in ("export", "serve"), paths
    assert "compare" in visible and "analysis compare-models" in visible
    for old, new in (("analysis compare", "analysis compare-models"), ("analysis annotate-export", "annotate sheets"),
                     ("analysis annotate-agreement", "annotate agreement")):
        assert old in names and command(old).hidden and not command(new).hidden
        assert [p.name for p in command(old).params] == [p.name for p in command(new).params]


def test_serve_write_config_writes_a_serve_deploy_file(tmp_path):
    import yaml
    from typer.testing import CliRunner

    from esc_eval.cli.app import app

    out = tmp_path / "serve.yaml"
    res = CliRunner().invoke(app, ["serve", "write-config", "--model", "embedded", "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load(out.read_text())
    assert doc["applications"][0]["import_path"] == "ray.serve.llm:build_openai_app"


def test_layer_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout or "broken" not in proc.stdout.split("Contracts:")[-1].split("\n")[0]


ROOTS = ["esc_eval.cli", "esc_eval.cluster", "esc_eval.serve", "esc_eval.sim", "esc_eval.train", "esc_eval.analysis"]


def import_edges(graph) -> dict[str, set[str]]:
    """Module -> the modules it imports (at any depth of its code), plus the package itself for
    `from package import x`: that reads the package's namespace, so a module of the package doing it
    is in a cycle with the package's __init__ (which imports it)."""
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    for m, targets in edges.items():
        for d in list(targets):
            for detail in graph.get_import_details(importer=m, imported=d):
                found = re.match(r"\s*from\s+([\w.]+)\s+import\b", detail["line_contents"])
                if found and found.group(1) in edges and found.group(1) != d:
                    targets.add(found.group(1))
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_sees_a_package_and_its_module():
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "q"):
        g.add_module(m)
    g.add_import(importer="p", imported="p.a", line_number=1, line_contents="from p.a import x")
    g.add_import(importer="p.a", imported="p.b", line_number=1, line_contents="from p import b")
    g.add_import(importer="q", imported="p.a", line_number=1, line_contents="from p.a import x")
    assert cycles(import_edges(g)) == [["p", "p.a"]]


def test_no_import_cycle_anywhere():
    # annotation-only imports (under `if TYPE_CHECKING:`) count: a circle drawn for types is one in the design
    graph = grimp.build_graph(*ROOTS, cache_dir=None, exclude_type_checking_imports=False)
    found = cycles(import_edges(graph))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


MAX_MODULE_LINES = 400


def test_no_module_over_the_line_limit():
    """A module over 400 lines holds more than one concept: split it where the concepts part."""
    long = {str(p.relative_to(REPO)): n for p in REPO.glob("*/**/*.py")
            if not any(part.startswith(".") or part in ("tests", "build") for part in p.relative_to(REPO).parts)
            and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_every_package_init_says_what_it_holds_and_exports_its_names():
    import importlib

    for name in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]:
        module = importlib.import_module(name)
        assert (module.__doc__ or "").strip(), f"{name}/__init__.py has no docstring"
        exported = getattr(module, "__all__", None)
        assert exported is not None, f"{name} has no __all__"
        missing = [n for n in exported if not hasattr(module, n)]
        assert not missing, f"{name}.__all__ names what it does not hold: {missing}"
