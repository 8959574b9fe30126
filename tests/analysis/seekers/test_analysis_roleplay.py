import math

import pandas as pd
import pytest

from esc_eval.analysis.results.loaders import AnalysisInputError, load_dialogues, load_official_dialogues
from esc_eval.analysis.seekers.roleplay import (
    character_breaks,
    emotion_trajectories,
    fidelity_summary,
    negativity,
    roleplay_markdown,
    roleplay_table,
    win_rates,
)

from analysis_testdata import ESC_DATA, dialogue_row, needs_shared_data


def test_roleplay_table_scales_0_2_to_0_10_and_formats_zh_en():
    rows = []
    for lang, s in (("en", 2), ("zh", 1)):
        for m in ["coherence", "fluency", "thematic_consistency", "completeness", "emotional_congruence", "humanoid"]:
            rows += [{"role_model": "ESC-Role", "language": lang, "metric": m, "score": s, "dialogue_id": f"{lang}{k}"}
                     for k in range(2)]
    rows[0]["score"] = 0  # en coherence: (0 + 2) / 2 -> 1 -> 5.0
    t = roleplay_table(pd.DataFrame(rows)).set_index(["role_model", "language"])
    assert t.loc[("ESC-Role", "en"), "Cohe."] == 5.0 and t.loc[("ESC-Role", "en"), "Flue."] == 10.0
    assert t.loc[("ESC-Role", "en"), "Average"] == pytest.approx((5 + 50) / 6)
    assert t.loc[("ESC-Role", "zh"), "n"] == 2
    md = roleplay_markdown(t.reset_index())
    assert "| ESC-Role | 5.0/5.0 | 5.0/10.0 |" in md


def test_roleplay_table_rejects_bad_input():
    with pytest.raises(AnalysisInputError, match="0-2"):
        roleplay_table(pd.DataFrame([{"role_model": "x", "language": "en", "metric": "fluency", "score": 3}]))
    with pytest.raises(AnalysisInputError, match="unknown role-play metrics"):
        roleplay_table(pd.DataFrame([{"role_model": "x", "language": "en", "metric": "style", "score": 1}]))


def test_win_rates_by_hand():
    c = pd.DataFrame({"agent_a": ["ESC-Role"] * 4 + ["GPT-4"], "agent_b": ["GPT-4"] * 4 + ["ESC-Role"],
                      "winner": ["a", "a", "tie", "b", "b"]})
    w = win_rates(c).set_index(["agent", "opponent"])
    # ESC-Role vs GPT-4: wins rows 1, 2 and 5 (as b), tie 1, loss 1 over 5 meetings
    assert w.loc[("ESC-Role", "GPT-4"), "n"] == 5
    assert w.loc[("ESC-Role", "GPT-4"), "win"] == pytest.approx(3 / 5)
    assert w.loc[("GPT-4", "ESC-Role"), "loss"] == pytest.approx(3 / 5)
    with pytest.raises(AnalysisInputError, match="winner must be"):
        win_rates(c.assign(winner="x"))


@pytest.mark.parametrize("text, sign", [
    ("I feel so sad and anxious", 1), ("I'm feeling much better, thank you", -1), ("I am not happy", 1),
    ("We went to the store", 0), ("我最近很焦虑，压力很大", 1), ("谢谢你，我现在好多了", -1), ("我不太开心", 1),
    ("我一点都不开心", 1),
])
def test_negativity_sign(text, sign):
    v = negativity(text)
    assert (v > 0) - (v < 0) == sign


def drifting(did, role_model, seeker):
    return dialogue_row(did, "target", role_model=role_model, seeker=seeker)


def test_character_breaks_and_drift_per_role_model(make_run):
    rows = [
        drifting("good1", "role-good", ["I'm so stressed about my exams.", "I still feel anxious and tired.",
                                         "Honestly I'm scared I'll fail.", "Thanks, but I'm still worried."]),
        drifting("good2", "role-good", ["My dog died and I'm heartbroken.", "I feel so alone.", "I cry every night."]),
        drifting("bad1", "role-bad", ["I'm so stressed about my exams.", "Thanks, I feel much better now!",
                                       "Great, I'm happy and relieved.", "As an AI language model, I can help you."]),
        drifting("bad2", "role-bad", ["I feel lonely.", "How can I help you today?", "I'm glad, all good."]),
        dialogue_row("failed", "target", role_model="role-bad", status="failed"),
    ]
    dialogues = load_dialogues(make_run("r", dialogues=rows))
    br = character_breaks(dialogues)
    assert sorted(zip(br["dialogue_id"], br["round"])) == [("bad1", 4), ("bad2", 2)]
    traj = emotion_trajectories(dialogues)
    assert traj[traj.dialogue_id == "bad1"]["negativity"].tolist()[:3] == [1.0, -1.0, -1.0]
    s = fidelity_summary(dialogues).set_index("role_model")
    assert s.loc["role-bad", "break_rate"] == 1.0 and s.loc["role-good", "break_rate"] == 0.0
    assert s.loc["role-bad", "breaks_per_turn"] == pytest.approx(2 / 7)
    assert s.loc["role-bad", "negativity_gone_share"] == 1.0 and s.loc["role-good", "negativity_gone_share"] == 0.0
    assert s.loc["role-bad", "mean_slope"] < s.loc["role-good", "mean_slope"] - 0.3
    assert s.loc["role-bad", "n_dialogues"] == 2  # the failed dialogue is not judged


def test_fidelity_with_too_short_dialogues_says_so(make_run):
    d = load_dialogues(make_run("r", dialogues=[drifting("x", "r1", ["I feel sad."])]))
    s = fidelity_summary(d).iloc[0]
    assert math.isnan(s["mean_slope"]) and "no slope" in s["note"] and "round 3" in s["note"]


def test_chinese_breaks():
    d = pd.DataFrame([{"dialogue_id": "z", "role_model": "r", "language": "zh", "status": "ok",
                       "turns": [{"speaker": "seeker", "text": "我很难过"},
                                 {"speaker": "seeker", "text": "作为一个AI助手，我理解你"},
                                 {"speaker": "assistant", "text": "作为AI，我在这里"}]}])
    br = character_breaks(d)
    assert br["round"].tolist() == [2]  # the assistant's own "作为AI" is not a seeker break


@needs_shared_data("dialogues")
def test_official_esc_role_dialogues_do_not_break_character():
    d = load_official_dialogues(ESC_DATA / "dialogues")
    assert len(character_breaks(d)) == 0
    s = fidelity_summary(d)
    assert set(s["language"]) == {"en", "zh"} and (s["n_dialogues"] == 6).all()


def test_slopes_are_least_squares_and_the_summary_is_quick_at_8500_dialogues():
    # The report runs the fidelity checks over every dialogue: at 8,500 dialogues (42,500 seeker
    # turns) a regression per dialogue and a scan of the lexicon per word took about 30 s.
    import time

    import numpy as np
    from scipy import stats

    from esc_eval.analysis.seekers.roleplay import _slopes

    rng = np.random.default_rng(0)
    words = ("sad anxious worried fine better happy not tired hopeless okay calm stressed lonely great "
             "work boss sleep family 我 很 焦虑 开心 不太 好多了").split()
    n = 8500
    rows = [{"dialogue_id": f"d{i}", "role_model": "esc-role", "language": "en", "status": "ok",
             "turns": [{"index": k, "speaker": "seeker" if k % 2 else "assistant",
                        "text": " ".join(rng.choice(words, 14))} for k in range(11)]} for i in range(n)]
    frame = pd.DataFrame(rows)
    t0 = time.perf_counter()
    s = fidelity_summary(frame)
    took = time.perf_counter() - t0
    assert int(s["n_dialogues"].iloc[0]) == n and int(s["seeker_turns"].iloc[0]) == 5 * n
    traj = emotion_trajectories(frame.head(200))
    slopes = _slopes(traj)
    for did, g in list(traj.groupby("dialogue_id"))[:50]:
        assert slopes[did] == pytest.approx(stats.linregress(g["round"], g["negativity"]).slope, abs=1e-12)
    assert s["mean_slope"].iloc[0] == pytest.approx(_slopes(emotion_trajectories(frame)).mean())
    assert took < 15, f"fidelity_summary took {took:.1f} s for {n} dialogues"


def test_lexicon_matching_keeps_prefixes_exact_words_and_negators():
    assert negativity("I am worried and anxious") == 1.0  # worr*, anxi* prefixes
    assert negativity("I feel fine and calmer") == -1.0  # exact 'fine', prefix calm*
    assert negativity("not happy") == 1.0 and negativity("not sad") == -1.0
    assert negativity("downtown finest") == 0.0  # 'down' and 'fine' are exact words, not prefixes
