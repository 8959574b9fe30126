"""Scores by round (beyond the paper): a dialogue's prefixes, each ending with the target's reply
of one round, as dialogue rows of their own in a run folder of their own, which the judge then
scores as it scores any dialogue (`esc-eval score --by-round`).

The rule: the judge rates the dialogue so far, from the opener up to and including the target's
k-th reply, on the paper's rubric (and safety when asked), so the score at round k is what the
paper's judge says of the support given up to there. A prefix row keeps its dialogue's columns
(card, categories, target, language, strategy, the seeker's spoiled flags) with its own id
`<dialogue id>@rNN`, the turns cut after round k, `end_round` = k and termination_reason
`round_prefix`; the leaderboard splits by it (`--by round`) and analysis/rounds/by_round.py reads
the change over the rounds. `every` keeps every N-th round (and always the last: the whole dialogue).
The same prefix rows serve the per-reply rule (BY_ROUND_RULES): a judge with reads 'reply' rates
each prefix's last reply in the context before it, under its own judge id.
"""
from __future__ import annotations

import os
import re
from typing import Any, Iterable, Iterator

from esc_eval.sim.runs.records import DIALOGUE_SCHEMA, dialogue_row
from esc_eval.sim.runs.runfolder import RunFolder
from esc_eval.sim.runs.storage import is_uri

ROUND_PREFIX = "round_prefix"  # termination_reason of a prefix row
# How the judge reads a prefix (`score --by-round` | `--by-reply`): the dialogue so far as a whole, or its last reply
# in the context before it (sim/judging/config.py `reads`); the first is the default.
BY_ROUND_RULES = ("prefix", "reply")
_ID = re.compile(r"^(?P<dialogue>.+)@r(?P<round>\d+)$")


def prefix_id(dialogue_id: str, k: int) -> str:
    return f"{dialogue_id}@r{k:02d}"


def split_prefix_id(prefix: str) -> tuple[str, int] | None:
    """(the dialogue's id, the round) of a prefix id; None for any other id."""
    m = _ID.match(prefix)
    return (m.group("dialogue"), int(m.group("round"))) if m else None


def replies(turns: list[dict[str, Any]]) -> int:
    """The target's replies after the opener (turn 0): one per full round."""
    return sum(1 for t in turns[1:] if t["speaker"] == "assistant")


def round_prefixes(row: dict[str, Any], every: int = 1) -> list[dict[str, Any]]:
    """The prefix rows of one completed dialogue row (see the module doc)."""
    if every < 1:
        raise ValueError(f"--every {every}: give a number of rounds of at least 1")
    turns = list(row["turns"])
    last = replies(turns)
    out = []
    for k in range(1, last + 1):
        if k % every and k != last:
            continue
        cut = turns[:1 + 2 * k]  # the opener, then k rounds of a seeker turn and the target's reply
        out.append({**row, "dialogue_id": prefix_id(row["dialogue_id"], k), "turns": cut, "n_turns": len(cut),
                    "termination_reason": ROUND_PREFIX, "end_round": k, "end_reason": None,
                    "prompt_tokens": sum(t.get("prompt_tokens") or 0 for t in cut),
                    "completion_tokens": sum(t.get("completion_tokens") or 0 for t in cut)})
    return out


def iter_prefixes(dialogues: Iterable[dict[str, Any]], every: int, skip: set[str]) -> Iterator[dict[str, Any]]:
    names = set(DIALOGUE_SCHEMA.names)
    for row in dialogues:
        if row["status"] == "ok":
            for p in round_prefixes(row, every):
                if p["dialogue_id"] not in skip:
                    yield dialogue_row({k: v for k, v in p.items() if k in names})


def write_round_prefixes(source: RunFolder, out: RunFolder, every: int = 1, batch: int = 2000) -> dict[str, Any]:
    """The prefix rows of `source`'s completed dialogues into `out` (those it lacks: re-running adds
    only what is new); its manifest names the source and the rule. Returns the counts."""
    same = (source.location == out.location if is_uri(source.location) or is_uri(out.location)
            else os.path.realpath(source.location) == os.path.realpath(out.location))
    if same:
        raise ValueError(f"{out}: the prefixes need a run folder of their own (--out), not the run itself")
    before = out.read_manifest().get("by_round") or {}
    if before and before.get("every") != every:
        raise ValueError(f"{out}: made with --every {before.get('every')}; use the same, or another --out")
    have = {d["dialogue_id"] for d in out.iter_rows("dialogues", columns=["dialogue_id"])}
    written, pending = 0, []
    dialogues = sum(1 for d in source.iter_rows("dialogues", columns=["status"]) if d["status"] == "ok")
    for p in iter_prefixes(source.iter_rows("dialogues"), every, have):
        pending.append(p)
        if len(pending) >= batch:
            out.write_part("dialogues", pending)
            written, pending = written + len(pending), []
    if pending:
        out.write_part("dialogues", pending)
        written += len(pending)
    if not have and not written:
        raise ValueError(f"{source}: no completed dialogue to cut into rounds")
    info = {"source": str(source.location), "every": every, "dialogues": dialogues, "prefixes": len(have) + written}
    out.update_manifest(run_id=f"by_round:{source.read_manifest().get('run_id', 'run')}", by_round=info)
    return {**info, "written": written}
