"""The suite's time, kept in bounds on every CPU kind (a pytest plugin loaded by tests/conftest.py).

CI runs on whatever machine a submission was made on; the slowest kind (a 2-core AMD EPYC with AVX2
only) took 2.3x the AVX-512 EPYC's time on the same suite, so a test that is fine where it was
written can push the next AVX2 CI run past its limit. So budgets are stated in *reference seconds*,
seconds on that AVX2 EPYC, and scaled to this machine by a short reference workload timed at the
start (`machine_factor`: this machine's time over the AVX2 EPYC's on the same workload; below 1 on
a faster machine). A test over its budget is named, and in CI (`CI` set) or with
`ESC_EVAL_TIME_BUDGET=enforce` the run fails though every test passed: a slow test is found on the
machine where it is added. `ESC_EVAL_TIME_BUDGET=off` turns the check off (the times are still kept).

Budgets (reference seconds; setup + call + teardown, so a module fixture's start counts on the test
that first asks for it): a test marked `slow` SLOW_BUDGET_S, any other FAST_BUDGET_S, the whole run
SUITE_BUDGET_S. Every test's times go to `$ESC_EVAL_TEST_TIMES` (default
.pytest-times.json in the repository root, git-ignored) with the factor, for the next look.

Hand-written: pytest's --durations prints times but has no budget, and pytest-timeout kills a
test at a fixed wall time on every machine alike (a hang guard, not a budget that follows the CPU).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

# Budgets in seconds on the AVX2 EPYC (the slowest CPU CI runs on). Set on 2026-12-05 (issue 52) from
# `.ci/run` on a clean clone of main 201c7c9 on the AVX-512 BF16 EPYC: the suite 24.0 min (1,676 passed;
# factor 0.64: 37.6 min on the factor's scale), the slowest slow test 143 s (autoscale; then bench score
# 117, bench sim's 30 rounds 114, training 104, the demo 94), the slowest other test 28 s (a course killed
# in session 2 and resumed). The factor understates the AVX2 EPYC on the engines' work: the suite took
# 2.2-2.3x there what it took here (17 against 38-41 minutes in November), so a budget is this machine's
# seconds x 2.3 plus 15% spread: slow 143 -> 380, other 28 -> 75. The suite's 50 minutes are the
# issue's target (CI within about 60 of its 90 minutes with set-up on the AVX2 EPYC); by the 2.3x
# ratio today's suite is 48-55 minutes there, so it sits at that bound and the next test added there may
# be the one that has to pay for itself.
SLOW_BUDGET_S = 380.0
# A test that is not slow runs beside the slow worker's engines (--slow-apart), which took tests to 3-4x
# their time alone: the 28 s above is such a time.
FAST_BUDGET_S = 75.0
SUITE_BUDGET_S = 50 * 60.0
# The fastest CPU kind we run on took 0.43x the AVX2 EPYC's time on the suite (30-34 min against 74); a
# reference workload that flatters a machine more than that must not shrink its budgets below this.
FACTOR_FLOOR = 0.5

# The reference workload's best-of-3 time on the AVX2 EPYC (measured there, the machine of issue 40).
REFERENCE_PY_S = 0.37
REFERENCE_NUMPY_S = 0.25

TIMES_ENV, MODE_ENV = "ESC_EVAL_TEST_TIMES", "ESC_EVAL_TIME_BUDGET"
ROOT = Path(__file__).resolve().parents[1]


def _python_work() -> float:
    """Interpreter-bound work (imports, pydantic, the pool's bookkeeping are of this kind)."""
    t0 = time.perf_counter()
    acc: dict[int, int] = {}
    for i in range(2_000_000):
        acc[i % 1021] = acc.get(i % 1021, 0) + (i * 7) % 13
    sorted(str(v) for v in acc.values())
    return time.perf_counter() - t0


def _numpy_work() -> float:
    """Vector-unit-bound work (a model's matmuls on the CPU are of this kind): fp32 matmuls."""
    import numpy as np

    a = np.random.default_rng(0).standard_normal((384, 384), dtype=np.float32)
    t0 = time.perf_counter()
    for _ in range(160):
        a = np.tanh(a @ a * 0.01)
    return time.perf_counter() - t0


def reference_times() -> tuple[float, float]:
    """The reference workload's (python, numpy) seconds here, best of 3 (a busy moment is not the machine)."""
    return min(_python_work() for _ in range(3)), min(_numpy_work() for _ in range(3))


def machine_factor(py_s: float, np_s: float) -> float:
    """This machine's time over the AVX2 EPYC's on the reference workload (the geometric mean of the
    two parts), between FACTOR_FLOOR and 1: a machine slower than the slowest kind gets that kind's budgets."""
    return min(1.0, max(FACTOR_FLOOR, ((py_s / REFERENCE_PY_S) * (np_s / REFERENCE_NUMPY_S)) ** 0.5))


class TimeBudget:
    def __init__(self) -> None:
        mode = os.environ.get(MODE_ENV, "").lower()
        self.enforce = mode == "enforce" or (mode != "off" and bool(os.environ.get("CI")))
        self.off = mode == "off"
        self.path = Path(os.environ.get(TIMES_ENV) or ROOT / ".pytest-times.json")
        self.times: dict[str, dict] = {}
        self.started = time.monotonic()
        self.py_s, self.np_s = reference_times()
        self.factor = machine_factor(self.py_s, self.np_s)

    def budget(self, slow: bool) -> float:
        return (SLOW_BUDGET_S if slow else FAST_BUDGET_S) * self.factor

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.times.setdefault(report.nodeid, {"setup": 0.0, "call": 0.0, "teardown": 0.0,
                                                      "slow": "slow" in report.keywords})
        entry[report.when] = round(report.duration, 3)

    def over_budget(self) -> list[tuple[str, float, float]]:
        out = []
        for nodeid, t in self.times.items():
            total, budget = t["setup"] + t["call"] + t["teardown"], self.budget(t["slow"])
            if total > budget:
                out.append((nodeid, total, budget))
        return sorted(out, key=lambda x: -x[1])

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Judge the run before the terminal summary prints (and before pytest reads the exit status)."""
        self.wall = time.monotonic() - self.started
        self.suite_budget = SUITE_BUDGET_S * self.factor
        self.over = [] if self.off else self.over_budget()
        # a partial run (one file, -k, -m) has no suite budget
        if not self.off and self.wall > self.suite_budget and len(self.times) > 1000:
            self.over.append(("the whole suite", self.wall, self.suite_budget))
        self.path.write_text(json.dumps({
            "machine_factor": round(self.factor, 3), "reference_python_s": round(self.py_s, 4),
            "reference_numpy_s": round(self.np_s, 4), "wall_s": round(self.wall, 1),
            "suite_budget_s": round(self.suite_budget, 1),
            "budgets_s": {"slow": round(self.budget(True), 1), "other": round(self.budget(False), 1)},
            "over_budget": [{"test": n, "seconds": round(t, 1), "budget_s": round(b, 1)} for n, t, b in self.over],
            "tests": self.times}, indent=1))
        if self.over and self.enforce and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter) -> None:
        tr = terminalreporter
        tr.section("time budget")
        tr.write_line(f"machine factor {self.factor:.2f} (reference workload {self.py_s:.3f} s + {self.np_s:.3f} s; "
                      f"1.00 = the AVX2 EPYC); budgets here: slow test {self.budget(True):.0f} s, other test "
                      f"{self.budget(False):.0f} s, whole suite {self.suite_budget / 60:.1f} min; times in {self.path}")
        tr.write_line(f"wall time {self.wall / 60:.1f} min ({self.wall / self.factor / 60:.1f} min on the AVX2 EPYC's scale)")
        for nodeid, total, budget in self.over:
            tr.write_line(f"OVER BUDGET: {nodeid} took {total:.1f} s, its budget here is {budget:.1f} s", red=True)
        if self.over:
            tr.write_line(f"{len(self.over)} over budget: " + (
                f"the run fails ({MODE_ENV}=off only reports)" if self.enforce
                else f"reported only (CI, or {MODE_ENV}=enforce, fails the run)"), red=True)


def register(config: pytest.Config) -> None:
    """Called from tests/conftest.py's pytest_configure."""
    config.pluginmanager.register(TimeBudget(), "esc-eval-time-budget")
