"""A dialogue as the official release writes it down: one line per turn, 'AI assistant：...' for the
assistant side (the opener included) and 'ESC-Role：...' for the seeker (full-width colons, as the
release has them). The official JSON (runs/official.py) stores these lines, and the judge's
official rendering (judging/prompts.py) is built from them."""
from __future__ import annotations

import re
from typing import Any, Iterable

ASSISTANT_PREFIX = "AI assistant："
SEEKER_PREFIX = "ESC-Role："
# The release writes "AI assitant：" (sic) in evaluate.py and "AI assistant：" elsewhere.
_PREFIX = re.compile(r"^\s*(AI assistant|AI assitant|ESC-Role)\s*[：:]\s*", re.S)


def official_lines(turns: Iterable[tuple[str, str]]) -> list[str]:
    """(speaker, text) turns as the official JSON stores them: 'AI assistant：...' / 'ESC-Role：...'."""
    return [(ASSISTANT_PREFIX if speaker == "assistant" else SEEKER_PREFIX) + text for speaker, text in turns]


def turns_as_lines(turns: list[dict[str, Any]]) -> list[str]:
    """Dialogue-row turns (dicts with speaker/text) as official lines."""
    return official_lines((t["speaker"], t["text"]) for t in turns)


def parse_official_line(line: Any) -> tuple[str, str] | None:
    """'AI assistant：text' -> ('assistant', 'text'); 'ESC-Role：text' -> ('seeker', 'text');
    None when the line has neither prefix (callers raise their own error naming the file)."""
    m = _PREFIX.match(line) if isinstance(line, str) else None
    if not m:
        return None
    return ("seeker" if m.group(1) == "ESC-Role" else "assistant"), line[m.end():]
