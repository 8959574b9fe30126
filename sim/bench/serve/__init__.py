"""sim.bench.serve: `esc-eval bench serve`: ESC-Eval's workloads (dialogues, judge items, random
prompts) against any OpenAI-compatible serving stack, measured and reported the way vLLM's
`vllm bench serve` does, with router comparisons on our own Serve app and vLLM's own client as the
cross-check."""
from esc_eval.sim.bench.serve.client import BenchInputError, MeasuredModel, RequestRecord, StreamingClient, check_endpoint
from esc_eval.sim.bench.serve.workloads import DialogueUnit, JudgeUnit, RandomUnit, Unit
from esc_eval.sim.bench.serve.metrics import level_metrics, parse_slos
from esc_eval.sim.bench.serve.load import LevelRun, LoadShape, run_level
from esc_eval.sim.bench.serve.routing import ROUTING_MODES, deploy_routing_app, routing_config
from esc_eval.sim.bench.serve.vllm_cli import vllm_cli
from esc_eval.sim.bench.serve.bench import ServeBenchConfig, bench_serve

__all__ = [
    "BenchInputError", "DialogueUnit", "JudgeUnit", "LevelRun", "LoadShape", "MeasuredModel", "ROUTING_MODES",
    "RandomUnit", "RequestRecord", "ServeBenchConfig", "StreamingClient", "Unit", "bench_serve", "check_endpoint",
    "deploy_routing_app", "level_metrics", "parse_slos", "routing_config", "run_level", "vllm_cli",
]
