"""`esc-eval serve up` leaves a running app that other processes use until `serve down`.

Heavy (a vLLM engine in Ray Serve): run under `flock /tmp/esc-eval-heavy.lock`. Ray's default
token authentication is left on here (RAY_AUTH_MODE removed from the CLI's environment).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
CLI = [sys.executable, "-m", "esc_eval.cli"]

CLIENT = r"""
import json, sys, urllib.request
base = sys.argv[1]
models = json.load(urllib.request.urlopen(base + "/models", timeout=60))
model = models["data"][0]["id"]
body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8,
                   "temperature": 0}).encode()
req = urllib.request.Request(base + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
answer = json.load(urllib.request.urlopen(req, timeout=120))
print(json.dumps({"model": model, "text": answer["choices"][0]["message"]["content"]}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.heavy
def test_serve_up_leaves_a_running_app_for_other_processes(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    port = free_port()
    up = subprocess.Popen([*CLI, "serve", "up", "--model", "embedded", "--port", str(port), "--timeout", "400"],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True)
    try:
        out, err = up.communicate(timeout=600)
        assert up.returncode == 0, err[-3000:]
        assert f"http://127.0.0.1:{port}/v1" in err
        # What a terminal or job runner does when the command returns: signal its whole group.
        try:
            os.killpg(up.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        time.sleep(3)
        # Two other processes at once (the status CLI's imports take longer than the client's call)
        status = subprocess.Popen([*CLI, "serve", "status"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            client = subprocess.run([sys.executable, "-c", CLIENT, f"http://127.0.0.1:{port}/v1"],
                                    capture_output=True, text=True, timeout=300)
            _, status_err = status.communicate(timeout=120)
        finally:
            if status.poll() is None:
                status.kill()
                status.wait()
        assert client.returncode == 0, client.stderr[-2000:]
        answer = json.loads(client.stdout.strip().splitlines()[-1])
        assert answer["model"] == "embedded" and answer["text"].strip()
        assert status.returncode == 0 and "RUNNING" in status_err, status_err[-2000:]
    finally:
        down = subprocess.run([*CLI, "serve", "down", "--stop-ray"], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=300)
    assert down.returncode == 0, down.stderr[-2000:]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
