"""tests/ mirrors the packages (docs/reference/layout.md): the tests of a package's room
`<pkg>/<room>/` sit in `tests/<pkg>/<room>/`, none flat at `tests/<pkg>/` where the package has
rooms and no module of its own (train/'s config.py, errors.py and adapter_registry.py are tested
flat in tests/train/); shared helpers and data may stay at `tests/<pkg>/`. The rooms are read from the tree (every
folder with an `__init__.py`), so a package split into rooms later is held to the same rule."""
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
        if not (mirrored / "__init__.py").is_file():
            problems.append(f"tests/{rel}: {mirrored.relative_to(repo)}/ is not a package folder (no __init__.py)")
    return sorted(problems)


def test_tests_mirror_the_packages():
    assert layout_problems(REPO) == []


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
