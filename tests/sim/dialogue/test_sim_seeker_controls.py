"""Seekers who are hard to help as controls with levels (sim/dialogue/seeker_controls.py): every level
past the first changes the role prompt in both languages, strategies with controls are one canonical
string, the presets are settings of the controls, and bad input is refused in one line."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from esc_eval.serve.config import ConfigError, load_config
from esc_eval.sim.cards.card import sample_cards
from esc_eval.sim.dialogue.prompts import (opener, preset_controls, resolve_strategy, roleplay_system_prompt,
                                           strategy_kind, strategy_kinds)
from esc_eval.sim.dialogue.seeker_controls import (SeekerControlError, controls, expand_strategies, join_strategy,
                                                   parse_sweep, split_strategy, strategy_levels)
from esc_eval.sim.jobs.config import SimulationConfig

REPO = Path(__file__).resolve().parents[3]
LEVELS = [(c, level) for c, levels in controls().items() for level in levels[1:]]


def test_five_controls_each_from_the_cooperative_seeker_up():
    table = controls()
    assert list(table) == ["engagement", "resistance", "expression", "disclosure", "volatility"]
    assert {c: levels[0] for c, levels in table.items()} == {
        "engagement": "high", "resistance": "none", "expression": "direct", "disclosure": "open", "volatility": "stable"}
    assert all(len(levels) == 3 for levels in table.values())


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("control,level", LEVELS)
def test_each_level_changes_the_role_prompt_in_both_languages(control, level, language):
    card = sample_cards(language)[0]
    base = roleplay_system_prompt(card.text, language, "zero_shot")
    with_level = roleplay_system_prompt(card.text, language, f"zero_shot+{control}={level}")
    assert with_level.startswith(base) and with_level != base  # the strategy's text kept, the level's after it
    added = with_level[len(base):].strip()
    assert added.startswith("How you behave in this conversation:" if language == "en" else "你在这次对话中的表现：")
    if language == "zh":
        assert re.search(r"[\u4e00-\u9fff]{10}", added.split("：", 1)[1])
    else:
        assert not re.search(r"[\u4e00-\u9fff]", added) and len(added.split()) > 15
    # the first level of the control is the strategy as it is; the opener is the strategy's
    first = controls()[control][0]
    assert roleplay_system_prompt(card.text, language, f"zero_shot+{control}={first}") == base
    assert opener(language, f"zero_shot+{control}={level}") == opener(language, "zero_shot")


def test_levels_of_one_control_differ_and_combine_in_the_files_order():
    card = sample_cards("en")[0]
    mild = roleplay_system_prompt(card.text, "en", "official+resistance=mild")
    strong = roleplay_system_prompt(card.text, "en", "official+resistance=strong")
    assert mild != strong and "a little doubtful" in mild and "sceptical" in strong
    both = roleplay_system_prompt(card.text, "en", "official+volatility=high+engagement=low", seeker_stop=True)
    i_low, i_high, i_stop = both.index("little energy"), both.index("mood swings"), both.index("<END:resolved>")
    assert i_low < i_high < i_stop  # engagement before volatility (the file's order), the stop signal last


def test_canonical_spelling_and_levels():
    assert join_strategy("official", {"volatility": "high", "engagement": "low"}) == "official+engagement=low+volatility=high"
    assert join_strategy("official", {"resistance": "none"}) == "official"  # a first level is the strategy as it is
    assert split_strategy("cot+disclosure=guarded") == ("cot", {"disclosure": "guarded"})
    assert strategy_levels({"disclosure": "guarded"}) == {"engagement": "high", "resistance": "none", "expression": "direct",
                                                          "disclosure": "guarded", "volatility": "stable"}


def test_the_presets_are_settings_of_the_controls():
    assert preset_controls() == {"resistant": {"resistance": "strong"}, "low_engagement": {"engagement": "low"},
                                 "volatile": {"volatility": "high"}}
    card = sample_cards("zh")[0]
    for preset, chosen in preset_controls().items():
        (control, level), = chosen.items()
        assert roleplay_system_prompt(card.text, "zh", preset) == roleplay_system_prompt(card.text, "zh", f"zero_shot+{control}={level}")
        assert strategy_kind(preset) == "worst_case"
    assert resolve_strategy("resistant+engagement=low") == ("zero_shot", {"resistance": "strong", "engagement": "low"})
    assert strategy_kind("official") == strategy_kind("official+resistance=none") == "cooperative"
    assert strategy_kind("official+expression=indirect") == "worst_case" and strategy_kind("hostile") is None
    assert {k for k, v in strategy_kinds().items() if v == "worst_case"} == {"resistant", "low_engagement", "volatile"}


def test_a_sweep_runs_every_strategy_at_every_combination():
    sweep = {"resistance": ["none", "strong"], "engagement": ["high", "low"]}
    assert expand_strategies(["official"], sweep) == [
        "official", "official+engagement=low", "official+resistance=strong", "official+engagement=low+resistance=strong"]
    # a control the strategy sets (itself or through its preset) keeps its level
    assert expand_strategies(["low_engagement", "cot+resistance=mild"], sweep, preset_controls()) == [
        "low_engagement", "low_engagement+resistance=strong", "cot+resistance=mild", "cot+engagement=low+resistance=mild"]
    cfg = SimulationConfig(strategies=["official", "official+resistance=none"], controls={"volatility": ["stable", "high"]})
    assert cfg.seeker_strategies == ["official", "official+volatility=high"]  # two spellings of one seeker: one
    assert parse_sweep(["resistance=none,strong", "engagement=low"]) == {"resistance": ["none", "strong"], "engagement": ["low"]}


@pytest.mark.parametrize("overrides,needle", [
    ({"strategies": ["official+resistance=extreme"]}, "seeker control 'resistance' has no level 'extreme'; its levels: none, mild, strong"),
    ({"strategies": ["official+stubborn=high"]}, "unknown seeker control 'stubborn'; controls: engagement, resistance"),
    ({"strategies": ["official+resistance"]}, "'resistance' is not control=level"),
    ({"strategies": ["official+resistance=mild+resistance=strong"]}, "sets the seeker control 'resistance' twice"),
    ({"strategies": ["volatile+volatility=moderate"]}, "volatile already sets the seeker control 'volatility'"),
    ({"strategies": ["hostile+resistance=mild"]}, "unknown strategy 'hostile'; known: official"),
    ({"controls": {"resistance": ["none", "extreme"]}}, "seeker control 'resistance' has no level 'extreme'"),
    ({"controls": {"resistance": []}}, "seeker control 'resistance': no level given"),
    ({"controls": {"resistance": ["none", "none"]}}, "lists a level twice"),
])
def test_bad_controls_are_refused_at_the_door(overrides, needle):
    with pytest.raises(ConfigError) as e:
        load_config(None, SimulationConfig, overrides)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_the_command_refuses_a_level_in_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "simulate", "-t", "fake/echo", "--role", "fake/seeker",
                           "-n", "1", "--control", "resistance=none,extreme", "-o", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip() == (
        "error: seeker control 'resistance' has no level 'extreme'; its levels: none, mild, strong")
    assert not out.exists()
    with pytest.raises(SeekerControlError, match="expected control=level"):
        parse_sweep(["resistance"])


def test_the_command_sweeps_levels_into_rows(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "esc_eval.cli", "simulate", "-t", "fake/echo", "--role", "fake/seeker",
                           "-n", "2", "--rounds", "1", "--strategy", "official", "--strategy", "resistant",
                           "--control", "engagement=high,low", "-o", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["items"] == 8 and result["failed"] == 0 and result["rows_checked"] == 8
    import pyarrow.parquet as pq

    rows = pq.read_table(out / "dialogues").to_pylist()
    assert sorted({r["strategy"] for r in rows}) == ["official", "official+engagement=low", "resistant",
                                                    "resistant+engagement=low"]
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows)
