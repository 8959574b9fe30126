"""Every verdict has its check: each registered report section and each analysis command names a
planted-truth check (analysis/checks/registry.py) or declares, with its reason, that it prints none;
and the floors (floors.py) withhold a verdict from fewer cards than its check shows it needs."""
from __future__ import annotations

import pytest

from esc_eval.analysis.checks import floors, registry
from esc_eval.analysis.checks.floors import gate, read_floors
from esc_eval.analysis.checks.registry import Outcome, PlantedRuns, VerdictCheck, true_ranks, unchecked, within


def _everything() -> list[str]:
    """Every report section and every analysis command (the visible ones), as the registry names them."""
    import typer.main

    import esc_eval.analysis.report.report  # noqa: F401 - registers every report section
    from esc_eval.analysis.results.section_registry import registered_sections
    from esc_eval.analysis.validity.run import load_all_checks
    from esc_eval.cli.results.analysis import app

    load_all_checks()
    commands = [f"command:analysis {n}" for n, c in typer.main.get_command(app).commands.items() if not c.hidden]
    return [f"section:{s.id}" for s in registered_sections()] + commands + [
        "command:leaderboard", "command:report", "command:compare"]


def test_every_section_and_analysis_command_names_its_check_or_why_it_has_none():
    covers = _everything()
    assert len(covers) > 30 and unchecked(covers) == []
    # every check reads a scenario the planted runner makes, and covers something that exists
    from esc_eval.sim.bench.planted.scenarios import SCENARIOS

    real = set(covers) | {"command:leaderboard --humans", "command:leaderboard --exclude-spoiled"}
    for check in registry.registered_checks():
        assert check.scenario in SCENARIOS and set(check.covers) <= real, check.id


def test_an_analysis_added_without_a_check_fails_the_rule():
    from esc_eval.analysis.results import section_registry

    section_registry.register_section("made-up", 99_999, lambda c: {})
    try:
        assert unchecked(_everything()) == ["section:made-up"]
    finally:
        section_registry._REGISTRY.pop("made-up")
    with pytest.raises(ValueError, match="neither what its flag claims"):
        VerdictCheck("x", "X", "f", ("section:x",), "duo", "gap", lambda r: Outcome())
    with pytest.raises(ValueError, match="covers"):
        VerdictCheck("x", "X", "f", ("x",), "duo", "gap", lambda r: Outcome(), flag="y")
    with pytest.raises(ValueError, match="reason"):
        registry.declare_no_verdict(("section:x",), " ")


def test_what_the_checks_compute_alike():
    assert true_ranks({"A": 2.0, "B": 2.0, "C": 1.0}) == {"A": 1.5, "B": 1.5, "C": 3.0}
    assert within(1.0, 2.0, 2.0) is True and within(1.0, 2.0, 2.1) is False and within(float("nan"), 2.0, 1.5) is None
    runs = PlantedRuns.from_runner({"scenario": "duo", "variant": "null", "size": 10, "seed": 3,
                                    "paths": {"runs": ["/a", "/b"]}, "truth": {"x": 1}}, n_boot=50)
    assert runs.path("runs") == ["/a", "/b"] and runs.n_boot == 50
    assert runs.once("k", lambda: [1]) is runs.once("k", lambda: [2])
    with pytest.raises(KeyError, match="no 'humans'"):
        runs.path("humans")


FLOORS = read_floors({"checks": [
    {"id": "rounds-change", "unit": "cards per target", "effect_text": "a quarter point from round 4",
     "by_size": [{"size": 10}, {"size": 50}, {"size": 655}], "valid_from": 50, "power_from": 200,
     "below": "coverage 80% (nominal 95%) at 10 cards"},
    {"id": "self-preference", "by_size": [{"size": 10}], "valid_from": None, "power_from": None,
     "failure": "false positives 50% (nominal 5%) at 655 cards"}]})


def test_a_verdict_from_fewer_cards_than_its_check_needs_is_withheld_or_says_so():
    shown, note = gate("rounds-change", 4, "degrades", finds=True, floors=FLOORS)
    assert shown == "n/a" and "withheld from 4 cards" in note and "holds from 50" in note and "coverage 80%" in note
    assert ";" not in note  # a note goes into rows' notes, which are joined with "; "
    assert gate("rounds-change", 100, "degrades", finds=True, floors=FLOORS) == ("degrades", "")
    shown, note = gate("rounds-change", 100, "holds", finds=False, floors=FLOORS)
    assert shown == "holds" and "too few to find a quarter point from round 4 (80% power from 200)" in note
    assert gate("rounds-change", 300, "holds", finds=False, floors=FLOORS) == ("holds", "")
    shown, note = gate("self-preference", 655, "rank change", finds=True, floors=FLOORS)
    assert shown == "rank change" and note.startswith("unreliable") and "50%" in note
    assert gate("never-run", 3, "biased", finds=True, floors=FLOORS) == ("biased", "")


def test_the_published_floors_name_registered_checks():
    from esc_eval.analysis.validity.run import load_all_checks

    load_all_checks()
    published = floors.shipped()
    assert floors.published() == {}  # the suite runs with ESC_EVAL_FLOORS=off (tests/conftest.py)
    known = {c.id for c in registry.registered_checks()}
    assert set(published) <= known
    for f in published.values():
        assert f.valid_from is None or f.valid_from >= f.smallest, f
