"""`--slow-apart` with `-n 2`: the slow tests on one xdist worker, in the order a serial run takes
them, and every other test on the other worker at the same time; then, on that other worker, the slow
tests marked `beside` (safe beside another slow test: no Serve application, no timing compared, light
on memory), in their order.

Why a scheduler of our own: the slow tests start engines, Ray and Serve replicas and two of them
side by side held 20 of the 23 GiB of a 2-core CI machine and moved the tests that compare timings;
the fast tests (about 10 minutes serially, mostly processes starting and waiting) fit beside one slow
test. xdist's own modes cannot say this: `loadscope` groups by module only, and `loadgroup` (the
xdist_group marker) does not group on pytest 9.2. This subclass of xdist's LoadScopeScheduling
changes only the scope of a test: every slow test is in one scope (one worker, collection order),
every other test in its module's scope; the slow scope is handed out first, the `beside` tests' scopes
(one per module) last: the worker that ran the fast modules takes them while the slow one is busy, and
the slow worker, once done, takes what is left.

Slow tests marked `heavy` (Serve replicas or several engines held for minutes) run first on the slow
worker, in their order, while the other worker runs the fast tests; the `beside` tests come after
those. A `beside` test also waits, before it starts (a wait outside the test's own times):
- until the slow worker has finished its heavy tests (it writes a file when the last one's teardown is
  done), at most HEAVY_WAIT_S: on CI's AVX2 EPYC the autoscale test's second replica started while
  the judge bench (a beside test, which had found 8 GiB free) held its engines, and Ray's memory
  monitor killed both. A `beside` test also marked `light` (no model engine, no Ray: a browser, one
  CLI process) does not wait for them, and its module is handed out before the other `beside`
  modules: on the AVX2 EPYC the fast tests ended about 200 s before the heavy ones, a wait the
  light tests now fill;
- then until the machine has BESIDE_FREE_GIB available (MemAvailable; ESC_EVAL_BESIDE_FREE_GIB sets
  another), at most BESIDE_WAIT_S: two Serve replicas of the slow worker and a beside test's Ray held
  20.6 of 24 GiB on the AVX2 EPYC.

Each worker has a Ray temporary folder of its own (RAY_TMPDIR): Ray's address file
(ray_current_cluster), which `ray start` writes and `serve up` and ray.init(address="auto") read, and
its session folders are then per worker, so a `ray start` on one worker is never joined from the other.

The controller does not collect; the workers do. Each worker writes the node ids of the slow tests
it collected to a file the controller named (ESC_EVAL_SLOW_IDS) before it reports its collection,
and the controller reads it when it splits the collection into scopes.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

ENV = "ESC_EVAL_SLOW_IDS"
BESIDE_FREE_GIB, BESIDE_WAIT_S = 8.0, 600.0
HEAVY_WAIT_S = 1800.0  # the heavy tests took 1,352 s together on the AVX2 EPYC; the fast tests beside them ~900
FREE_ENV = "ESC_EVAL_BESIDE_FREE_GIB"  # another threshold (0: no wait), e.g. for this plugin's own test
SLOW_SCOPE = "<slow tests>"
BESIDE_SCOPE = "<slow tests beside the others>"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow-apart", action="store_true", default=False,
                     help="with -n 2: the slow tests on one worker in collection order, the others on the other "
                          "(tests/slow_apart.py)")


def pytest_configure(config: pytest.Config) -> None:
    if not config.getoption("slow_apart"):
        return
    if hasattr(config, "workerinput"):
        # a worker: it writes the ids (below) where the controller said, and has a Ray folder of its own
        base = os.environ.get("RAY_TMPDIR") or "/tmp"
        os.environ["RAY_TMPDIR"] = str(Path(base) / f"esc-eval-{config.workerinput['workerid']}")
        Path(os.environ["RAY_TMPDIR"]).mkdir(parents=True, exist_ok=True)
        return
    if not config.pluginmanager.hasplugin("xdist") or not getattr(config.option, "numprocesses", None):
        raise pytest.UsageError("--slow-apart needs pytest-xdist's -n (e.g. -n 2)")
    fd, path = tempfile.mkstemp(prefix="esc-eval-slow-ids-", suffix=".json")
    os.close(fd)
    os.environ[ENV] = path  # the workers, started after this, inherit it
    config.add_cleanup(lambda: [p.unlink(missing_ok=True) for p in (Path(path), heavy_done_file(path))])


def heavy_done_file(ids_path: str) -> Path:
    """Written by the slow worker once its heavy tests (and their fixtures' teardown) are over."""
    return Path(f"{ids_path}.heavy-done")


HEAVY: set[str] = set()  # this worker's collected heavy tests (every worker collects all of them)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = os.environ.get(ENV)
    if not config.getoption("slow_apart") or not hasattr(config, "workerinput") or not path:
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    ids = {"slow": [i.nodeid for i in slow if not i.get_closest_marker("beside")],
           "beside": [i.nodeid for i in slow if i.get_closest_marker("beside")],
           "light": [i.nodeid for i in slow if i.get_closest_marker("beside") and i.get_closest_marker("light")],
           "heavy": [i.nodeid for i in slow if i.get_closest_marker("heavy") and not i.get_closest_marker("beside")]}
    HEAVY.update(ids["heavy"])
    tmp = f"{path}.{config.workerinput['workerid']}"
    Path(tmp).write_text(json.dumps(ids))
    os.replace(tmp, path)  # whole or not at all: every worker writes the same list


def available_gib() -> float | None:
    """MemAvailable from /proc/meminfo in GiB (None where there is none: not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        return None
    return None


def _wait(done, limit_s: float) -> None:
    import time

    deadline = time.monotonic() + limit_s
    while not done() and time.monotonic() < deadline:
        time.sleep(2.0)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Before a `beside` test's setup (so the wait is in none of its phases' times, which the time budget
    reads): wait for the heavy tests to end, then for the memory. Returns None: pytest's own protocol
    then runs the test."""
    if not item.config.getoption("slow_apart") or not hasattr(item.config, "workerinput"):
        return
    if not item.get_closest_marker("beside"):
        return
    path = os.environ.get(ENV)
    if HEAVY and path and not item.get_closest_marker("light"):
        _wait(lambda: heavy_done_file(path).exists(), HEAVY_WAIT_S)
    need = float(os.environ.get(FREE_ENV, BESIDE_FREE_GIB))
    # the slow worker's replicas or engines hold the memory: let them finish first
    _wait(lambda: (free := available_gib()) is None or free >= need, BESIDE_WAIT_S)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After the last heavy test's teardown (its module's fixtures are torn down with it when the next
    test is not heavy, or there is none): say so to the other worker's `beside` tests."""
    yield
    path = os.environ.get(ENV)
    if path and item.nodeid in HEAVY and (nextitem is None or nextitem.nodeid not in HEAVY):
        heavy_done_file(path).touch()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if not config.getoption("slow_apart"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SlowApartScheduling(LoadScopeScheduling):
        """LoadScopeScheduling whose scopes are: the slow tests together (handed out first), the `beside`
        ones by module (last), else the test's module."""

        ids: dict[str, set[str]] | None = None
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if self.ids is None:  # every worker has reported its collection when the split begins
                text = Path(os.environ[ENV]).read_text()
                self.ids = {k: set(v) for k, v in (json.loads(text) if text else {}).items()}
            if nodeid in self.ids.get("slow", ()):
                return SLOW_SCOPE
            module = nodeid.split("::", 1)[0]
            # one scope per module: the worker done first (either) takes the next beside module
            return f"{BESIDE_SCOPE} {module}" if nodeid in self.ids.get("beside", ()) else module

        def _assign_work_unit(self, node) -> None:
            # The queue is whole when the first unit is handed out (schedule() fills it, then assigns).
            if not self.ordered:
                self.ordered = True
                if SLOW_SCOPE in self.workqueue:
                    self.workqueue.move_to_end(SLOW_SCOPE, last=False)
                    # the heavy ones first, each in collection order (a module stays in one piece: its
                    # module fixtures start once)
                    unit = self.workqueue[SLOW_SCOPE]
                    heavy = self.ids.get("heavy", set())
                    self.workqueue[SLOW_SCOPE] = {**{k: v for k, v in unit.items() if k in heavy},
                                                  **{k: v for k, v in unit.items() if k not in heavy}}
                beside = [k for k in self.workqueue if k.startswith(BESIDE_SCOPE)]
                light = self.ids.get("light", set())
                # after every other, in collection order, those whose tests are all light first
                for scope in sorted(beside, key=lambda k: not set(self.workqueue[k]) <= light):
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return SlowApartScheduling(config, log)
