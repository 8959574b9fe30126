"""The suite's time budget (tests/time_budget.py) on a suite of its own, in a pytest process of its own:
a test over its budget is named, fails the run when enforced and only reports otherwise; every test's
times and the machine factor are written down."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import time_budget

TESTS = Path(__file__).resolve().parent

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
import time_budget
time_budget.FAST_BUDGET_S = 0.2  # at most 0.2 s here (the factor is at most 1)
time_budget.SLOW_BUDGET_S = 30.0


def pytest_configure(config):
    time_budget.register(config)
"""

SUITE = """
import time
import pytest


def test_quick():
    assert True


def test_sleepy():
    time.sleep(0.6)


@pytest.mark.slow
def test_slow_but_within_its_budget():
    time.sleep(0.6)
"""


def _run(tmp_path: Path, mode: str) -> tuple[subprocess.CompletedProcess, dict]:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE)
    times = tmp_path / f"times-{mode}.json"
    env = {**os.environ, "ESC_EVAL_TIME_BUDGET": mode, "ESC_EVAL_TEST_TIMES": str(times)}
    env.pop("CI", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-o",
                           "markers=slow: slow", "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    return proc, json.loads(times.read_text())


def test_enforced_budget_fails_a_passing_run_and_names_the_test(tmp_path):
    proc, data = _run(tmp_path, "enforce")
    assert "3 passed" in proc.stdout and proc.returncode == 1, proc.stdout[-2000:]
    assert "OVER BUDGET: test_suite.py::test_sleepy" in proc.stdout
    assert "test_slow_but_within_its_budget took" not in proc.stdout  # a slow test has the slow budget
    assert [o["test"] for o in data["over_budget"]] == ["test_suite.py::test_sleepy"]
    assert set(data["tests"]) == {"test_suite.py::test_quick", "test_suite.py::test_sleepy",
                                  "test_suite.py::test_slow_but_within_its_budget"}
    assert data["tests"]["test_suite.py::test_sleepy"]["call"] >= 0.6
    assert data["tests"]["test_suite.py::test_slow_but_within_its_budget"]["slow"] is True
    assert time_budget.FACTOR_FLOOR <= data["machine_factor"] <= 1


def test_reported_only_when_not_enforced(tmp_path):
    proc, data = _run(tmp_path, "report")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "OVER BUDGET: test_suite.py::test_sleepy" in proc.stdout and "reported only" in proc.stdout
    assert len(data["over_budget"]) == 1


def test_the_factor_scales_budgets_between_the_floor_and_one():
    ref_py, ref_np = time_budget.REFERENCE_PY_S, time_budget.REFERENCE_NUMPY_S
    assert time_budget.machine_factor(ref_py, ref_np) == 1.0
    assert time_budget.machine_factor(3 * ref_py, 3 * ref_np) == 1.0  # slower than the AVX2 EPYC: its budgets
    assert abs(time_budget.machine_factor(0.64 * ref_py, ref_np) - 0.8) < 1e-9  # geometric mean of the parts
    assert time_budget.machine_factor(0.01 * ref_py, 0.01 * ref_np) == time_budget.FACTOR_FLOOR
