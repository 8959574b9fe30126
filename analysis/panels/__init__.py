"""panels: several judges over the same dialogues (a score run scored with `--judge` repeated, or a
panel in the scoring config). The panel's score per dialogue and dimension by a rule (panel_scores.py,
who sits on it: panel_spec.py), the judges' agreement (agreement.py), each judge's leaderboard beside
the panel's and self-preference (judge_boards.py), the tables and the command's files (panel_tables.py,
panel_runs.py) and the report's section (panel_section.py)."""
from esc_eval.analysis.panels.agreement import alpha_from_coincidence, alpha_ordinal, panel_agreement, unit_coincidences
from esc_eval.analysis.panels.judge_boards import JudgeBoards, judge_boards, self_preference_pairs
from esc_eval.analysis.panels.panel_runs import panel_command, panel_of_runs
from esc_eval.analysis.panels.panel_scores import PanelScores, panel_scores
from esc_eval.analysis.panels.panel_spec import (RULES, PanelJudge, PanelSpec, panel_spec, parse_assignments,
                                                 parse_weights, target_families)
from esc_eval.analysis.panels.panel_tables import PanelAnalysis, analyse_panel, panel_data, panel_markdown

__all__ = ["panel_command", "JudgeBoards", "PanelAnalysis", "PanelJudge", "PanelScores", "PanelSpec", "RULES", "alpha_from_coincidence",
           "alpha_ordinal", "analyse_panel", "judge_boards", "panel_agreement", "panel_data", "panel_markdown",
           "panel_of_runs", "panel_scores", "panel_spec", "parse_assignments", "parse_weights", "self_preference_pairs",
           "target_families", "unit_coincidences"]
