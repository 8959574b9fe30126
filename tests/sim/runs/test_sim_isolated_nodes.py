"""Two Ray nodes that do not share a disk, on this machine (slow; needs root for `unshare -m`).

The head node runs in this machine's mount namespace; the second node's raylet starts inside
`unshare -m` with a tmpfs mounted over the run folders' parent, so it sees an empty folder where the
driver's runs are: what two cloud VMs or two Kubernetes pods look like. `esc-eval simulate` and
`esc-eval score`, separate driver processes joined to the cluster, run one worker per node. Every
dialogue and score must reach the driver's folder exactly once, nothing may be left on the
tmpfs, and the second node's worker must have gone through the driver's node. In the second test
the second node is killed (SIGKILL of its processes) mid-run: its dialogues are resumed from the
turn checkpoints it shipped to the driver's disk, by the worker on the head."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from esc_eval.sim.runs.checkpoints import LOG_GLOB
from esc_eval.sim.runs.runfolder import RunFolder

REPO = Path(__file__).resolve().parents[3]
DIALOGUES = 24
RAY = str(Path(sys.executable).with_name("ray"))

pytestmark = [pytest.mark.slow, pytest.mark.beside,
              pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                 reason="needs root and unshare(1) to give the second node its own mount namespace")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive_nodes(address: str, env: dict) -> int:
    code = (f"import ray; ray.init(address={address!r}, log_to_driver=False); "
            "print(sum(n['Alive'] for n in ray.nodes()))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(address, runs folder, second node's process, env): the second node cannot see `runs`."""
    base = tmp_path_factory.mktemp("isolated")
    runs = base / "runs"
    runs.mkdir()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_worker_niceness": "0"}
    port = _free_port()
    address = f"127.0.0.1:{port}"
    # --block keeps each node's processes in one process group of ours: stopping them never touches
    # another Ray on this machine (no `ray stop`).
    head = subprocess.Popen([RAY, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                             "--include-dashboard=false", "--disable-usage-stats", "--block"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    second = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         f"mount -t tmpfs esc-eval-other-disk {runs} && exec {RAY} start --address={address} "
         f"--node-ip-address=127.0.0.1 --num-cpus=1 --disable-usage-stats --block"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 120
        while _alive_nodes(address, env) < 2:
            assert time.time() < deadline, "the two-node cluster did not come up"
            assert second.poll() is None, "the second node exited (unshare or mount refused?)"
            time.sleep(1)
        yield address, runs, second, env
    finally:
        for proc in (second, head):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)


def _config(tmp_path: Path, address: str, workers: int = 2, latency: float = 0.2) -> Path:
    from esc_eval.sim.bench.loops.simulation import synthetic_cards
    from esc_eval.sim.cards.card import write_cards

    write_cards(synthetic_cards(DIALOGUES), tmp_path / "cards.json")
    cfg = tmp_path / "sim.yaml"
    cfg.write_text(f"""
cards: {tmp_path / 'cards.json'}
role: {{model: "fake/seeker?latency={latency}"}}
targets: [{{model: "fake/echo?latency={latency}"}}]
execution: {{ray_address: "{address}", workers: {workers}, num_cpus_per_worker: 1, concurrency: 4, chunk_size: 2,
             flush_rows: 1, placement_timeout_s: 60, log_to_driver: false}}
""")
    return cfg


def _cli(*args, env, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "esc_eval.cli", "-v", *args], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, **kw)


def _finish(proc: subprocess.Popen, timeout: float) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode == 0, out[-4000:]
    return out


def _result(output: str) -> dict:
    """The command's JSON result (stdout) among the log lines (stderr) it is interleaved with."""
    start = ("\n" + output).rindex("\n{\n")
    return json.JSONDecoder().raw_decode(output[start:])[0]


def _in_flight(log: Path) -> int:
    """Dialogues of one checkpoint log with at least two turns and no row yet."""
    turns: dict[str, int] = {}
    done: set[str] = set()
    for raw in log.read_bytes().splitlines():
        try:
            entries = json.loads(raw)
        except ValueError:
            continue  # a line still being written
        for e in entries:
            if "done" in e:
                done.update(e["done"])
            else:
                turns[e["d"]] = e["from"] + len(e["turns"])
    return sum(1 for d, n in turns.items() if n >= 2 and d not in done)


def _second_nodes_view(second: subprocess.Popen, folder: Path) -> list[str]:
    """Files under `folder` as the second node's processes see it (its mount namespace)."""
    root = Path(f"/proc/{second.pid}/root") / folder.relative_to("/")
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_every_row_reaches_the_drivers_folder_from_a_node_without_its_disk(cluster, tmp_path):
    address, runs, second, env = cluster
    out = runs / "run-a"
    cfg = _config(tmp_path, address)
    sim = _finish(_cli("simulate", "-c", str(cfg), "-o", str(out), env=env), 300)
    # The second node's worker could not see the folder and shipped its rows through the driver's node.
    assert "(ShippedStorage)" in sim and "(LocalStorage)" in sim, sim[-4000:]
    run = RunFolder(out, create=False)
    ids = run.read("dialogues", columns=["dialogue_id"]).column("dialogue_id").to_pylist()
    assert len(ids) == len(set(ids)) == DIALOGUES
    assert all(r["status"] == "ok" and r["n_turns"] == 11 for r in run.iter_rows("dialogues"))
    assert _result(sim)["rows_checked"] == DIALOGUES

    scoring = tmp_path / "score.yaml"
    scoring.write_text(f"""
judge: {{model: {{model: "fake/judge?latency=0.05"}}}}
execution: {{ray_address: "{address}", workers: 2, num_cpus_per_worker: 1, concurrency: 4, chunk_size: 2,
             flush_rows: 7, placement_timeout_s: 60, log_to_driver: false}}
""")
    score = _finish(_cli("score", "-i", str(out), "-c", str(scoring), env=env), 300)
    assert "(ShippedStorage)" in score, score[-4000:]
    keys = [tuple(r.values()) for r in run.read("scores", columns=["dialogue_id", "dimension", "judge"]).to_pylist()]
    assert len(keys) == len(set(keys)) == 7 * DIALOGUES
    # Nothing stayed on the second node's own disk.
    assert second.poll() is None and _second_nodes_view(second, runs) == []


def test_a_node_lost_mid_run_resumes_from_checkpoints_it_shipped(cluster, tmp_path):
    address, runs, second, env = cluster
    out = runs / "run-b"
    cfg = _config(tmp_path, address, latency=0.4)  # a loaded box may take 0.3 s to act on what it saw
    proc = _cli("simulate", "-c", str(cfg), "-o", str(out), env=env)
    # Both workers' checkpoint logs are on the driver's disk (the second node's came through Ray),
    # each with a dialogue in flight that has turns: kill the second node then.
    deadline = time.time() + 180
    while time.time() < deadline and proc.poll() is None:
        logs = list((out / "checkpoints").glob(LOG_GLOB)) if (out / "checkpoints").is_dir() else []
        if len(logs) >= 2 and all(_in_flight(p) for p in logs):
            break
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[0][-3000:]
    assert _second_nodes_view(second, runs) == []
    os.killpg(second.pid, signal.SIGKILL)  # the whole node: its raylet, object store and worker
    killed_at = time.time()
    output = _finish(proc, 300)
    assert "lost" in output, output[-3000:]  # the pool lost the worker and re-sent its chunks
    run = RunFolder(out, create=False)
    rows = list(run.iter_rows("dialogues"))
    assert sorted(r["dialogue_id"] for r in rows) == sorted({r["dialogue_id"] for r in rows})
    assert len(rows) == DIALOGUES and all(r["status"] == "ok" and r["n_turns"] == 11 for r in rows)
    result = _result(output)
    assert result["rows_checked"] == DIALOGUES
    # The lost node's dialogues in flight went on from the turns it had shipped: fewer than 10 calls
    # each (a re-sent chunk's dialogue that had finished there is played again: it counts as an item).
    assert result["model_calls"] < 10 * result["items"], output[-6000:]
    assert not list((out / "checkpoints").glob(LOG_GLOB))
    assert time.time() - killed_at < 200
