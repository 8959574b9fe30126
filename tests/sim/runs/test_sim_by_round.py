"""sim/runs/by_round.py: a dialogue cut after each round into prefix rows of their own, and the run
folder that holds them (resumable, refused where it would mix or overwrite)."""
from __future__ import annotations

import pytest

from esc_eval.sim.runs.by_round import ROUND_PREFIX, prefix_id, round_prefixes, split_prefix_id, write_round_prefixes
from esc_eval.sim.runs.records import dialogue_row
from esc_eval.sim.runs.runfolder import RunFolder


def row(did: str, rounds: int, seeker_last: bool = False, status: str = "ok") -> dict:
    turns = [{"index": 0, "speaker": "assistant", "text": "OPENER", "prompt_tokens": 0, "completion_tokens": 0,
              "latency_s": 0.0, "finish_reason": "stop"}]
    for k in range(1, rounds + 1):
        for speaker in ("seeker", "assistant"):
            turns.append({"index": len(turns), "speaker": speaker, "text": f"{speaker} {k}", "prompt_tokens": 10,
                          "completion_tokens": 2, "latency_s": 0.1, "finish_reason": "stop"})
    if seeker_last:  # the seeker's last word, unanswered (it ended the dialogue)
        turns.append({**turns[-2], "index": len(turns), "text": "bye", "finish_reason": "seeker_end:resolved"})
    return dialogue_row(run_id="r", dialogue_id=did, card_id=f"card-{did}", language="en", target_model="t",
                        role_model="s", strategy="official", seed=0, turns=turns, n_turns=len(turns), status=status,
                        termination_reason="completed", attempts=1, end_reason="still_going", end_round=rounds)


def test_each_round_ends_with_the_targets_reply_and_keeps_the_dialogues_columns():
    prefixes = round_prefixes(row("d1", 5))
    assert [p["dialogue_id"] for p in prefixes] == [prefix_id("d1", k) for k in range(1, 6)] == [f"d1@r0{k}" for k in range(1, 6)]
    for k, p in enumerate(prefixes, start=1):
        assert p["n_turns"] == len(p["turns"]) == 1 + 2 * k and p["turns"][-1]["text"] == f"assistant {k}"
        assert p["end_round"] == k and p["termination_reason"] == ROUND_PREFIX and p["card_id"] == "card-d1"
        assert p["prompt_tokens"] == 20 * k and split_prefix_id(p["dialogue_id"]) == ("d1", k)
    assert [p["end_round"] for p in round_prefixes(row("d1", 5), every=2)] == [2, 4, 5]  # and the whole dialogue
    # a dialogue its seeker ended: its last round is its last reply; the unanswered farewell is no round
    assert [p["end_round"] for p in round_prefixes(row("d2", 3, seeker_last=True))] == [1, 2, 3]
    assert split_prefix_id("d1") is None and split_prefix_id("a@b@r12") == ("a@b", 12)
    with pytest.raises(ValueError, match="--every 0"):
        round_prefixes(row("d1", 5), every=0)


def test_the_folder_gets_only_what_it_lacks_and_refuses_what_would_mix(tmp_path):
    src = RunFolder(tmp_path / "run")
    src.write_part("dialogues", [row("d1", 4), row("d2", 2), row("d3", 3, status="failed")])
    out = RunFolder(tmp_path / "rounds")
    first = write_round_prefixes(src, out, every=1)
    assert (first["dialogues"], first["prefixes"], first["written"]) == (2, 6, 6)  # failed dialogues are not cut
    src.write_part("dialogues", [row("d4", 1)])
    again = write_round_prefixes(src, out, every=1)
    assert (again["prefixes"], again["written"]) == (7, 1)
    assert sorted(d["dialogue_id"] for d in out.iter_rows("dialogues"))[:2] == ["d1@r01", "d1@r02"]
    with pytest.raises(ValueError, match="made with --every 1"):
        write_round_prefixes(src, out, every=2)
    with pytest.raises(ValueError, match="a run folder of their own"):
        write_round_prefixes(src, RunFolder(tmp_path / "run"), every=1)
    empty = RunFolder(tmp_path / "empty")
    empty.write_part("dialogues", [row("x", 2, status="failed")])
    with pytest.raises(ValueError, match="no completed dialogue"):
        write_round_prefixes(empty, RunFolder(tmp_path / "none"), every=1)
