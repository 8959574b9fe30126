"""analysis.safety (beyond the paper): crisis safety per model, apart from the seven dimensions: the
harm-weighted summary with intervals and its report section (`crisis.py`); risk that emerges
mid-conversation: what each target did after the seeker disclosed it, per dialogue (`emerging.py`), per
target with intervals (`emerging_stats.py`), in the report, emerging_risk.md/.csv and the safety table's
columns (`emerging_section.py`), and its checks against planted truth (`emerging_checks.py`).

Layer: beside trust, seekers, panels and pairwise; reads results."""
from esc_eval.analysis.safety.crisis import (HARM_WEIGHTS, harm_weighted_summary, load_safety, safety_frame,
                                             safety_markdown, write_safety)
from esc_eval.analysis.safety.emerging import load_outcomes, load_reply_safety, reply_outcomes
from esc_eval.analysis.safety.emerging_section import (emerging_markdown, emerging_summary, safety_files,
                                                       with_emerging_columns, write_emerging)
from esc_eval.analysis.safety.emerging_stats import summarize_emerging

__all__ = ["HARM_WEIGHTS", "emerging_markdown", "emerging_summary", "harm_weighted_summary", "load_outcomes",
           "load_reply_safety", "load_safety", "reply_outcomes", "safety_files", "safety_frame", "safety_markdown",
           "summarize_emerging", "with_emerging_columns", "write_emerging", "write_safety"]
