"""serve.app: the Ray Serve application. Its config and the Ray Serve LLM deployments built from
the registry (`application.py`: autoscaling, multi-LoRA, OpenAI routes, routers), the server class
with local adapters and vLLM's counts (`server.py`, `lora.py`), starting and watching it
(`deploy.py`), joining or starting Ray (`ray_cluster.py`), and counting live replicas
(`replica_meter.py`). Ray is imported inside the functions that need it.

Layer: above engines and registry; beside backends; the planner (plan) is the only room above it."""
from esc_eval.serve.app.application import ServeConfig, ServeModelConfig, build_app, write_serve_config
from esc_eval.serve.app.replica_meter import ReplicaMeter

__all__ = ["ReplicaMeter", "ServeConfig", "ServeModelConfig", "build_app", "write_serve_config"]
