"""analysis.checks: every verdict, flag and interval an analysis prints, declared with its check
against planted truth (registry.py: register_check next to the analysis, declare_no_verdict for what
prints none), and how many cards each needs by its published check (floors.py: a verdict from fewer
says so, or is withheld as n/a).

Layer: the floor of analysis; imports nothing of it. The checks' runs and the bench that measures
them are analysis/validity/ (the top) and sim/bench/planted/ (the planted runs)."""
from esc_eval.analysis.checks.floors import (FLOORS_ENV, NOT_SHOWN, Floor, caveat, floor_of, gate, gated, measuring, published,
                                             read_floors, shipped)
from esc_eval.analysis.checks.registry import (NULL, PLANTED, NoVerdict, Outcome, PlantedRuns, VerdictCheck,
                                               declare_no_verdict, get_check, held, no_verdicts, register_check,
                                               registered_checks, true_ranks, unchecked, within)

__all__ = ["FLOORS_ENV", "shipped", "NOT_SHOWN", "NULL", "PLANTED", "Floor", "NoVerdict", "Outcome", "PlantedRuns", "VerdictCheck",
           "caveat", "declare_no_verdict", "floor_of", "gate", "gated", "get_check", "held", "measuring", "no_verdicts", "published",
           "read_floors", "register_check", "registered_checks", "true_ranks", "unchecked", "within"]
