"""The report sections and analysis commands with no planted check of their own, each with why:
those that print no verdict, flag or interval, and those that print some no planted scenario covers
yet (listed as unchecked in the validity table). Declared here for the report's own sections and the
commands of the CLI, whose modules parse options only; a section or command added without a check or a declaration fails
tests/analysis/checks/test_checks_registry.py."""
from __future__ import annotations

from esc_eval.analysis.checks.registry import declare_no_verdict

declare_no_verdict(("section:summary", "section:cards", "section:samples", "section:throughput", "section:health",
                    "section:distributions"),
                   "counts, configurations, timings, example dialogues and score shares: no verdict, flag or interval")
declare_no_verdict(("section:seeds",), "the spread of the seeds' Averages (sd, min, max) as measured: no interval, no verdict")
declare_no_verdict(("section:endings",), "how the dialogues ended, counted: no interval, no verdict")
declare_no_verdict(("section:roleplay", "command:analysis roleplay-fidelity"),
                   "heuristic rates of the seeker's character breaks and drift, and Table 1's means as rated: no "
                   "interval, no verdict")
declare_no_verdict(("command:analysis text-metrics",), "text metrics of the dialogues (BLEU, distinct-n, ...): no verdict")
declare_no_verdict(("command:analysis roleplay-export", "command:analysis roleplay-import"),
                   "write and read annotation sheets: nothing computed")
declare_no_verdict(("command:report",), "the report's sections, each checked or declared by its own section id")
declare_no_verdict(("section:safety", "command:analysis safety"),
                   "harm-weighted safety means with card-bootstrap intervals (the ratio bootstrap leaderboard-ci checks); "
                   "no planted scenario scores the safety rubric yet", prints_verdicts=True)
declare_no_verdict(("command:analysis correlate",),
                   "judge-human correlations with bootstrap CIs; no planted check of their coverage yet", prints_verdicts=True)
declare_no_verdict(("command:analysis judge-agreement",),
                   "a judge against the released ESC-RANK scores, with bootstrap CIs; needs the released scores, no planted "
                   "check yet", prints_verdicts=True)
declare_no_verdict(("command:analysis judge-accuracy",),
                   "Table 4's ACC and ACC_soft of trained adapters on their held-out split: point figures, checked by the "
                   "training job's evaluation, not against planted truth")
