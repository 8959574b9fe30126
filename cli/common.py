"""What every command module shares: the global flags, JSON output, the engine environment."""
from __future__ import annotations

import functools
import json
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from esc_eval.serve.devices.cpu import KV_CACHE_ENV

# --debug / --verbose of the root command (set by cli.app's callback before any command runs).
STATE = {"debug": False, "verbose": False}

# Environment variables that workers and engines must see as the driver does.
ENGINE_ENV_KEYS = (KV_CACHE_ENV, "VLLM_LOGGING_LEVEL", "ESC_EVAL_CACHE", "ESC_EVAL_MODEL_PATHS",
                   "ESC_EVAL_MODEL_PATHS_FILE", "HF_HUB_OFFLINE")


def emit(data: Any, **kw: Any) -> None:
    """Results go to stdout as JSON (progress and errors go to stderr)."""
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str, **kw))


def exec_env() -> dict[str, str]:
    return {k: os.environ[k] for k in ENGINE_ENV_KEYS if k in os.environ}


def console_env(ex) -> None:
    """Pass the driver's engine environment to the workers of an ExecutionConfig."""
    ex.env = {**ex.env, **exec_env()}
    # Engines are chatty: their logs stay in Ray's log files unless --verbose.
    ex.log_to_driver = ex.log_to_driver and STATE["verbose"]


def exit_for_outcome(result: dict[str, Any], kind: str, max_failure_rate: float) -> None:
    """After the result is printed: exit non-zero with one line when the job stopped on its budget
    or failed past the threshold (sim/driver/outcome.py); the rows stay for a resume."""
    import sys

    import typer

    from esc_eval.sim.driver.outcome import outcome_line

    verdict = outcome_line(result, kind, max_failure_rate)
    if verdict is not None:
        code, line = verdict
        sys.stderr.write(f"error: {line}\n")
        raise typer.Exit(code)


# A storage URI after Path() folded its "//": s3://bucket/x -> s3:/bucket/x (a local name like that is no one's)
_FOLDED_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/(?!/)")


def local_out(value: Path | None) -> Path | None:
    """The callback of an `--out` that writes local files only: a storage URI is refused in one line
    (else Path would make a folder named `s3:` here)."""
    if value is not None and _FOLDED_URI.match(str(value)):
        import typer

        uri = re.sub(r":/", "://", str(value), count=1)
        raise typer.BadParameter(f"{uri}: this command writes local files only; give a local path "
                                 "(simulate, score, demo, report, compare and the analysis reports take storage URIs)")
    return value


def default_out(prefix: str) -> Path:
    from esc_eval.sim.runs.runfolder import now_utc

    return Path("runs") / f"{prefix}-{now_utc().strftime('%Y%m%d-%H%M%S')}"


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
