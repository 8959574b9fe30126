"""Run-folder storage (sim/runs/storage.py): the same RunFolder, checkpoint and output semantics on a local
disk and on a real S3-protocol server (moto, authentication on); bad locations fail in one line
before anything is written. And `-o` with storage URIs, command by command: a command that writes a
run folder takes an s3:// one (judge-agreement on a real S3-protocol server), a command that writes local
files refuses a URI in one line instead of making a folder named `s3:`."""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from esc_eval.sim.runs.checkpoints import TurnCheckpoints, clear_folder, compact_folder, has_logs, read_folder
from esc_eval.sim.runs.open import OutputFolder, StorageSpec, open_storage
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.storage import LocalStorage, RunFolderError, is_uri, join_location, location_name, redact_uri
from esc_eval.sim.runs.storage_objects import ArrowStorage

REPO = Path(__file__).resolve().parents[3]
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def row(did, status="ok", at=0):
    t = T0 + dt.timedelta(seconds=at)
    return {"run_id": "r", "dialogue_id": did, "status": status, "turns": [], "n_turns": 0, "started_at": t,
            "finished_at": t}


@pytest.fixture(params=["local", "s3"])
def location(request, tmp_path):
    if request.param == "local":
        return str(tmp_path / "run")
    return request.getfixturevalue("s3_uri")


def test_uri_helpers():
    assert is_uri("s3://b/p") and is_uri("gs://b") and is_uri("hdfs://nn:8020/x")
    assert not is_uri("/tmp/x") and not is_uri("runs/demo") and not is_uri("file:///tmp/x") and not is_uri("C:x")
    assert isinstance(open_storage("file:///tmp/x"), LocalStorage)
    assert redact_uri("s3://user:pw@bkt/p?region=eu&secret_key=abc") == "s3://bkt/p?region=eu&secret_key=%2A%2A%2A"
    assert join_location("s3://b/run?region=eu", "report", "x.md") == "s3://b/run/report/x.md?region=eu"
    assert join_location("/tmp/run", "report") == "/tmp/run/report"
    assert location_name("s3://b/prefix/run-1/") == "run-1" and location_name("/tmp/a/run-2") == "run-2"


def test_run_folder_semantics_are_the_same_on_disk_and_in_object_storage(location):
    run = RunFolder(location)
    run.write_part("dialogues", [row("a", "failed", 1), row("b")])
    run.write_part("dialogues", [row("a", "ok", 2)])
    assert len(run.parts("dialogues")) == 2 and all(k.startswith("dialogues/part-") for k in run.parts("dialogues"))
    assert sorted(r["dialogue_id"] for r in run.iter_rows("dialogues")) == ["a", "b"]
    assert run.done_dialogue_ids() == {"a", "b"}
    assert run.compact("dialogues") == (3, 2) and len(run.parts("dialogues")) == 1
    run.update_manifest(run_id="x", simulation={"a": 1})
    run.update_manifest(simulation={"b": 2})
    assert run.read_manifest()["simulation"] == {"a": 1, "b": 2}
    # private names (markers, temp files, caches) are never listed as parts
    run.storage.write("dialogues/.part-x.parquet.tmp", b"half")
    assert len(run.parts("dialogues")) == 1
    assert RunFolder(location, create=False).read("dialogues").num_rows == 2


def test_turn_checkpoints_on_disk_and_in_object_storage(location):
    storage = open_storage(location)
    turns = lambda n: [{"i": i} for i in range(n)]  # noqa: E731
    a = TurnCheckpoints("checkpoints", storage=storage)
    a.save("d1", turns(2))
    a.save("d2", turns(1))
    a.flush()
    a.save("d1", a.live["d1"] + [{"i": 2}])
    a.flush()
    assert read_folder("checkpoints", storage) == {"d1": turns(3), "d2": turns(1)}
    if not storage.supports_append:  # one object per send, joined in order by readers
        assert len(storage.list("checkpoints", ".log")) == 3  # three sends (no event loop: each save sends)
    heir = TurnCheckpoints("checkpoints", storage=storage)  # a worker taking over a dead one's dialogues
    assert heir.load("d1") == turns(3)
    a.done(["d2"])
    a.close()
    assert has_logs("checkpoints", storage)
    assert compact_folder("checkpoints", drop={"d1"}, storage=storage) == 0
    assert read_folder("checkpoints", storage) == {}
    b = TurnCheckpoints("checkpoints", storage=storage)
    b.save("d3", turns(4))
    b.close()
    clear_folder("checkpoints", storage)
    assert not has_logs("checkpoints", storage)


def test_a_rotated_object_log_leaves_only_the_live_dialogues(s3_uri):
    storage = open_storage(s3_uri)
    log = TurnCheckpoints("checkpoints", storage=storage, rotate_bytes=400)
    for i in range(12):
        log.save(f"d{i}", [{"text": "x" * 20}] * 3)
        log.flush()
    log.done([f"d{i}" for i in range(10)])
    assert read_folder("checkpoints", storage) == {f"d{i}": [{"text": "x" * 20}] * 3 for i in (10, 11)}
    assert len(storage.list("checkpoints", ".log")) == 1  # the old objects went once the new log was written
    log.close()


def test_output_folder_uploads_a_report_beside_an_object_store_run(s3_uri):
    with OutputFolder(join_location(s3_uri, "report")) as out:
        (out / "figures").mkdir()
        (out / "figures" / "a.png").write_bytes(b"png")
        (out / "report.md").write_text("# hi")
        finals = out.finals({"md": out / "report.md", "n": 3})
    assert finals == {"md": join_location(s3_uri, "report", "report.md"), "n": 3}
    store = open_storage(s3_uri)
    assert store.read("report/report.md") == b"# hi" and store.read("report/figures/a.png") == b"png"


def test_workers_that_do_not_see_the_folder_go_through_the_driver_or_refuse(tmp_path):
    run = RunFolder(tmp_path / "run")
    run.storage.write(".marker", b"")
    assert isinstance(StorageSpec(str(tmp_path / "run"), ".marker").open(), LocalStorage)
    # Another node's view: the marker is not there (its own disk), and there is no writer to use.
    with pytest.raises(RunFolderError, match="cannot see the driver's run folder"):
        StorageSpec(str(tmp_path / "run"), ".other-marker").open()
    with pytest.raises(RunFolderError, match="needs a file system shared by every node"):
        StorageSpec(str(tmp_path / "run"), ".other-marker", server="x", mode="direct").open()
    assert isinstance(StorageSpec("s3://bucket/run").open(), ArrowStorage)


# -- bad locations: one line naming the URI, before any dialogue, nothing written ----------------
def _simulate(out: str, env: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", "simulate", "--out", out, "--role", "fake/seeker",
                           "--target", "fake/echo", "-n", "1"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_bad_object_store_locations_fail_in_one_line_before_any_work(s3_server, tmp_path):
    import os

    base = {**os.environ, **s3_server["env"], "RAY_ENABLE_AUTO_CONNECT": "0"}
    bucket = s3_server["bucket"]
    no_creds = {k: v for k, v in base.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    cases = [
        (f"s3://no-such-bucket-{bucket}/run", base, "bucket 'no-such-bucket-"),
        (f"s3://{bucket}/bad-creds", {**base, "AWS_SECRET_ACCESS_KEY": "wrong"}, "check the endpoint"),
        (f"s3://{bucket}/no-creds", {**no_creds, "HOME": str(tmp_path)}, "check the endpoint"),
        (f"s3://{bucket}/down", {**base, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, "check the endpoint"),
        (f"s3://{bucket}/x?colour=blue", base, "unknown S3 URI parameter(s): colour"),
        (f"s3://AKIA:secret@{bucket}/x", base, "not in the URI"),
    ]
    for uri, env, expected in cases:
        res = _simulate(uri, env, tmp_path)
        err = res.stderr.strip().splitlines()
        assert res.returncode != 0 and len(err) == 1 and err[0].startswith("error: "), (uri, res.stderr[-2000:])
        assert expected in err[0] and "secret" not in err[0] and redact_uri(uri).split("?")[0] in err[0], err[0]
    # Nothing was written under those prefixes, and no local folder of that name was made.
    fs = pafs.S3FileSystem(endpoint_override=s3_server["endpoint"].split("//")[1], scheme="http",
                           access_key=s3_server["env"]["AWS_ACCESS_KEY_ID"],
                           secret_key=s3_server["env"]["AWS_SECRET_ACCESS_KEY"], region="us-east-1")
    written = [i.path for i in fs.get_file_info(pafs.FileSelector(bucket, recursive=True))]
    assert not [p for p in written if p.split("/")[1] in ("run", "bad-creds", "no-creds", "down", "x")], written
    assert not (tmp_path / "s3:").exists()
    assert json.dumps(sorted(p.name for p in tmp_path.iterdir())) == "[]"


def test_one_writer_actor_serves_every_run_folder_of_a_pool(tmp_path):
    """The pool starts one writer (sim/runs/storage_server.py) beside its workers, not one per folder
    inside each job; here its body without Ray, behind a stand-in for the actor handle."""
    from concurrent.futures import Future

    from esc_eval.sim.runs.storage_server import ShippedStorage, StorageServer

    body = StorageServer()

    class _Handle:  # what ShippedStorage uses of an actor handle: handle.method.remote(...).future()
        def __getattr__(self, method):
            class _Remote:
                @staticmethod
                def remote(*args):
                    fut: Future = Future()
                    fut.set_result(getattr(body, method)(*args))
                    return type("Ref", (), {"future": lambda self: fut})()
            return _Remote

    a, b = (ShippedStorage(_Handle(), str(tmp_path / name)) for name in ("warm", "run"))
    a.write("dialogues/part-1.parquet", b"A")
    b.write("dialogues/part-1.parquet", b"B")
    assert (tmp_path / "warm/dialogues/part-1.parquet").read_bytes() == b"A"
    assert b.read("dialogues/part-1.parquet") == b"B" and b.list("dialogues") == ["dialogues/part-1.parquet"]
    body.append(a.location, "checkpoints/w.log", b"x\n")
    body.append(b.location, "checkpoints/w.log", b"y\n")  # same key, another folder: its own log
    body.close_appender(a.location, "checkpoints/w.log")
    body.close_appender(b.location, "checkpoints/w.log")
    assert a.read("checkpoints/w.log") == b"x\n" and b.read_from("checkpoints/w.log", 0) == b"y\n"
    b.delete("dialogues/part-1.parquet")
    assert not b.exists("dialogues/part-1.parquet") and a.exists("dialogues/part-1.parquet")


# `-o` and storage URIs, command by command.

def cli(*args, cwd, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "RAY_AUTH_MODE": "disabled", **(env or {})})


def test_judge_agreement_writes_its_scores_to_object_storage(shared_data, s3_uri, s3_server, tmp_path):
    release = shared_data / "esc-eval"
    cfg = tmp_path / "score.yaml"
    cfg.write_text("execution: {executor: local}\njudge: {method: generate}\n")
    proc = cli("analysis", "judge-agreement", "--dialogues", str(release / "dialogues"), "--scores",
               str(release / "scores"), "--judge", "fake/judge?score=3", "--config", str(cfg), "-o", s3_uri,
               "--n-boot", "0", cwd=tmp_path, env=s3_server["env"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["run_dir"] == s3_uri and not (tmp_path / "s3:").exists()
    scores = RunFolder(s3_uri, create=False).read("scores").to_pylist()
    assert len(scores) == 12 * 7 and {s["score"] for s in scores} == {3}


@pytest.mark.parametrize("args", [
    ("cards", "stats", "sample", "--out", "s3://bucket/stats"),
    ("bench", "annotate", "-o", "gs://bucket/bench.json"),
    ("serve", "write-config", "-o", "s3://bucket/serve.yaml"),
])
def test_a_command_that_writes_local_files_refuses_a_uri_in_one_line(args, tmp_path):
    proc = cli(*args, cwd=tmp_path)
    uri = next(a for a in args if "://" in a)
    assert proc.returncode == 1 and proc.stdout == ""  # the CLI's bad-input exit (cli/app.py)
    assert proc.stderr.strip() == f"error: {uri}: this command writes local files only; give a local path (simulate, " \
                                  "score, demo, report, compare and the analysis reports take storage URIs)"
    assert list(tmp_path.iterdir()) == []  # nothing written, no folder named after the scheme
