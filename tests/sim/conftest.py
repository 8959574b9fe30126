"""A real S3-protocol server for the run-folder storage tests: moto's server mode, started once per
session in its own process, with authentication on (after the set-up calls, every request must be
signed with the IAM key made here; an unsigned or wrongly signed one is refused, as on AWS)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

S3_SETUP_CALLS = 4  # create_bucket, create_user, put_user_policy, create_access_key: unsigned, then auth is on


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3_server():
    """{endpoint, bucket, env}: env holds the credentials and endpoint a process needs (AWS_*)."""
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("moto.server", reason="moto[server] is not installed (a dev dependency)")
    port = _free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(S3_SETUP_CALLS)}
    # This interpreter's moto (a `moto_server` on PATH may be another Python's, another version).
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        admin = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="AKIASETUP00000000000",
                     aws_secret_access_key="setup")
        bucket = f"esc-eval-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", **admin).create_bucket(Bucket=bucket)
        iam = boto3.client("iam", **admin)
        iam.create_user(UserName="esc-eval")
        iam.put_user_policy(UserName="esc-eval", PolicyName="s3", PolicyDocument=(
            '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}'))
        key = iam.create_access_key(UserName="esc-eval")["AccessKey"]
        creds = {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
                 "AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
        yield {"endpoint": endpoint, "bucket": bucket, "env": creds, "port": port}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """This process talks to the test's S3 server with its credentials (as AWS_* variables)."""
    for k, v in s3_server["env"].items():
        monkeypatch.setenv(k, v)
    return s3_server


@pytest.fixture
def s3_uri(s3_env):
    """A fresh prefix in the test bucket."""
    return f"s3://{s3_env['bucket']}/run-{uuid.uuid4().hex[:8]}"
