"""sim.bench.loops: `esc-eval bench sim|score|decode`: our simulation and scoring loops against the
release's (reference_loop.py: the one-dialogue-at-a-time HF `generate` loop; score.py's loop, in
scoring.py), what batching buys on this CPU (decode.py), scoring at the users' scale (scale.py), and
one judge call per dialogue against one per dimension on the same dialogues (rubric.py)."""
from esc_eval.sim.bench.loops.reference_loop import HFReference
from esc_eval.sim.bench.loops.scale import PAPER_DIALOGUES, measure_scale, measure_service, project_gpu, scale_dialogues
from esc_eval.sim.bench.loops.scoring import bench_score, run_bench
from esc_eval.sim.bench.loops.decode import bench_decode
from esc_eval.sim.bench.loops.rubric import bench_rubric_scoring
from esc_eval.sim.bench.loops.simulation import bench_embedded, bench_fake, bench_memory, run_bench_sim

__all__ = [
    "HFReference", "PAPER_DIALOGUES", "bench_decode", "bench_rubric_scoring", "bench_embedded", "bench_fake", "bench_memory", "bench_score",
    "measure_scale", "measure_service", "project_gpu", "run_bench", "run_bench_sim", "scale_dialogues",
]
