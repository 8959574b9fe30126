"""Ray's token authentication stays on everywhere but in tests: no production file of any kind
(Python, Dockerfiles, shell scripts, YAML: KubeRay manifests, launcher and Serve configs) turns it
off, and every image and cluster definition turns it on with a token from a Kubernetes Secret or a
mounted file. Each detector is shown to catch what it is for (planted files below)."""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
AUTH = "RAY_AUTH_MODE"
# Python, a shell line, a Dockerfile ENV/ARG: RAY_AUTH_MODE = disabled in any quoting
ASSIGNED_OFF = re.compile(r"""RAY_AUTH_MODE["']?\]?\s*[,:=]?\s*(?:=\s*)?["']?disabled\b""", re.I)


def production_files() -> list[Path]:
    """Tracked files outside tests/ (tests opt out of auth on purpose: tests/conftest.py)."""
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    names = out.stdout.split() if out.returncode == 0 else [str(p.relative_to(REPO)) for p in REPO.rglob("*")
                                                            if ".venv" not in p.parts and ".git" not in p.parts]
    return [REPO / n for n in names if not n.startswith("tests/") and (REPO / n).is_file()]


def kind(path: Path) -> str | None:
    name = path.name
    if name.endswith(".py"):
        return "python"
    if name.startswith("Dockerfile"):
        return "dockerfile"
    if name.endswith((".yaml", ".yml")):
        return "yaml"
    if name.endswith(".sh"):
        return "shell"
    return "shell" if _shebang_sh(path) else None  # e.g. .ci/run


def _shebang_sh(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            first = f.readline()
    except OSError:
        return False
    return first.startswith(b"#!") and (b"bash" in first or first.rstrip().endswith(b"/sh"))


def _walk_yaml(node, found: list[str], where: str) -> None:
    """Every way a YAML document can set the mode: a Kubernetes env entry, a mapping key (env_vars,
    runtime_env), KubeRay's authOptions, a string holding a shell line or another YAML document."""
    if isinstance(node, dict):
        if node.get("name") == AUTH and str(node.get("value", "")).lower() == "disabled":
            found.append(f"{where}: env {AUTH}=disabled")
        if str(node.get(AUTH, "")).lower() == "disabled":
            found.append(f"{where}: {AUTH}: disabled")
        auth = node.get("authOptions")
        if isinstance(auth, dict) and str(auth.get("mode", "")).lower() == "disabled":
            found.append(f"{where}: authOptions.mode disabled")
        for v in node.values():
            _walk_yaml(v, found, where)
    elif isinstance(node, list):
        for v in node:
            _walk_yaml(v, found, where)
    elif isinstance(node, str) and AUTH in node:
        if ASSIGNED_OFF.search(node):
            found.append(f"{where}: {node.strip()[:80]}")
        elif "\n" in node:
            try:
                _walk_yaml(yaml.safe_load(node), found, where)  # e.g. a RayService's serveConfigV2
            except yaml.YAMLError:
                pass


def _dockerfile_env(text: str) -> dict[str, str]:
    """The ENV (and ARG defaults) a Dockerfile sets: `ENV K=V K2=V2` and the legacy `ENV K V`."""
    joined = re.sub(r"\\\n\s*", " ", text)
    env: dict[str, str] = {}
    for line in joined.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) != 2 or parts[0].upper() not in ("ENV", "ARG"):
            continue
        words = shlex.split(parts[1], comments=True)
        if words and "=" not in words[0] and len(words) >= 2:
            env[words[0]] = " ".join(words[1:])
        else:
            env.update(w.split("=", 1) for w in words if "=" in w)
    return env


def auth_disabled(path: Path, text: str | None = None) -> list[str]:
    """Where `path` turns Ray's authentication off (empty: nowhere)."""
    text = path.read_text(encoding="utf-8", errors="replace") if text is None else text
    where = path.name
    k = kind(path)
    if AUTH not in text and "authOptions" not in text:
        return []
    if k == "yaml":
        found: list[str] = []
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError:
            docs = [text]
        for doc in docs:
            _walk_yaml(doc, found, where)
        return found
    if k == "dockerfile":
        env = _dockerfile_env(text)
        hits = [f"{where}: ENV {AUTH}={env[AUTH]}"] if env.get(AUTH, "").lower() == "disabled" else []
        return hits + [f"{where}: {m.group(0)}" for m in ASSIGNED_OFF.finditer(text) if not hits]
    if k in ("python", "shell"):
        return [f"{where}: {m.group(0)}" for m in ASSIGNED_OFF.finditer(text)]
    return []


def test_every_kind_of_production_file_is_read():
    kinds = {kind(p) for p in production_files()}
    assert {"python", "dockerfile", "yaml", "shell"} <= kinds, kinds  # .ci/run and bootstrap.sh are shell


def test_no_production_file_disables_ray_authentication():
    offenders = [hit for p in production_files() if kind(p) for hit in auth_disabled(p)]
    assert offenders == []


@pytest.mark.parametrize("name,text", [
    ("bad.py", 'os.environ["RAY_AUTH_MODE"] = "disabled"\n'),
    ("bad.py", 'env = {"RAY_AUTH_MODE": "disabled"}\n'),
    ("bad.py", 'os.environ.setdefault("RAY_AUTH_MODE", "disabled")\n'),
    ("Dockerfile.bad", "FROM x\nENV PIP_NO_CACHE_DIR=1 RAY_AUTH_MODE=disabled\n"),
    ("Dockerfile.bad", "FROM x\nENV RAY_AUTH_MODE disabled\n"),
    ("Dockerfile.bad", "FROM x\nRUN RAY_AUTH_MODE=disabled ray start --head\n"),
    ("bad.sh", "#!/usr/bin/env bash\nexport RAY_AUTH_MODE=disabled\nray start --head\n"),
    ("run", "#!/usr/bin/env bash\nRAY_AUTH_MODE=disabled esc-eval demo\n"),
    ("bad.yaml", "spec:\n  containers:\n  - env:\n    - {name: RAY_AUTH_MODE, value: disabled}\n"),
    ("bad.yaml", "runtime_env:\n  env_vars:\n    RAY_AUTH_MODE: disabled\n"),
    ("bad.yaml", "spec:\n  rayClusterSpec:\n    authOptions: {mode: disabled}\n"),
    ("bad.yaml", "head_start_ray_commands:\n  - RAY_AUTH_MODE=disabled ray start --head\n"),
    ("bad.yaml", "spec:\n  serveConfigV2: |\n    applications:\n    - runtime_env:\n        env_vars: {RAY_AUTH_MODE: disabled}\n"),
])
def test_the_guard_catches_each_way_of_turning_it_off(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    if name == "run":
        path.chmod(0o755)
    assert kind(path) is not None, name
    assert auth_disabled(path), f"{name}: not caught:\n{text}"


@pytest.mark.parametrize("name,text", [
    ("ok.py", 'os.environ["RAY_AUTH_MODE"] = "token"\n'),
    ("Dockerfile.ok", "FROM x\nENV RAY_AUTH_MODE=token\n"),
    ("ok.yaml", "env:\n- {name: RAY_AUTH_MODE, value: token}\n"),
])
def test_token_mode_is_not_flagged(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    assert auth_disabled(path) == []


# ------------------------------------------------------------------ turned on, with a token
def test_images_turn_token_auth_on():
    for path in sorted((REPO / "cluster" / "docker").glob("Dockerfile.*")):
        assert _dockerfile_env(path.read_text()).get(AUTH) == "token", path.name


def test_kuberay_clusters_take_the_token_from_a_secret():
    for path in sorted((REPO / "cluster" / "kuberay").glob("*.yaml")):
        spec = yaml.safe_load(path.read_text())["spec"]
        cluster = spec.get("rayClusterSpec") or spec.get("rayClusterConfig")
        auth = cluster.get("authOptions") or {}
        assert auth.get("mode") == "token" and auth.get("secretName"), f"{path.name}: authOptions {auth}"
        # the head's dashboard listens beyond localhost only because the token guards it
        assert cluster["headGroupSpec"]["rayStartParams"].get("dashboard-host") in ("0.0.0.0", "127.0.0.1")


def test_launcher_nodes_start_ray_with_a_mounted_token():
    cfg = yaml.safe_load((REPO / "cluster" / "launcher" / "gpu-cluster.yaml").read_text())
    assert f"--env {AUTH}=token" in cfg["docker"]["run_options"]
    mounts = cfg["file_mounts"]
    assert any(remote.endswith("/.ray/auth_token") for remote in mounts), mounts  # Ray's default token path
