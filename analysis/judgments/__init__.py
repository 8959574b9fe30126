"""analysis.judgments: what one judgment row is read as, before any table: expected scores from the
judge's P(0..4) in place of its label (`expected_scores.py`), the judgments made on a window of a
dialogue too long for the judge, counted and kept, left out or kept alone (`windowed.py`, the one home
of the `--windowed` filter), and which rubric mode scored a judge's rows (`rubric_mode.py`: one call
per dialogue, said beside its numbers).

Layer: the floor of analysis; imports sim's data definitions and no other room."""
from esc_eval.analysis.judgments.expected_scores import check_score_kind, expected_scores, score_kind_note
from esc_eval.analysis.judgments.rubric_mode import RUBRIC_MODE_NOTES, rubric_mode_of
from esc_eval.analysis.judgments.windowed import with_windowed, windowed_line

__all__ = ["RUBRIC_MODE_NOTES", "check_score_kind", "expected_scores", "rubric_mode_of", "score_kind_note", "windowed_line",
           "with_windowed"]
