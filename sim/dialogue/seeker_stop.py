"""The seeker ends the conversation itself (beyond the paper): the stop signal its role prompt
defines, read from its replies.

A simulated user that can end a conversation (tau2-bench's user simulator emits a stop token when
its goal is met or lost) ends it the way a person does, not at a fixed cut. With `seeker_stop` on,
the role prompt (sim/data/prompts/roleplay.yaml `seeker_stop`, en and zh) tells the seeker to end a
message with <END:resolved> when it has been helped, or <END:gave_up> when it wants to leave. A
seeker reply carrying a mark is kept without it, with the finish reason "seeker_end:<reason>", and
the dialogue ends after that turn. The paper's protocol has it off: five rounds, always.
"""
from __future__ import annotations

import re
from typing import Literal, Sequence

from esc_eval.sim.prompt_files import load_prompt_file

EndReason = Literal["resolved", "gave_up"]
END_REASONS: tuple[EndReason, ...] = ("resolved", "gave_up")
FINISH_PREFIX = "seeker_end:"  # a seeker turn's finish reason when it ended the dialogue
# The marks as small models write them: any case, spaces inside, full-width brackets or colon (zh), "gave up".
_MARK = re.compile(r"[<\uff1c]\s*END\s*[:\uff1a]\s*(resolved|gave[\s_-]?up)\s*[>\uff1e]", re.IGNORECASE)


def stop_marks() -> dict[EndReason, str]:
    return {"resolved": "<END:resolved>", "gave_up": "<END:gave_up>"}


def stop_instruction(language: str) -> str:
    """The text appended to the role prompt in `language` (ValueError when it has none)."""
    table = load_prompt_file("roleplay").get("seeker_stop") or {}
    if language not in table:
        raise ValueError(f"seeker_stop: no stop signal for language {language!r} (roleplay.yaml `seeker_stop` has "
                         f"{', '.join(table) or 'none'})")
    return table[language].strip()


def find_end(text: str) -> tuple[str, EndReason | None]:
    """The reply without its end marks, and the first mark's reason (None: the seeker goes on)."""
    match = _MARK.search(text)
    if match is None:
        return text, None
    word = match.group(1).lower()
    reason: EndReason = "resolved" if word == "resolved" else "gave_up"
    return re.sub(r"[ \t]{2,}", " ", _MARK.sub("", text)).strip(), reason


def end_finish_reason(reason: EndReason) -> str:
    return f"{FINISH_PREFIX}{reason}"


def seeker_end(turns: Sequence) -> EndReason | None:
    """Why the seeker ended these turns (Turn objects or turn rows), or None when it did not."""
    if not turns:
        return None
    last = turns[-1]
    finish = last.get("finish_reason") if isinstance(last, dict) else getattr(last, "finish_reason", None)
    speaker = last.get("speaker") if isinstance(last, dict) else getattr(last, "speaker", None)
    if speaker != "seeker" or not finish or not str(finish).startswith(FINISH_PREFIX):
        return None
    reason = str(finish)[len(FINISH_PREFIX):]
    return reason if reason in END_REASONS else None  # type: ignore[return-value]
