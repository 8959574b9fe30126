"""serve/engines/cpu_layout.py: which process layout a CPU engine starts in, and the start's environment."""
import os
import subprocess
import sys
import threading
import time

import pytest

from esc_eval.serve.engines.cpu_layout import (BIND_ENV, MULTIPROCESSING_ENV, THREADS_ENV, CpuLayout, cpu_layout, pinned,
                                              start_env)

OURS = {MULTIPROCESSING_ENV: "0"}


@pytest.mark.parametrize("environ, cores, expected", [
    ({}, 2, CpuLayout({**OURS, THREADS_ENV: "1"})),  # vLLM's auto binding gives its worker cores - 1 too
    ({}, 16, CpuLayout({**OURS, THREADS_ENV: "15"})),
    ({}, 1, CpuLayout({**OURS, THREADS_ENV: "1"})),
    ({BIND_ENV: "auto"}, 8, CpuLayout({**OURS, THREADS_ENV: "7"})),
    ({THREADS_ENV: "4"}, 8, CpuLayout(OURS)),  # the user's thread count stays
    ({BIND_ENV: "1"}, 8, CpuLayout({**OURS, THREADS_ENV: "1"}, frozenset({1}))),  # cpu_bind: per_worker
    ({BIND_ENV: "0,2-4"}, 8, CpuLayout({**OURS, THREADS_ENV: "4"}, frozenset({0, 2, 3, 4}))),
    ({BIND_ENV: "nobind"}, 8, CpuLayout({**OURS, THREADS_ENV: "7"})),  # no binding: nothing to pin
    ({BIND_ENV: "nobind", THREADS_ENV: "1"}, 8, CpuLayout(OURS)),  # the routing bench's and autoscale's replicas
    # only vLLM's layout knows these
    ({BIND_ENV: "0-3|4-7"}, 8, CpuLayout()),
    ({BIND_ENV: "0-x"}, 8, CpuLayout()),
    ({MULTIPROCESSING_ENV: "1"}, 8, CpuLayout()),  # the user chose vLLM's layout
    ({MULTIPROCESSING_ENV: "1", BIND_ENV: "1"}, 8, CpuLayout()),
])
def test_the_layout_follows_what_the_user_set(environ, cores, expected):
    assert cpu_layout(environ, cores) == expected


def test_a_process_started_while_pinned_keeps_the_cores_and_the_thread_gets_its_own_back():
    before = os.sched_getaffinity(0)
    core = min(before)
    probe = [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]
    with pinned(frozenset({core})):
        inside = subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip()
    assert inside == str([core])
    assert os.sched_getaffinity(0) == before
    assert subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip() == str(sorted(before))


def test_start_env_is_set_for_the_block_and_restored(monkeypatch):
    monkeypatch.setenv(THREADS_ENV, "9")
    monkeypatch.delenv(MULTIPROCESSING_ENV, raising=False)
    with start_env({MULTIPROCESSING_ENV: "0", THREADS_ENV: "1"}):
        assert os.environ[MULTIPROCESSING_ENV] == "0" and os.environ[THREADS_ENV] == "1"
    assert MULTIPROCESSING_ENV not in os.environ and os.environ[THREADS_ENV] == "9"


def test_starts_with_the_same_values_overlap_and_others_wait(monkeypatch):
    monkeypatch.delenv(MULTIPROCESSING_ENV, raising=False)
    ours = {MULTIPROCESSING_ENV: "0"}
    seen, order = {}, []
    first_in, release = threading.Event(), threading.Event()

    def hold(name, env):
        with start_env(env):
            order.append(name)
            seen[name] = os.environ.get(MULTIPROCESSING_ENV)
            if name == "a":
                first_in.set()
                release.wait(10)

    a = threading.Thread(target=hold, args=("a", ours))
    a.start()
    first_in.wait(10)
    b = threading.Thread(target=hold, args=("b", ours))  # same values: enters while a holds
    c = threading.Thread(target=hold, args=("c", {}))  # vLLM's layout: must not read ours, waits for a
    b.start()
    b.join(10)
    c.start()
    time.sleep(0.2)
    assert order == ["a", "b"] and c.is_alive()
    release.set()
    a.join(10)
    c.join(10)
    assert order == ["a", "b", "c"]
    assert seen == {"a": "0", "b": "0", "c": None}
    assert MULTIPROCESSING_ENV not in os.environ
