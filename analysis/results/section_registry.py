"""The report's sections, registered: each package adds its own (the paper's in analysis/report,
seekers, trust, safety, ...) with where it goes and when it appears, and the report builds what is
registered, in order, from one context. A new analysis registers a section; nothing edits a list
by position.

Orders are spaced by 100 (the paper's sections) so a section can go between two without moving
others. The sections registered, as `id order` (tests/analysis/results/test_analysis_section_registry.py
fails when this list and the registry part):
summary 100, leaderboard 200, human-scores 250, self-preference 260, panels 270, pairwise 280, rank-sets 285,
judge-length 290, by-category 300, seeds 400, distributions 500, comparisons 600, seekers 700,
seeker-levels 710, simulators 800, spoiled 900, endings 950, rounds 960, sessions 965, safety 1000, emerging_risk 1010,
health 1100,
throughput 1200, roleplay 1300, seeker_fidelity 1350, seeker_realism 1360, seeker_view 1370, cards 1400,
samples 1500.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from esc_eval.analysis.results.blocks import Section


@dataclass
class ReportContext:
    """What the section builders read (built once by analysis/report/report.py)."""

    paths: list  # the run folders (or official JSON)
    out: Path  # the report's folder
    manifests: dict  # run folder -> manifest
    dialogues: pd.DataFrame
    scores: pd.DataFrame  # the seven dimensions' rows, labels as stored
    all_scores: pd.DataFrame  # with the rows beyond them (safety, distress)
    board: pd.DataFrame  # what the tables read: labels, or expected scores under score_kind "expected"
    leaderboard: pd.DataFrame  # Table 2 (analysis/results/leaderboard.py), built once
    groups: dict[str, str] = field(default_factory=dict)
    n_boot: int = 1000
    seed: int = 0
    n_samples: int = 3
    n_resamples: int = 2000
    score_kind: str = "label"
    judge_line: str = ""  # the line beside Table 2 when a judge has no human scores ("" if none)
    humans: Any = None  # analysis.trust.human_scores.HumanScores, or None
    human_seekers: Any = None  # analysis.seekers.esconv.HumanSeekers, or None
    embedding: Any = None  # analysis.realism.EmbeddingOptions: compare the seekers with human_seekers by embedding too
    pairwise: pd.DataFrame | None = None  # pairwise verdict rows (analysis.results.loaders.load_pairwise), or None
    windowed_line: str = ""  # how many judgments were made on a window (analysis/judgments/windowed.py), "" if none read

    @property
    def fig_dir(self) -> Path:
        return self.out / "figures"


Builder = Callable[[ReportContext], "Section | list[Section]"]


@dataclass(frozen=True)
class SectionSpec:
    id: str
    order: int
    build: Builder
    when: Callable[[ReportContext], bool]


_REGISTRY: dict[str, SectionSpec] = {}


def register_section(id: str, order: int, build: Builder, when: Callable[[ReportContext], bool] | None = None) -> None:
    """Add (or replace) the section `id` at `order`; `when` says whether a report has it (default: always).
    A builder may return several sections (they keep its place, in its order)."""
    taken = {s.order: s.id for s in _REGISTRY.values() if s.id != id}
    if order in taken:
        raise ValueError(f"report section {id!r}: order {order} is {taken[order]!r}'s")
    _REGISTRY[id] = SectionSpec(id, order, build, when or (lambda ctx: True))


def registered_sections() -> list[SectionSpec]:
    return sorted(_REGISTRY.values(), key=lambda s: s.order)


def build_sections(ctx: ReportContext) -> list[Section]:
    out: list[Section] = []
    for spec in registered_sections():
        if spec.when(ctx):
            built = spec.build(ctx)
            out += built if isinstance(built, list) else [built]
    return out
