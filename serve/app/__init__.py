"""serve.app: the Ray Serve application. Its config and the Ray Serve LLM deployments built from
the registry (`application.py`: autoscaling, multi-LoRA, OpenAI routes, routers), the server class
with local adapters and vLLM's counts (`server.py`, `lora.py`), starting and watching it
(`deploy.py`), joining or starting Ray (`ray_cluster.py`), and counting live replicas
(`replica_meter.py`), and what `esc-eval serve up|status|down|write-config` do (`commands.py`). Ray is
imported inside the functions that need it.

Layer: above engines and registry; beside backends; the planner (plan) is the only room above it."""
from esc_eval.serve.app.application import ServeConfig, ServeModelConfig, build_app, write_serve_config
from esc_eval.serve.app.commands import serve_config_from_options, serve_down, serve_status, serve_up, serve_write_config
from esc_eval.serve.app.replica_meter import ReplicaMeter

__all__ = ["serve_config_from_options", "serve_down", "serve_status", "serve_up", "serve_write_config", "ReplicaMeter", "ServeConfig", "ServeModelConfig", "build_app", "write_serve_config"]
