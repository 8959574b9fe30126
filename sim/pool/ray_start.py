"""Starting a local Ray on a busy machine.

Ray waits a fixed 30 s for a new node's raylet to register with its GCS (ray/_private/node.py,
not configurable) and then gives up with "The current node timed out during startup". On a 2-core
machine where another cluster, an engine or a test is starting at the same moment, that was too
short twice in CI runs of the suite. A local start that fails so is shut down and started once
more; any other error, or a second timeout, is the caller's."""
from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("esc_eval.pool")
STARTUP_TIMEOUT = "timed out during startup"  # Ray's words when its raylet did not register in time
LOCAL_START_RETRIES = 1


def start_local_ray(**kwargs: Any) -> None:
    """ray.init(**kwargs) for a cluster this process starts, again once after Ray's start timeout."""
    import ray

    for attempt in range(1 + LOCAL_START_RETRIES):
        try:
            ray.init(**kwargs)
            return
        except Exception as e:  # noqa: BLE001 - only Ray's own start timeout is retried
            if STARTUP_TIMEOUT not in str(e) or attempt == LOCAL_START_RETRIES:
                raise
            log.warning("the local Ray did not start in Ray's 30 s (%s); starting it again", e)
            ray.shutdown()
