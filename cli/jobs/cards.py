"""`esc-eval cards validate|build|stats|export`: role cards.

    esc-eval cards build sim/cardbuild/configs/example.yaml     # run or resume a build
    esc-eval cards stats runs/cards-example --out runs/cards-example/stats
    esc-eval cards validate runs/cards-example/cards.json
    esc-eval cards export runs/cards-example --out cards_official.json --fmt official
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from esc_eval.cli.common import local_out
from rich.console import Console
from rich.table import Table

from esc_eval.sim.cards.card import load_cards, validate_card_files, write_cards

console = Console()
app = typer.Typer(no_args_is_help=True, help="Role cards: validate, build from source datasets, statistics, export.")


def _table(title: str, rows: list[dict]) -> Table:
    t = Table(title=title)
    cols = list(rows[0]) if rows else []
    for c in cols:
        t.add_column(str(c))
    for r in rows:
        t.add_row(*("" if r[c] is None else str(r[c]) for c in cols))
    return t


@app.command("build")
def cards_build(
    config: Annotated[Path, typer.Argument(help="Card-build YAML config (see sim/cardbuild/configs/example.yaml).")],
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bars.")] = False,
) -> None:
    """Build role cards from source datasets (extract, filter, dedup, classify, annotation sheets); resumable."""
    from esc_eval.sim.cardbuild.config import CardBuildConfigError, load_build_config
    from esc_eval.sim.cardbuild.pipeline import build_cards
    from esc_eval.sim.cardbuild.review.stats import stage_table

    try:
        cfg = load_build_config(config)
    except CardBuildConfigError as e:
        console.print(f"[red]{e}", soft_wrap=True)
        raise typer.Exit(2) from None
    result = build_cards(cfg, show_progress=not quiet)
    console.print(_table("Cards per stage (Table 6 layout)", stage_table(result.counts).to_dict(orient="records")))
    for stage, t in result.timings.items():
        if isinstance(t, dict) and t.get("items_per_s"):
            console.print(f"{stage}: {t['done']} items in {t['seconds']} s ({t['items_per_s']} items/s)")
    console.print(f"cards: {result.cards_path}  official: {result.official_path}")
    if result.final_cards_path:
        console.print(f"final (annotated) cards: {result.final_cards_path}")
    else:
        console.print(f"annotation sheets: {result.output / 'annotation'} (fill them, then re-run build)")


@app.command("stats")
def cards_stats(
    paths: Annotated[list[Path], typer.Argument(help="Card files (ours or official JSON) or a build folder; several files are pooled.")],
    out: Annotated[Optional[Path], typer.Option("--out", callback=local_out, help="Folder for the CSV tables, stats.json and the chart (default: <folder>/stats or ./<file>_stats).")] = None,
    assume_quality: Annotated[Optional[str], typer.Option("--assume-quality", help="Tier for cards without one (default: high for the release's card_high_*.json, else none).")] = None,
) -> None:
    """Card statistics: stage counts (Table 6), categories x tier (Table 9), distribution chart (Figure 5)."""
    from esc_eval.sim.cardbuild.review.stats import write_stats

    paths = [paths] if isinstance(paths, Path) else list(paths)  # callable as a function with one path too
    path = paths[0]
    # default: <build folder>/stats, or ./<file stem>_stats (never beside a shared input file)
    stem = path.stem if len(paths) == 1 else "cards"
    target = out or (path / "stats" if path.is_dir() and len(paths) == 1 else Path.cwd() / f"{stem}_stats")
    result = write_stats(paths if len(paths) > 1 else path, target, assume_quality=assume_quality)
    s = result["summary"]
    source = result["source"] if isinstance(result["source"], str) else f"{len(result['source'])} files"
    console.print(f"{s['cards']} cards from {source}: by language {s['by_language']}, quality {s['by_quality']}")
    if "table6" in result:
        console.print(_table("Table 6 layout", result["table6"]))
    console.print(_table("Categories", result["table9"]))
    console.print(f"written to {target} (figure: {result['figure']})")


@app.command("validate")
def cards_validate(paths: Annotated[list[Path], typer.Argument(help="Card files (ours or the official ESC-Eval JSON).")]) -> None:
    """Load and check card files; print counts per file and in total (a bad card exits 2 naming the file and field)."""
    from esc_eval.cli.common import emit

    paths = [paths] if isinstance(paths, Path) else list(paths)
    result = validate_card_files(paths)
    emit(result)
    if "repeated_across_files" in result:
        rep = result["repeated_across_files"]
        first = rep["first"][0]
        Console(stderr=True).print(
            f"[yellow]warning: {rep['count']} card id(s) appear in more than one file (e.g. {first['id']!r} in "
            f"{first['first_in']} and {first['again_in']}): ids key a run's dialogues, so one card file cannot hold "
            f"both; {result['unique_cards']} unique of {result['cards']}", soft_wrap=True)


@app.command("export")
def cards_export(
    path: Annotated[Path, typer.Argument(help="A card file or a build folder (final_cards.json, else cards.json).")],
    out: Annotated[Path, typer.Option("--out", callback=local_out, help="Output JSON file.")],
    fmt: Annotated[str, typer.Option("--fmt", help="official (the ESC-Eval release's JSON) or esc-eval.")] = "official",
) -> None:
    """Write cards in the official ESC-Eval JSON format (or ours)."""
    from esc_eval.sim.cardbuild.review.stats import resolve_cards_path

    if fmt not in ("official", "esc-eval"):
        console.print(f"[red]unknown format {fmt!r} (official | esc-eval)")
        raise typer.Exit(2)
    cards_path, _ = resolve_cards_path(path)
    cards = load_cards(cards_path)
    write_cards(cards, out, fmt=fmt)  # type: ignore[arg-type]
    console.print(f"{len(cards)} cards written to {out} ({fmt})")
