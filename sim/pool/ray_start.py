"""Starting a local Ray on a busy machine.

Two of Ray's start-up waits are fixed at 30 s. Its raylet must register with the GCS within 30 s
(ray/_private/node.py, not configurable: "The current node timed out during startup"), and the
GCS must write its port file within 30 s ("Timed out waiting for file ... gcs_server_port ...";
RAY_gcs_server_port_wait_time_s sets this one). On a 2-core machine where another cluster, an
engine or a test is starting at the same moment, each was too short in CI runs of the suite. So a
local start waits up to GCS_PORT_WAIT_S for the port (unless the environment says otherwise), and
a start that fails with either timeout is shut down and started once more; any other error, or a
second timeout, is the caller's."""
from __future__ import annotations

import logging
import os
from typing import Any

log = logging.getLogger("esc_eval.pool")
# Ray's words when a start-up wait ran out: the raylet's registration, the GCS's port file
STARTUP_TIMEOUTS = ("timed out during startup", "Timed out waiting for file")
LOCAL_START_RETRIES = 1
GCS_PORT_WAIT_ENV, GCS_PORT_WAIT_S = "RAY_gcs_server_port_wait_time_s", "120"


def start_local_ray(**kwargs: Any) -> None:
    """ray.init(**kwargs) for a cluster this process starts, again once after a Ray start timeout."""
    import ray

    os.environ.setdefault(GCS_PORT_WAIT_ENV, GCS_PORT_WAIT_S)  # read by the node this process starts
    for attempt in range(1 + LOCAL_START_RETRIES):
        try:
            ray.init(**kwargs)
            return
        except Exception as e:  # noqa: BLE001 - only Ray's own start timeouts are retried
            if not any(words in str(e) for words in STARTUP_TIMEOUTS) or attempt == LOCAL_START_RETRIES:
                raise
            log.warning("the local Ray did not start in time (%s); starting it again", e)
            ray.shutdown()
