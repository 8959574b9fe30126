"""courses (beyond the paper): a card run as a course of several sessions, the same seeker and target
meeting again and again (PsychEval's 6-10 sessions per case; VERA-MH's multi-session runs). A course
as a pure async function of its inputs, each session one dialogue and the between-session step
between them: the seeker's update and the target's memory (course.py); their texts, en and zh, from
sim/data/prompts/sessions.yaml (texts.py); the judge's continuity prompt and each later session's
previous one (continuity.py). The simulation job runs a course as one work item
(sim/jobs/simulation_courses.py: a row per session, resumable per session and per turn).

Layer: the domain, above judging/ (its rubric frame) and dialogue/ (one session is a dialogue);
imports serve (the chat-model seam) and sim/prompt_files.py: nothing of runs, pool or jobs."""
from esc_eval.sim.courses.continuity import continuity_messages, earlier_sessions
from esc_eval.sim.courses.course import (CARD, MEMORY_MODES, ROLE_MODEL, Call, CourseSetup, Memory, Session,
                                         run_course)
from esc_eval.sim.courses.texts import (check_languages, memory_from_notes, memory_from_transcripts, seeker_card,
                                        session_opener, summary_messages, transcript, update_messages, with_memory)

__all__ = [
    "CARD", "MEMORY_MODES", "ROLE_MODEL", "Call", "CourseSetup", "Memory", "Session", "check_languages",
    "continuity_messages", "earlier_sessions", "memory_from_notes", "memory_from_transcripts", "run_course",
    "seeker_card", "session_opener", "summary_messages", "transcript", "update_messages", "with_memory",
]
