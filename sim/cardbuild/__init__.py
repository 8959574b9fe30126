"""Role-card construction (ESC-Eval Section 2.2, Appendix A): read the source datasets, extract
cards with an LLM (Figures 6/7), filter (Figure 8), remove near-duplicates, classify into the
Table 9 taxonomy, run the two-annotator + reviewer correction rules (A.2), and report the
paper's statistics (Tables 6 and 9, Figure 5); optionally (beyond the paper) label each card's
crisis-risk level from its source (stages/risk.py).

Rooms: sources/ (the records and the dataset readers), stages/ (each step's prompt and reply parser),
review/ (human annotation and the statistics); here: the config, the resumable pipeline, its stage
runner and per-stage checkpoints, and what `esc-eval cards build|stats|validate|export` do (commands.py). The shipped example config, keyword data and samples are configs/,
data/ and samples/ (README.md says how to build).

Layer: beside sim/jobs/ (an LLM job with its own checkpoints); imports serve, sim/cards/, sim/runs/
(row ids, atomic writes) and sim/prompt_files.py: nothing of the pool or the jobs.
Inside: commands > pipeline > runner > review | stages > checkpoint | config > sources."""
# Every name of the rooms, as when they were modules of this package.
from esc_eval.sim.cardbuild import review, sources, stages
from esc_eval.sim.cardbuild.sources import *  # noqa: F403
from esc_eval.sim.cardbuild.stages import *  # noqa: F403
from esc_eval.sim.cardbuild.review import *  # noqa: F403
from esc_eval.sim.cardbuild.config import CardBuildConfig, CardBuildConfigError, load_build_config, parse_build_config
from esc_eval.sim.cardbuild.pipeline import BuildResult, build_cards, build_cards_async, read_sources
from esc_eval.sim.cardbuild.commands import (build_cards_command, cards_export_command, cards_stats_command,
                                             cards_validate_command)

__all__ = [
    "BuildResult", "CardBuildConfig", "build_cards_command", "cards_export_command", "cards_stats_command",
    "cards_validate_command", "CardBuildConfigError", "build_cards", "build_cards_async", "load_build_config",
    "parse_build_config", "read_sources",
    *sources.__all__, *stages.__all__, *review.__all__,
]
