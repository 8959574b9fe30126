"""tests/ mirrors the packages (docs/reference/layout.md), both ways: the tests of a package's room
`<pkg>/<room>/` sit in `tests/<pkg>/<room>/`, none flat at `tests/<pkg>/` where the package has
rooms and no module of its own (train/'s config.py, errors.py and adapter_registry.py are tested
flat in tests/train/); shared helpers and data may stay at `tests/<pkg>/`; and every folder of code
(a room, or cluster/local's scripts) has its test folder holding tests. No folder, of the packages or
of tests/, holds more than 12 modules: a room that grows past that holds more than one concept.
The rooms are read from the tree (every folder with a `.py` file), so a package split into rooms
later is held to the same rule."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _rooms(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()]


def layout_problems(repo: Path) -> list[str]:
    """Every way `repo`'s tests/ fails to mirror its packages, one line each."""
    tests = repo / "tests"
    problems: list[str] = []
    files = [p for p in tests.rglob("*.py") if "__pycache__" not in p.parts]
    for name, n in Counter(p.name for p in files if p.name != "conftest.py").items():
        if n > 1:  # no __init__.py in tests: pytest imports each file by its basename
            problems.append(f"{name} is in tests/ {n} times (module basenames must be unique)")
    for p in files:
        rel = p.relative_to(tests)
        if p.name == "__init__.py":
            problems.append(f"tests/{rel}: tests/ has no packages (pytest imports test files by basename)")
            continue
        if len(rel.parts) == 1:  # tests/test_*.py: the suite's own plugins (time_budget, slow_apart)
            continue
        top = repo / rel.parts[0]
        if not top.is_dir():
            problems.append(f"tests/{rel}: tests/{rel.parts[0]}/ mirrors no folder of the repository")
            continue
        if not (top / "__init__.py").is_file():  # tests/docs: the site, not a package
            continue
        if len(rel.parts) == 2:
            rooms = _rooms(top)
            own = [m for m in top.glob("*.py") if m.name != "__init__.py"]  # modules at the package's top
            if rel.name.startswith("test_") and rooms and not own:
                problems.append(f"tests/{rel}: flat, but {rel.parts[0]}/ has rooms "
                                f"({', '.join(sorted(r.name for r in rooms))}): it belongs in tests/{rel.parts[0]}/<room>/")
            continue
        mirrored = repo.joinpath(*rel.parts[:-1])
        if not (mirrored / "__init__.py").is_file() and not any(mirrored.glob("*.py")):  # cluster/local: scripts, no package
            problems.append(f"tests/{rel}: {mirrored.relative_to(repo)}/ is not a package folder (no __init__.py)")
    return sorted(problems)


PACKAGES = ("cli", "cluster", "serve", "sim", "train", "analysis")
MAX_MODULES = 12


def code_folders(repo: Path) -> list[Path]:
    """Every folder of the packages that holds Python code (a room, a package's top, cluster/local)."""
    return sorted({p.parent for top in PACKAGES if (repo / top).is_dir() for p in (repo / top).rglob("*.py")
                   if "__pycache__" not in p.parts})


def unmirrored(repo: Path) -> list[str]:
    """Folders of code with no test folder holding a test (at any depth below it), one line each."""
    out = []
    for folder in code_folders(repo):
        rel = folder.relative_to(repo)
        tests = repo / "tests" / rel
        if not any(tests.rglob("test_*.py")) if tests.is_dir() else True:
            out.append(f"{rel}/ has no tests: tests/{rel}/ holds no test_*.py")
    return out


def crowded(repo: Path) -> list[str]:
    """Folders (of the packages and of tests/) with more than MAX_MODULES modules (`__init__.py` not counted)."""
    folders = code_folders(repo) + sorted({p.parent for p in (repo / "tests").rglob("*.py") if "__pycache__" not in p.parts})
    out = []
    for folder in folders:
        n = sum(1 for m in folder.glob("*.py") if m.name != "__init__.py")
        if n > MAX_MODULES:
            out.append(f"{folder.relative_to(repo)}/ holds {n} modules (at most {MAX_MODULES}: split it into rooms)")
    return out


def test_tests_mirror_the_packages():
    assert layout_problems(REPO) == []


def test_every_folder_of_code_has_its_tests():
    assert unmirrored(REPO) == []


def test_no_folder_holds_more_than_twelve_modules():
    assert crowded(REPO) == []


def test_a_room_without_tests_and_a_crowded_folder_are_named(tmp_path):
    _tree(tmp_path, "serve/__init__.py", "serve/plan/__init__.py", "serve/plan/planner.py", "cluster/local/uv_flags.py",
          "tests/serve/plan/test_plan.py", "tests/cluster/local/test_uv.py")
    assert unmirrored(tmp_path) == [] and crowded(tmp_path) == []
    _tree(tmp_path, "serve/config/__init__.py", "serve/config/base.py", "tests/serve/config/helpers.py",
          *[f"serve/plan/m{i}.py" for i in range(12)])
    assert unmirrored(tmp_path) == ["serve/config/ has no tests: tests/serve/config/ holds no test_*.py"]
    assert crowded(tmp_path) == ["serve/plan/ holds 13 modules (at most 12: split it into rooms)"]
    _tree(tmp_path, *[f"tests/serve/plan/test_m{i}.py" for i in range(12)])
    assert crowded(tmp_path)[-1] == "tests/serve/plan/ holds 13 modules (at most 12: split it into rooms)"


def test_every_room_of_serve_analysis_and_sim_holds_its_tests_in_its_folder():
    """The split packages have no flat test file left, and each test folder under them is a room."""
    for pkg in ("serve", "analysis", "sim"):
        rooms = {r.name for r in _rooms(REPO / pkg)}
        assert rooms, pkg
        assert not list((REPO / "tests" / pkg).glob("test_*.py")), pkg
        folders = {p.parent.name for p in (REPO / "tests" / pkg).glob("*/test_*.py")}
        assert folders and folders <= rooms, (pkg, folders - rooms)


def _tree(root: Path, *paths: str) -> None:
    for rel in paths:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("")


def test_a_misplaced_test_file_is_named(tmp_path):
    _tree(tmp_path, "serve/__init__.py", "serve/plan/__init__.py", "train/__init__.py", "docs/index.md",
          "tests/conftest.py", "tests/test_time_budget.py", "tests/docs/test_docs_site.py",
          "tests/serve/conftest.py", "tests/serve/api_standins.py", "tests/serve/fixtures/bench.json",
          "tests/serve/plan/test_plan.py", "tests/train/test_config.py")
    assert layout_problems(tmp_path) == []  # helpers and data at package level; train has no rooms: flat is fine
    _tree(tmp_path, "train/data/__init__.py", "train/config.py")
    assert layout_problems(tmp_path) == []  # rooms, and a module of its own: its tests may be flat
    _tree(tmp_path, "tests/serve/test_retry.py",  # flat in a package with rooms
          "tests/serve/calls/test_deadlines.py",  # a room the package does not have
          "tests/serve/fixtures/test_data.py",  # a data folder is no room either
          "tests/web/test_viewer.py",  # no such folder
          "tests/train/plan/test_plan.py",  # no such room, and a second test_plan.py
          "tests/serve/plan/__init__.py")
    problems = layout_problems(tmp_path)
    assert problems == sorted([
        "test_plan.py is in tests/ 2 times (module basenames must be unique)",
        "tests/serve/calls/test_deadlines.py: serve/calls/ is not a package folder (no __init__.py)",
        "tests/serve/fixtures/test_data.py: serve/fixtures/ is not a package folder (no __init__.py)",
        "tests/serve/plan/__init__.py: tests/ has no packages (pytest imports test files by basename)",
        "tests/serve/test_retry.py: flat, but serve/ has rooms (plan): it belongs in tests/serve/<room>/",
        "tests/train/plan/test_plan.py: train/plan/ is not a package folder (no __init__.py)",
        "tests/web/test_viewer.py: tests/web/ mirrors no folder of the repository",
    ]), problems
