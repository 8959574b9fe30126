"""analysis.safety (beyond the paper): crisis safety per model, apart from the seven dimensions: the
harm-weighted summary with intervals and its report section (`crisis.py`).

Layer: beside trust, seekers, panels and pairwise; reads results."""
from esc_eval.analysis.safety.crisis import (HARM_WEIGHTS, harm_weighted_summary, load_safety, safety_frame,
                                             safety_markdown, write_safety)

__all__ = ["HARM_WEIGHTS", "harm_weighted_summary", "load_safety", "safety_frame", "safety_markdown", "write_safety"]
