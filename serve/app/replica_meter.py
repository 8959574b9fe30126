"""GPU time held by a Serve app's replicas: serve.status() sampled while the app is up, replicas x
GPUs per replica integrated over time (a replica starting, running or stopping holds its GPUs).

    meter = ReplicaMeter("esc-eval-run", {"esc-role": 0.6261, "qwen1.5-7b-chat": 0.3739})
    meter.start()            # before the deploy: starting replicas count
    ...
    meter.stop()             # after the app is deleted; one last sample
    meter.totals()           # model id -> replica_seconds, gpu_seconds, gpus_per_replica, most_replicas
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

log = logging.getLogger("esc_eval.serve.app.replica_meter")


def replica_counts(status: Any, app_name: str, models: list[str]) -> dict[str, int]:
    """model id -> replicas of its deployment in any state (from a serve.status() object)."""
    app = status.applications.get(app_name) if status is not None else None
    out = {m: 0 for m in models}
    if app is None:
        return out
    for dname, d in app.deployments.items():
        model = next((m for m in models if dname.endswith(":" + m.replace("/", "--").replace(".", "_"))), None)
        if model is not None:
            out[model] += sum(int(n) for n in (getattr(d, "replica_states", None) or {}).values())
    return out


def _serve_status() -> Any:
    from ray import serve

    return serve.status()


class ReplicaMeter:
    """Integrates replicas x GPUs per replica of one Serve app over time (see the module doc)."""

    def __init__(self, app_name: str, gpus_per_replica: dict[str, float], *, interval_s: float = 2.0,
                 status: Callable[[], Any] = _serve_status, clock: Callable[[], float] = time.monotonic):
        self.app_name = app_name
        self.gpus = dict(gpus_per_replica)
        self.interval_s = interval_s
        self.status = status
        self.clock = clock
        self.replica_seconds = {m: 0.0 for m in self.gpus}
        self.most = {m: 0 for m in self.gpus}
        self.samples = 0
        self._last: tuple[float, dict[str, int]] | None = None
        self._halt = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def sample(self) -> None:
        """One reading: the replicas since the last reading are counted as the last reading saw them."""
        try:
            counts = replica_counts(self.status(), self.app_name, list(self.gpus))
        except Exception as e:  # noqa: BLE001 - a controller hiccup: the previous count stands until the next
            log.debug("serve.status() failed: %s", e)
            return
        now = self.clock()
        with self._lock:
            if self._last is not None:
                since, before = self._last
                for m, n in before.items():
                    self.replica_seconds[m] += n * (now - since)
            self._last = (now, counts)
            for m, n in counts.items():
                self.most[m] = max(self.most[m], n)
            self.samples += 1

    def _run(self) -> None:
        while not self._halt.wait(self.interval_s):
            self.sample()

    def start(self) -> "ReplicaMeter":
        self.sample()
        self._thread = threading.Thread(target=self._run, name="replica-meter", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._halt.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 30)
        self.sample()

    def totals(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {m: {"replica_seconds": round(s, 3), "gpus_per_replica": self.gpus[m],
                        "gpu_seconds": round(s * self.gpus[m], 3), "most_replicas": self.most[m]}
                    for m, s in self.replica_seconds.items()}
