"""Planted runs through the real jobs: for one scenario, variant and replicate seed, the cards split
into chunks (one run folder each), and on each chunk `simulate`, then what the scenario asks for
(`score`, a panel of judges in one pass; `pairwise`; `score --by-round`; people's scores), every job
with the local executor on planted models, so a 655-card run takes seconds. A size is the first
chunks together: the run folders of 100 cards are those of 10 and 50 and the next 40, as a lab that
ran the first 100 cards would have them; the analyses read them as they read any runs.

`planted_runner(work)` is what analysis/validity takes (it cannot import sim): called with (scenario,
variant, seed, sizes, people) it yields, per size, a plain mapping: scenario, variant, size, seed, paths
(by kind: runs, rounds, humans, people), truth (truth.py) and effects (in words); the folders are
removed after (keep=True keeps them).
"""
from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any, Iterator

from esc_eval.sim.bench.planted.cards import (people_cards, people_pool, split_people, synthetic_cards, write_chunk_cards,
                                              write_replay)
from esc_eval.sim.bench.planted.people import write_people_scores
from esc_eval.sim.bench.planted.scenarios import PEOPLE_SHARE, Plan, plan
from esc_eval.sim.bench.planted.truth import scenario_truth

LOCAL = {"executor": "local", "concurrency": 256, "flush_rows": 1_000_000, "turn_checkpoints": False,
         "call_cache": "off", "max_attempts": 1}


def _execution():
    from esc_eval.sim.pool.config import ExecutionConfig

    return ExecutionConfig(**LOCAL)


def _chunks(sizes: list[int]) -> list[tuple[int, int]]:
    bounds = [0, *sorted(set(sizes))]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def reply_words(run: Path) -> dict[str, float]:
    """Each dialogue's words per reply as its target planted them (the tags' w)."""
    from esc_eval.serve.backends import planted_math as pm
    from esc_eval.sim.runs.runfolder import RunFolder

    out = {}
    for d in RunFolder(str(run), create=False).iter_rows("dialogues", columns=["dialogue_id", "turns", "status"]):
        if d["status"] == "ok":
            view = pm.dialogue_view(pm.read_tags(" ".join(t["text"] for t in d["turns"] if t["speaker"] == "assistant")))
            if view["n"]:
                out[d["dialogue_id"]] = view["w"]
    return out


def spoiled_cards(p: Plan, seed: int, cards: list) -> list[str]:
    """The cards whose dialogues the plan's seeker spoils in replicate `seed`."""
    from esc_eval.serve.backends import planted_math as pm
    from esc_eval.serve.backends.planted import PlantedModel, spoils

    seeker = PlantedModel("seeker", **{**p.role, "seed": seed})
    return [c.id for c in cards if spoils(seeker, pm.card_key(c.problem))]


def run_chunk(p: Plan, seed: int, cards_file: Path, folder: Path, replay: Path | None = None) -> dict[str, Path]:
    """One chunk's run folder(s), every job the plan asks for; returns them by kind."""
    from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.judging.panel import PanelConfig, PanelJudge
    from esc_eval.sim.pairwise.config import PairwiseConfig
    from esc_eval.sim.pairwise.job import run_pairwise
    from esc_eval.sim.runs.by_round import write_round_prefixes
    from esc_eval.sim.runs.runfolder import RunFolder

    ex = _execution()
    run = folder / "run"
    run_sim = SimulationConfig(cards=str(cards_file), role=p.role_ref(seed, str(replay) if replay else None),
                               targets=p.target_refs(seed), strategies=p.strategies, execution=ex)
    from esc_eval.sim.jobs.simulation import run_simulation

    run_simulation(run_sim, str(run))
    out = {"runs": run}
    if p.judges:
        judges = [p.judge_config(n, o, seed) for n, o in p.judges.items()]
        cfg = (ScoringConfig(panel=PanelConfig(judges=[PanelJudge(judge=j, family=p.families.get(j.name)) for j in judges]),
                             execution=ex) if len(judges) > 1 else ScoringConfig(judge=judges[0], execution=ex))
        run_scoring(cfg, str(run))
    if p.pairwise is not None:
        run_pairwise(PairwiseConfig(judge=p.judge_config("P", p.pairwise, seed), execution=ex), str(run))
    if p.by_round is not None:
        rounds = folder / "rounds"
        write_round_prefixes(RunFolder(str(run), create=False), RunFolder(str(rounds)), 1)
        run_scoring(ScoringConfig(judge=p.judge_config("R", p.by_round, seed), execution=ex), str(rounds))
        out["rounds"] = rounds
    if p.people:
        out["humans"] = write_people_scores(run, folder / "people.jsonl", seed, PEOPLE_SHARE)
    return out


@contextlib.contextmanager
def planted_runs(work: str | Path, scenario: str, variant: str, seed: int, sizes: list[int],
                 people: str | Path | None = None, keep: bool = False) -> Iterator[dict[int, dict[str, Any]]]:
    """The runs of one replicate at every size (the module doc); the people scenario needs `people`
    (an ESConv-format file) and caps its sizes at half its people."""
    p = plan(scenario, variant)
    if not p.targets:  # "drawn": its checks draw their own planted data; nothing to run
        yield {s: {"scenario": scenario, "variant": variant, "size": s, "seed": seed, "paths": {}, "truth": {},
                   "effects": dict(p.effects)} for s in sorted(set(sizes))}
        return
    root = Path(work) / scenario / variant / f"seed{seed}"
    if root.exists():
        shutil.rmtree(root)
    extra: dict[str, Any] = {}
    replay = None
    if p.replay:
        if people is None:
            raise ValueError(f"planted scenario {scenario}: give the people's dialogues (an ESConv-format file)")
        replayed, reference = split_people(people_pool(people), seed)
        sizes = sorted({min(s, len(replayed)) for s in sizes} - {0})
        cards = people_cards(replayed)
        replay = write_replay(replayed, root / "replay.json")
        extra = {"reference_ids": reference, "spoiled_cards": spoiled_cards(p, seed, cards)}
    else:
        cards = synthetic_cards(max(sizes))
    truth = {**scenario_truth(scenario, variant), **extra}
    try:
        kinds: dict[str, list[str]] = {}
        words: dict[str, float] = {}
        out: dict[int, dict[str, Any]] = {}
        for i, (lo, hi) in enumerate(_chunks(sizes)):
            folder = root / f"chunk{i:02d}"
            made = run_chunk(p, seed, write_chunk_cards(cards[lo:hi], folder / "cards.json"), folder, replay)
            for kind, path in made.items():
                kinds.setdefault(kind, []).append(str(path))
            if p.judges:
                words.update(reply_words(made["runs"]))
            paths = {k: list(v) for k, v in kinds.items()}
            if people is not None and p.replay:
                paths["people"] = [str(people)]
            out[hi] = {"scenario": scenario, "variant": variant, "size": hi, "seed": seed, "paths": paths,
                       "truth": {**truth, "reply_words": dict(words)} if words else truth, "effects": dict(p.effects)}
        yield out
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def planted_runner(work: str | Path | None = None, keep: bool = False):
    """The runner analysis/validity takes: runner(scenario, variant, seed, sizes, people) -> a context
    manager yielding {size: runs} (planted_runs); `work` None: a temporary folder, removed at exit."""
    if work is None:
        import atexit
        import tempfile

        work = tempfile.mkdtemp(prefix="esc-eval-validity-")
        atexit.register(shutil.rmtree, work, True)

    def runner(scenario: str, variant: str, seed: int, sizes: list[int], people: str | Path | None = None):
        return planted_runs(work, scenario, variant, seed, sizes, people=people, keep=keep)

    return runner
