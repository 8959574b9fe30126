"""analysis.bench: the analysis benchmarks behind `esc-eval bench ...`: the results viewer on a
large run (`viewer.py`), the annotation server under annotators (`annotation.py`), and the trust
pipeline (calibration, PPI, the report) on a fake run of the paper's size (`trust.py`), and seeker
fidelity on 8,500 simulated against 1,300 human dialogues (`fidelity.py`), and Bradley-Terry ratings
with their bootstrap over the paper's 655 cards and 14 targets (`pairwise.py`), one judge call per
dialogue against one per dimension: agreement and tokens (`rubric.py`), and the embedding model's
sentences per second (`embedding.py`).

What `esc-eval bench view|annotate|fidelity|pairwise|trust|embedding` run: commands.py.

Layer: the top of analysis."""
from esc_eval.analysis.bench.annotation import bench_annotation
from esc_eval.analysis.bench.commands import (bench_annotate_command, bench_embedding_command, bench_fidelity_command,
                                              bench_pairwise_command, bench_trust_command, bench_view_command)
from esc_eval.analysis.bench.embedding import bench_embedding
from esc_eval.analysis.bench.fidelity import bench_fidelity
from esc_eval.analysis.bench.pairwise import bench_pairwise
from esc_eval.analysis.bench.rubric import rubric_agreement
from esc_eval.analysis.bench.trust import bench_trust
from esc_eval.analysis.bench.viewer import bench_viewer

__all__ = ["bench_annotate_command", "bench_annotation", "bench_embedding", "bench_embedding_command", "bench_fidelity",
           "bench_fidelity_command", "bench_pairwise", "bench_pairwise_command", "bench_trust", "bench_trust_command",
           "bench_view_command", "bench_viewer", "rubric_agreement"]
