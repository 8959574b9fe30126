"""analysis/courses/sessions.py: scores by session and the change across a course on rows made by
hand (checked by hand), and the verdict against planted truth: no change planted is flagged at about
the nominal 5 %, a planted drop is flagged."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from esc_eval.analysis.courses.sessions import (memory_left_out, session_change, session_change_verdict, session_table,
                                                session_values, sessions_section)
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES


def frames(labels: dict[tuple[str, int], int], continuity: dict[tuple[str, int], int] | None = None,
           memory: str = "summary") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(course, session) -> the label every one of the seven got; continuity the same for its own rows."""
    dialogues, scores = [], []
    for (course, k), label in labels.items():
        did = f"{course}-s{k}"
        dialogues.append({"dialogue_id": did, "course_id": course, "session": k, "card_id": f"card-{course}",
                          "target_memory": memory, "status": "ok", "memory_sessions": k - 1})
        for dim in DIMENSION_NAMES:
            scores.append({"dialogue_id": did, "language": "en", "target_model": "T", "judge": "j", "dimension": dim,
                           "score": float(label)})
    for (course, k), label in (continuity or {}).items():
        scores.append({"dialogue_id": f"{course}-s{k}", "language": "en", "target_model": "T", "judge": "j",
                       "dimension": "continuity", "score": float(label)})
    return pd.DataFrame(dialogues), pd.DataFrame(scores)


def test_scores_by_session_and_the_change_checked_by_hand():
    # four courses: three go 3 -> 2 -> 1, one 2 -> 2 -> 1; continuity 2 then 1 on every course
    labels = {**{(f"c{i}", k): 4 - k for i in range(3) for k in (1, 2, 3)},
              ("c3", 1): 2, ("c3", 2): 2, ("c3", 3): 1}
    cont = {(f"c{i}", k): 4 - k for i in range(4) for k in (2, 3)}
    dialogues, scores = frames(labels, cont)
    values = session_values(dialogues, scores)
    assert len(values) == 12 and values["continuity"].notna().sum() == 8
    table = session_table(values, n_boot=500).set_index("session")
    assert table.loc[1, "mean"] == pytest.approx((3 * 75 + 50) / 4) and table.loc[3, "mean"] == 25.0
    cont_table = session_table(values, "continuity", n_boot=0).set_index("session")
    assert list(cont_table.index) == [2, 3] and cont_table.loc[2, "mean"] == 50.0 and np.isnan(cont_table.loc[2, "ci_low"])
    (change,) = session_change(values, n_boot=500).to_dict("records")
    assert change["change"] == pytest.approx((-50 * 3 - 25) / 4) and change["verdict"] == "degrades"
    assert (change["first_session"], change["last_session"], change["target_memory"]) == (1, 3, "summary")
    section = sessions_section(dialogues, scores, 200, 0)
    assert [b["caption"] for b in section["blocks"] if b["kind"] == "table"] == [
        "Change from the first session to the last", "Score by session (mean of the seven dimensions x 25)",
        "Continuity by session (x 25)"]


def test_single_sessions_and_unscored_rows_are_left_out():
    dialogues, scores = frames({("c0", 1): 3, ("c0", 2): 1})
    single = pd.DataFrame([{"dialogue_id": "single", "course_id": None, "session": None, "card_id": "x",
                            "target_memory": None, "status": "ok", "memory_sessions": None}])
    scores.loc[0, "score"] = np.nan  # a parse failure: left out, never a zero
    extra = scores.iloc[:7].assign(dialogue_id="single")
    values = session_values(pd.concat([dialogues, single]), pd.concat([scores, extra]))
    assert values["course_id"].tolist() == ["c0", "c0"] and values["value"].tolist() == [75.0, 25.0]
    assert session_values(single, extra).empty
    # one card: no interval, no verdict
    assert session_change(values, n_boot=200)["verdict"].tolist() == ["n/a"]


def test_memory_that_did_not_fit_is_counted():
    dialogues, _ = frames({("c0", 1): 2, ("c0", 2): 2, ("c0", 3): 2}, memory="transcripts")
    assert memory_left_out(dialogues) == 0
    dialogues.loc[dialogues["session"] == 3, "memory_sessions"] = 1  # session 1 did not fit session 3's context
    assert memory_left_out(dialogues) == 1


def _courses(rng: np.random.Generator, cards: int, drop: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each card's course: its level (a card effect, sd 12 on the x 25 scale), then its first and last
    session's scores with noise (sd 15 each), the last lowered by `drop`."""
    level = rng.normal(60, 12, cards)
    return level + rng.normal(0, 15, cards), level - drop + rng.normal(0, 15, cards), np.arange(cards)


def test_planted_truth_no_change_is_flagged_at_about_the_nominal_rate_and_a_drop_is_flagged():
    rng = np.random.default_rng(54)
    reps, cards = 500, 40
    null = [session_change_verdict(*_courses(rng, cards, 0.0), n_boot=400, seed=i)["verdict"] for i in range(reps)]
    flagged = sum(v != "holds" for v in null) / reps
    # nominal 5 % two-sided (2.5 % each way); 500 replicates: 0.05 + 3 sd is 0.079 (1,000 gave 0.051 and 0.058)
    assert flagged <= 0.08, flagged
    reps = 200
    # a drop of 12 on the x 25 scale (about half a score point; the paired sd is 15 x sqrt 2 = 21.2): a paired
    # test on 40 cards has power Phi(12 / 21.2 x sqrt 40 - 1.96) = 0.95; the percentile bootstrap, a little less
    drop = [session_change_verdict(*_courses(rng, cards, 12.0), n_boot=400, seed=i)["verdict"] for i in range(reps)]
    assert sum(v == "degrades" for v in drop) / reps >= 0.88
    assert all(v != "improves" for v in drop)


def test_the_verdict_refuses_mismatched_inputs():
    with pytest.raises(ValueError, match="differ in length"):
        session_change_verdict([1.0, 2.0], [1.0], ["a", "b"])
