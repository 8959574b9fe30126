"""`esc-eval cards validate|build|stats|export`: role cards.

    esc-eval cards build sim/cardbuild/configs/example.yaml     # run or resume a build
    esc-eval cards stats runs/cards-example --out runs/cards-example/stats
    esc-eval cards validate runs/cards-example/cards.json
    esc-eval cards export runs/cards-example --out cards_official.json --fmt official

What each does is sim/cardbuild/commands.py; these commands only parse options and call it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import emit, local_out
from esc_eval.sim.cardbuild.commands import CARD_FORMATS, EXPORT_FORMAT, console

app = typer.Typer(no_args_is_help=True, help="Role cards: validate, build from source datasets, statistics, export.")


def _refused(message: str) -> typer.Exit:
    """A bad config or option: the message in red on the cards' console, and exit 2."""
    console.print(f"[red]{message}", soft_wrap=True)
    return typer.Exit(2)


@app.command("build")
def cards_build(
    config: Annotated[Path, typer.Argument(help="Card-build YAML config (see sim/cardbuild/configs/example.yaml).")],
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
) -> None:
    """Build role cards from source datasets (extract, filter, dedup, classify, annotation sheets); resumable."""
    from esc_eval.sim.cardbuild.commands import build_cards_command
    from esc_eval.sim.cardbuild.config import CardBuildConfigError

    try:
        build_cards_command(config, quiet)
    except CardBuildConfigError as e:
        raise _refused(str(e)) from None


@app.command("stats")
def cards_stats(
    paths: Annotated[list[Path], typer.Argument(help="Card files (ours or official JSON) or a build folder; several files are pooled.")],
    out: Annotated[Optional[Path], typer.Option("--out", callback=local_out, help="Folder for the CSV tables, stats.json and the chart (default: <folder>/stats or ./<file>_stats).")] = None,
    assume_quality: Annotated[Optional[str], typer.Option("--assume-quality", help="Tier for cards without one (default: high for the release's card_high_*.json, else none).")] = None,
) -> None:
    """Card statistics: stage counts (Table 6), categories x tier (Table 9), distribution chart (Figure 5)."""
    from esc_eval.sim.cardbuild.commands import cards_stats_command

    cards_stats_command(paths, out, assume_quality)


@app.command("validate")
def cards_validate(paths: Annotated[list[Path], typer.Argument(help="Card files (ours or the official ESC-Eval JSON).")]) -> None:
    """Load and check card files; print counts per file and in total (a bad card exits 2 naming the file and field)."""
    from esc_eval.sim.cardbuild.commands import cards_validate_command

    cards_validate_command(paths, show=emit)


@app.command("export")
def cards_export(
    path: Annotated[Path, typer.Argument(help="A card file or a build folder (final_cards.json, else cards.json).")],
    out: Annotated[Path, typer.Option("--out", callback=local_out, help="Output JSON file.")],
    fmt: Annotated[str, typer.Option("--fmt", help="official (the ESC-Eval release's JSON) or esc-eval.")] = EXPORT_FORMAT,
) -> None:
    """Write cards in the official ESC-Eval JSON format (or ours)."""
    from esc_eval.sim.cardbuild.commands import cards_export_command

    if fmt not in CARD_FORMATS:
        raise _refused(f"unknown format {fmt!r} (official | esc-eval)")
    cards_export_command(path, out, fmt)
