"""analysis.seekers: the simulated seeker. Role-play fidelity (Table 1 ratings, Figure 3 win
rates, the lexicon's character breaks and emotional course, `roleplay.py`), the pairwise sheets
people fill for it (`roleplay_sheets.py`), and cooperative vs worst-case seekers: how much a
model's score and the ranking move with the seeker's kind (`seeker_kinds.py`). Whether the ranking
depends on the simulator (role model or strategy), with Kendall's tau and the pooled ranking
(`simulators.py`, sharing `rankings.py`'s bootstrap over cards with seeker_kinds.py), and the
report's count of the dialogues the simulator spoiled per target x role model (`spoiled_section.py`),
and how the dialogues ended when the seeker may end them (`endings.py`).
Is the simulated seeker like a person: real help-seekers read from ESConv's format (`esconv.py`,
with a shipped sample of our own writing in data/), per-dialogue features of both
(`fidelity_features.py`), distances with bootstrap intervals and directions (`fidelity.py`), and
the card, the report's section and the files (`fidelity_report.py`).

Layer: above annotation and results; beside trust."""
from esc_eval.analysis.seekers.roleplay import (character_breaks, emotion_trajectories, fidelity_summary,
                                                fidelity_summary_of_runs, negativity,
                                                roleplay_markdown, roleplay_table, win_rates)
from esc_eval.analysis.seekers.roleplay_sheets import (export_pairwise_sheets, import_pairwise_sheets, pairwise_sheets_of_runs,
                                                       win_rates_with_ci)
from esc_eval.analysis.seekers.seeker_kinds import (dialogue_values, ranking_shift, seeker_shift,
                                                    seekers_markdown, write_seekers)
from esc_eval.analysis.seekers.seeker_levels import (level_rankings, level_shift, levels_markdown, levels_section,
                                                     setting_values, write_levels)
from esc_eval.analysis.seekers.simulators import (simulator_rankings, simulator_values,
                                                  simulators_markdown, write_seeker_analyses, write_simulators)
from esc_eval.analysis.seekers.spoiled_section import spoiled_counts, spoiled_section
from esc_eval.analysis.seekers.endings import ending_counts, endings_section
from esc_eval.analysis.seekers.esconv import HumanSeekers, read_human_seekers, sample_file
from esc_eval.analysis.seekers.fidelity import FidelityResult, compare_features, judge_check
from esc_eval.analysis.seekers.fidelity_features import dialogue_features, round_frame
from esc_eval.analysis.seekers.fidelity_report import (fidelity_card, fidelity_markdown, seeker_fidelity,
                                                       seeker_fidelity_section, write_fidelity)

__all__ = ["fidelity_summary_of_runs", "pairwise_sheets_of_runs", "level_rankings", "level_shift", "levels_markdown", "levels_section", "setting_values", "write_levels",
           "ending_counts", "endings_section", "character_breaks", "dialogue_values", "emotion_trajectories", "export_pairwise_sheets", "fidelity_summary",
           "import_pairwise_sheets", "negativity", "ranking_shift", "roleplay_markdown",
           "roleplay_table", "seeker_shift", "seekers_markdown", "win_rates", "win_rates_with_ci", "write_seekers",
           "simulator_rankings", "simulator_values", "simulators_markdown",
           "spoiled_counts", "spoiled_section", "write_seeker_analyses", "write_simulators",
           "FidelityResult", "HumanSeekers", "compare_features", "dialogue_features", "fidelity_card",
           "fidelity_markdown", "judge_check", "read_human_seekers", "round_frame", "sample_file", "seeker_fidelity",
           "seeker_fidelity_section", "write_fidelity"]
