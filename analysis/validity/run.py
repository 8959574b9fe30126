"""`esc-eval bench validity` in one call: the registered checks (every module that declares one is
imported here, so the registry is whole), measured on the runner's planted runs (bench.py), the
table printed and the JSON written (table.py)."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

from esc_eval.analysis.checks.registry import registered_checks
from esc_eval.analysis.validity.bench import Runner, collect, summarize
from esc_eval.analysis.validity.table import machine, markdown, stamp, unchecked_list, write_json

SIZES = (10, 25, 50, 100, 200, 400, 655)


def load_all_checks() -> None:
    """Import every module that declares checks (or declares it prints no verdict)."""
    import esc_eval.analysis.compare.paired  # noqa: F401
    import esc_eval.analysis.courses.sessions  # noqa: F401
    import esc_eval.analysis.pairwise.bradley_terry  # noqa: F401
    import esc_eval.analysis.panels.panel_checks  # noqa: F401
    import esc_eval.analysis.pairwise.position_bias  # noqa: F401
    import esc_eval.analysis.realism.distances  # noqa: F401
    import esc_eval.analysis.ranking.length_bias  # noqa: F401
    import esc_eval.analysis.ranking.rank_sets  # noqa: F401
    import esc_eval.analysis.ranking.self_preference_check  # noqa: F401
    import esc_eval.analysis.results.leaderboard  # noqa: F401
    import esc_eval.analysis.rounds.by_round  # noqa: F401
    import esc_eval.analysis.safety.emerging_checks  # noqa: F401
    import esc_eval.analysis.seekers.fidelity_report  # noqa: F401
    import esc_eval.analysis.seekers.seeker_levels  # noqa: F401
    import esc_eval.analysis.seekers.spoiled_section  # noqa: F401
    import esc_eval.analysis.seekerview.agreement  # noqa: F401
    import esc_eval.analysis.trust.calibration_runs  # noqa: F401
    import esc_eval.analysis.trust.human_leaderboard  # noqa: F401
    import esc_eval.analysis.validity.declared  # noqa: F401


def run_validity(runner: Runner, *, seeds: int = 100, first_seed: int = 0, sizes: tuple[int, ...] | None = None,
                 checks: list[str] | None = None, out: str | Path | None = None, n_boot: int = 1000,
                 people: str | Path | None = None,
                 say: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> str:
    """Measure the checks (all, or those named) over `seeds` replicates per variant at each size, the
    analyses' bootstraps at `n_boot` resamples; write the JSON to `out` (when given) and return the
    Markdown table. people: people's dialogues (ESConv format) for the people scenario (default: the
    shipped sample of analysis/seekers/data)."""
    from esc_eval.analysis.seekers.esconv import sample_file

    load_all_checks()
    sizes = tuple(sizes or SIZES)
    people = str(people or sample_file())
    known = {c.id: c for c in registered_checks()}
    unknown = sorted(set(checks or []) - set(known))
    if unknown:
        raise ValueError(f"--check {unknown[0]}: no such check; known: {', '.join(sorted(known))}")
    chosen = [known[c] for c in checks] if checks else list(known.values())
    if seeds < 1 or not sizes or min(sizes) < 1:
        raise ValueError("--seeds and --sizes: at least one seed and sizes of at least one card")
    started = time.perf_counter()
    outcomes = collect(runner, chosen, range(first_seed, first_seed + seeds), sorted(set(sizes)), say, n_boot, people)
    result = {"date": stamp(), "machine": machine(), "command": " ".join(["esc-eval", *sys.argv[1:]]),
              "seeds": seeds, "first_seed": first_seed, "sizes": sorted(set(sizes)), "n_boot": n_boot,
              "people": people,
              "seconds": time.perf_counter() - started,
              "checks": [summarize(c, outcomes[c.id]) for c in chosen], "unchecked": unchecked_list()}
    if out is not None:
        write_json(result, out)
    return markdown(result)


def bench_validity_command(make_runner: Callable[[str | Path | None], Runner], work: str | Path | None = None, *,
                           seeds: int = 100, sizes: list[int] | None = None, checks: list[str] | None = None,
                           out: str | Path | None = None, n_boot: int = 1000, people: str | Path | None = None) -> str:
    """`esc-eval bench validity` once its options are parsed: the planted runs' runner made in `work`
    (sim/bench/planted's planted_runner, which analysis may not import, comes in as `make_runner`),
    then run_validity's table."""
    return run_validity(make_runner(work), seeds=seeds, sizes=tuple(sizes) if sizes else None, checks=checks,
                        out=out, n_boot=n_boot, people=people)
