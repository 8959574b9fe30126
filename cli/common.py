"""What every command module shares: the global flags, JSON output, the exit status, door checks of
options several commands take."""
from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

# --debug / --verbose of the root command (set by cli.app's callback before any command runs).
STATE = {"debug": False, "verbose": False}


def emit(data: Any, out: Path | None = None) -> None:
    """Results go to stdout as JSON (progress and errors go to stderr); with `out`, the same text also
    goes to that file (a benchmark's -o)."""
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    print(text)


def exit_for(verdict: tuple[int, str | list[str]] | None, prefix: str = "error: ") -> None:
    """After the result is printed: exit non-zero with its line(s) on stderr when the command's verdict
    says so (a job that stopped on its budget or failed past its threshold: sim/driver/outcome.py, the
    rows staying for a resume; a benchmark whose phases failed, or that Ctrl-C stopped)."""
    if verdict is not None:
        code, lines = verdict
        sys.stderr.write("".join(f"{prefix}{line}\n" for line in ([lines] if isinstance(lines, str) else lines)))
        raise typer.Exit(code)


# A storage URI after Path() folded its "//": s3://bucket/x -> s3:/bucket/x (a local name like that is no one's)
_FOLDED_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/(?!/)")


def local_out(value: Path | None) -> Path | None:
    """The callback of an `--out` that writes local files only: a storage URI is refused in one line
    (else Path would make a folder named `s3:` here)."""
    if value is not None and _FOLDED_URI.match(str(value)):
        raise typer.BadParameter(f"{re.sub(r':/', '://', str(value), count=1)}: this command writes local files only; "
                                 "give a local path (simulate, score, demo, report, compare and the analysis reports "
                                 "take storage URIs)")
    return value


def check_rule(panel: Optional[str]) -> Optional[str]:
    """--panel's rule, checked at the door (None: no panel)."""
    from esc_eval.sim.judging.panel import PANEL_RULES

    if panel is not None and panel not in PANEL_RULES:
        raise typer.BadParameter(f"--panel {panel!r}: a rule is one of {', '.join(PANEL_RULES)}")
    return panel


def renamed(old: str, new: str, command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` under its old name for one release: registered hidden (neither --help nor the CLI
    reference lists it), it says the new name on stderr and runs. typer reads the parameters through
    functools.wraps (inspect.signature and get_type_hints follow __wrapped__)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        sys.stderr.write(f"note: `esc-eval {old}` is now `esc-eval {new}`; the old name goes in the next release\n")
        return command(*args, **kwargs)

    return run


# Options several commands take (report, leaderboard, compare).
Humans = Annotated[Optional[str], typer.Option("--humans", help="Human scores to anchor the means on (PPI): an annotate store (annotations.sqlite, or a run folder holding one), filled annotation sheets (a folder of annotate_*.csv or a CSV) or annotate export's table.")]
Study = Annotated[Optional[str], typer.Option("--study", help="Only this study of the annotate store (default: every study).")]
OneAnnotator = Annotated[bool, typer.Option("--allow-one-annotator", help="Accept human scores that all come from one annotator.")]
ScoreKind = Annotated[str, typer.Option("--scores", help="label (the judge's most likely label, the paper's) | expected (sum of k x P(k) where the judge gave P(0..4)).")]
# Every command that reads judgments (analysis/judgments/windowed.py, the one home of the filter).
Windowed = Annotated[str, typer.Option("--windowed", help="include (default; their count is shown) | exclude | only the "
                                       "judgments made on a window of a dialogue too long for the judge (it did not "
                                       "read the middle rounds: `rounds_left_out` > 0).")]
