"""analysis.courses (beyond the paper): courses of several sessions (`esc-eval simulate` with
`sessions` > 1): each target's score session by session, continuity from session 2 on, and whether
its support degrades or improves across a course, with its report section (`sessions.py`;
`session_change_verdict` is the verdict, a plain function of paired first and last scores).

Layer: beside trust, seekers, panels, pairwise, rounds and safety; reads results."""
from esc_eval.analysis.courses.sessions import (cluster_mean_ci, memory_left_out, session_change, session_change_verdict,
                                                session_table, session_values, sessions_section)

__all__ = ["cluster_mean_ci", "memory_left_out", "session_change", "session_change_verdict", "session_table",
           "session_values", "sessions_section"]
