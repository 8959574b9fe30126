"""tests/slow_apart.py in a pytest run of its own (xdist, two workers) over stand-in tests that note
where and in which order they ran."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = {
    "test_a.py": "import pytest\n@pytest.mark.slow\ndef test_slow_1(): note('slow_1')\ndef test_fast_a(): note('fast_a')\n",
    "test_b.py": "import pytest\npytestmark = pytest.mark.slow\ndef test_slow_2(): note('slow_2')\n"
                 "def test_slow_3(): note('slow_3')\n",
    "test_c.py": "def test_fast_c1(): note('fast_c1')\ndef test_fast_c2(): note('fast_c2')\n",
    "test_d.py": "import pytest\npytestmark = [pytest.mark.slow, pytest.mark.heavy]\ndef test_slow_h1(): note('slow_h1')\n"
                 "def test_slow_h2(): note('slow_h2')\n",
    "test_0.py": "import pytest\n@pytest.mark.slow\n@pytest.mark.beside\ndef test_beside_1(): note('beside_1')\n"
                 "@pytest.mark.slow\n@pytest.mark.beside\ndef test_beside_2(): note('beside_2')\n",
    "test_e.py": "import pytest\n@pytest.mark.slow\n@pytest.mark.beside\n@pytest.mark.light\n"
                 "def test_beside_light(): note('beside_light')\n",
}
CONFTEST = ("import os, time\nimport builtins\n"
            "def note(name):\n"
            "    with open(os.environ['NOTES'], 'a') as f:\n"
            "        f.write(f\"{name} {os.environ['PYTEST_XDIST_WORKER']} {os.environ['RAY_TMPDIR']}\\n\")\n"
            # a slow test longer than the fast ones, as in the suite: the slow worker then asks for more work
            # (xdist does so with two tests left) only after the other has taken the `beside` scope
            "    time.sleep(2.0 if name.startswith('slow_h') else 1.0 if name.startswith('slow') else 0.3)\n"
            "builtins.note = note\n")


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    for name, text in {**TESTS, "conftest.py": CONFTEST, "pytest.ini": "[pytest]\nmarkers =\n  slow: slow\n  beside: beside\n  heavy: heavy\n  light: light\n"}.items():
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "NOTES": str(tmp_path / "notes"),
           "ESC_EVAL_BESIDE_FREE_GIB": os.environ.get("ESC_EVAL_BESIDE_FREE_GIB", "0")}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "slow_apart", "-p", "no:cacheprovider", "-q", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_the_slow_tests_run_on_one_worker_in_order_and_the_rest_on_the_other(tmp_path):
    proc = _run(tmp_path, "-n", "2", "--slow-apart")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notes = [line.split() for line in (tmp_path / "notes").read_text().splitlines()]
    slow = [(n, w) for n, w, _ in notes if n.startswith("slow")]
    fast = [(n, w) for n, w, _ in notes if n.startswith("fast")]
    # the heavy module first, then the order a serial run takes
    assert [n for n, _ in slow] == ["slow_h1", "slow_h2", "slow_1", "slow_2", "slow_3"]
    assert len({w for _, w in slow}) == 1 and {w for _, w in fast} == {"gw0", "gw1"} - {slow[0][1]}
    assert sorted(n for n, _ in fast) == ["fast_a", "fast_c1", "fast_c2"]
    # the `beside` tests: on the fast tests' worker, after every fast test there, the light one first
    on_fast = [n for n, w, _ in notes if w == fast[0][1]]
    assert on_fast[-3:] == ["beside_light", "beside_1", "beside_2"] and len(on_fast) == 6
    # ... the others after the heavy ones ended (the fast tests end long before): never beside a heavy
    # test; the light one did not wait for them (the heavy module takes 4 s, the fast tests 1 s)
    order = [n for n, _, _ in notes]
    assert order.index("beside_1") > order.index("slow_h2") and order.index("beside_light") < order.index("slow_1")
    # a Ray folder per worker: a `ray start` on one is not joined from the other
    folders = {w: d for _, w, d in notes}
    assert len(set(folders.values())) == 2 and all(d.endswith(f"esc-eval-{w}") for w, d in folders.items())


def test_without_workers_it_is_refused_in_one_line(tmp_path):
    proc = _run(tmp_path, "--slow-apart")
    assert proc.returncode == 4 and "--slow-apart needs pytest-xdist's -n (e.g. -n 2)" in proc.stderr
    assert not (tmp_path / "notes").exists()


def test_a_beside_test_waits_for_memory_before_its_setup(monkeypatch):
    """Below the threshold (here more memory than any machine has, and a 3 s limit) a `beside` test waits in
    pytest_runtest_protocol, before its setup (so in none of its reported times), then runs; with no
    threshold, or for a test not marked `beside`, nothing waits."""
    monkeypatch.setenv("ESC_EVAL_BESIDE_FREE_GIB", "100000")
    import slow_apart

    monkeypatch.setattr(slow_apart, "BESIDE_WAIT_S", 3.0)
    # run by an xdist worker of the suite, this process has collected the suite's heavy tests: not this test's
    monkeypatch.setattr(slow_apart, "HEAVY", set())
    item = type("Item", (), {})()
    item.config = type("Config", (), {"workerinput": {"workerid": "gw1"}, "getoption": lambda self, name: True})()
    item.get_closest_marker = lambda name: object() if name == "beside" else None
    import time

    t0 = time.monotonic()
    assert slow_apart.pytest_runtest_protocol(item, None) is None  # pytest's own protocol runs the test
    assert 3.0 <= time.monotonic() - t0 < 6.0
    monkeypatch.setenv("ESC_EVAL_BESIDE_FREE_GIB", "0")
    t0 = time.monotonic()
    slow_apart.pytest_runtest_protocol(item, None)
    assert time.monotonic() - t0 < 0.5
    item.get_closest_marker = lambda name: None  # not beside: never waits
    monkeypatch.setenv("ESC_EVAL_BESIDE_FREE_GIB", "100000")
    t0 = time.monotonic()
    slow_apart.pytest_runtest_protocol(item, None)
    assert time.monotonic() - t0 < 0.5


def test_a_beside_test_waits_for_the_heavy_tests_to_end(monkeypatch, tmp_path):
    """While the slow worker's heavy tests run (no flag file yet) a `beside` test waits, at most
    HEAVY_WAIT_S; once the last heavy test's teardown wrote the flag, it does not."""
    import slow_apart

    ids = tmp_path / "ids.json"
    monkeypatch.setenv(slow_apart.ENV, str(ids))
    monkeypatch.setenv("ESC_EVAL_BESIDE_FREE_GIB", "0")
    monkeypatch.setattr(slow_apart, "HEAVY", {"tests/x.py::test_heavy"})
    monkeypatch.setattr(slow_apart, "HEAVY_WAIT_S", 3.0)
    item = type("Item", (), {})()
    item.config = type("Config", (), {"workerinput": {"workerid": "gw1"}, "getoption": lambda self, name: True})()
    item.get_closest_marker = lambda name: object() if name == "beside" else None
    import time

    t0 = time.monotonic()
    slow_apart.pytest_runtest_protocol(item, None)
    assert 3.0 <= time.monotonic() - t0 < 6.0
    heavy = type("Item", (), {"nodeid": "tests/x.py::test_heavy"})()
    hook = slow_apart.pytest_runtest_teardown(heavy, None)  # the last heavy test's teardown: the flag
    next(hook)
    try:
        next(hook)
    except StopIteration:
        pass
    assert slow_apart.heavy_done_file(str(ids)).exists()
    t0 = time.monotonic()
    slow_apart.pytest_runtest_protocol(item, None)
    assert time.monotonic() - t0 < 0.5
