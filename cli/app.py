"""The `esc-eval` command: the root typer app and its error handling.

Every command group is a module of this package, imported and registered here statically: a
command that fails to import is an error at start-up, never a silently missing subcommand.

Errors on bad input exit non-zero with one line naming the file and field; --debug shows the
traceback.
"""
from __future__ import annotations

import logging
import os
import sys
from typing import Annotated

import typer

# From the rooms, not `from esc_eval.cli import ...`: reading this package's namespace from inside it is
# an import cycle with its __init__ (tests/cli/test_cli_layout.py).
from esc_eval.cli.jobs import cards, demo, pairwise, score, simulate, train
from esc_eval.cli.ops import bench, check, docs, plan, serve
from esc_eval.cli.results import analysis, annotate, compare, export, report, view
from esc_eval.cli.common import STATE
from esc_eval.serve.engines.args import cpu_kv_cache_env

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="ESC-Eval on Ray + vLLM: role-played emotional-support dialogues, 7-dimension judging, the paper's tables.")

app.command("demo")(demo.demo)
app.command("simulate")(simulate.simulate)
app.command("score")(score.score)
app.command("report")(report.report)
app.command("leaderboard")(report.leaderboard)
app.command("view")(view.view)
app.command("compare")(compare.compare)
app.command("export")(export.export)
app.command("plan")(plan.plan)
app.command("pairwise")(pairwise.pairwise)
app.command("check")(check.check)
app.add_typer(cards.app, name="cards")
app.add_typer(serve.app, name="serve")
app.add_typer(train.app, name="train")
app.add_typer(bench.app, name="bench")
app.add_typer(analysis.app, name="analysis")
app.add_typer(annotate.app, name="annotate")
app.command("docs")(docs.docs)


@app.callback()
def _main(debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
          verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress details (retries, engines).")] = False) -> None:
    STATE["debug"] = debug
    STATE["verbose"] = verbose
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Quiet engines by default; workers inherit this through the Ray runtime env.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "INFO" if verbose else "WARNING")
    cpu_kv_cache_env()  # the one default (serve/devices/cpu.py); workers and replicas inherit it


KNOWN_ERRORS: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, PermissionError, TimeoutError, KeyError, OSError)


def _unwrap(exc: BaseException) -> BaseException:
    # Errors raised inside Ray actors arrive wrapped (RayTaskError); show the original.
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def main() -> None:
    try:
        code = app(standalone_mode=False)  # without standalone mode, click returns a typer.Exit's code
        if isinstance(code, int) and code:
            sys.exit(code)
    except SystemExit:
        raise
    except typer.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if STATE["debug"]:
            raise
        err = _unwrap(exc)
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        # several one-line problems (a run's preflight: one per model) are each shown
        for line in getattr(err, "problems", None) or [msg]:
            sys.stderr.write(f"error: {line}\n")
        sys.exit(2 if isinstance(err, KNOWN_ERRORS) else 1)
