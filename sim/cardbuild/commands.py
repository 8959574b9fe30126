"""What `esc-eval cards build|stats|validate|export` do once their options are parsed: the build run or
resumed with its per-stage table, the statistics written and shown, card files checked, cards written
in the release's JSON; tables and lines on stdout (the CLI's console for cards), warnings on stderr.

Layer: the top of sim.cardbuild (it drives the pipeline and the reviews)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

from esc_eval.sim.cards.card import load_cards, validate_card_files, write_cards

console = Console()
CARD_FORMATS = ("official", "esc-eval")
EXPORT_FORMAT = "official"  # `cards export` writes the release's JSON unless told: what ESC-Eval's own scripts read


def _table(title: str, rows: list[dict]) -> Table:
    t = Table(title=title)
    cols = list(rows[0]) if rows else []
    for c in cols:
        t.add_column(str(c))
    for r in rows:
        t.add_row(*("" if r[c] is None else str(r[c]) for c in cols))
    return t


def build_cards_command(config: Path, quiet: bool = False) -> None:
    """`esc-eval cards build`: build or resume role cards from source datasets, then its cards per stage
    (Table 6's layout), each stage's rate and where the cards went. A bad config raises
    CardBuildConfigError before anything runs."""
    from esc_eval.sim.cardbuild.config import load_build_config
    from esc_eval.sim.cardbuild.pipeline import build_cards
    from esc_eval.sim.cardbuild.review.stats import stage_table

    result = build_cards(load_build_config(config), show_progress=not quiet)
    console.print(_table("Cards per stage (Table 6 layout)", stage_table(result.counts).to_dict(orient="records")))
    for stage, t in result.timings.items():
        if isinstance(t, dict) and t.get("items_per_s"):
            console.print(f"{stage}: {t['done']} items in {t['seconds']} s ({t['items_per_s']} items/s)")
    console.print(f"cards: {result.cards_path}  official: {result.official_path}")
    if result.final_cards_path:
        console.print(f"final (annotated) cards: {result.final_cards_path}")
    else:
        console.print(f"annotation sheets: {result.output / 'annotation'} (fill them, then re-run build)")


def cards_stats_command(paths: Path | list[Path], out: Path | None = None, assume_quality: str | None = None) -> dict[str, Any]:
    """`esc-eval cards stats`: stage counts (Table 6), categories x tier (Table 9) and the distribution chart
    (Figure 5) written into `out` (default <build folder>/stats, or ./<file stem>_stats: never beside a
    shared input file) and shown; several files are pooled. The written result."""
    from esc_eval.sim.cardbuild.review.stats import write_stats

    paths = [paths] if isinstance(paths, Path) else list(paths)  # one path, or several
    path = paths[0]
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
    return result


def cards_validate_command(paths: Path | list[Path], show: Callable[[Any], None] = print) -> dict[str, Any]:
    """`esc-eval cards validate`: the card files loaded and checked (a bad card raises, naming the file and
    field), the counts per file and in total given to `show` (the CLI's JSON), then a warning on stderr
    where a card id is in more than one file."""
    paths = [paths] if isinstance(paths, Path) else list(paths)
    result = validate_card_files(paths)
    show(result)
    if "repeated_across_files" in result:
        rep = result["repeated_across_files"]
        first = rep["first"][0]
        Console(stderr=True).print(
            f"[yellow]warning: {rep['count']} card id(s) appear in more than one file (e.g. {first['id']!r} in "
            f"{first['first_in']} and {first['again_in']}): ids key a run's dialogues, so one card file cannot hold "
            f"both; {result['unique_cards']} unique of {result['cards']}", soft_wrap=True)
    return result


def cards_export_command(path: Path, out: Path, fmt: str = EXPORT_FORMAT) -> int:
    """`esc-eval cards export`: a card file or a build folder (final_cards.json, else cards.json) written in
    the release's JSON (`fmt` official) or ours (esc-eval); how many cards."""
    from esc_eval.sim.cardbuild.review.stats import resolve_cards_path

    if fmt not in CARD_FORMATS:
        raise ValueError(f"unknown format {fmt!r} (official | esc-eval)")
    cards_path, _ = resolve_cards_path(path)
    cards = load_cards(cards_path)
    write_cards(cards, out, fmt=fmt)  # type: ignore[arg-type]
    console.print(f"{len(cards)} cards written to {out} ({fmt})")
    return len(cards)


__all__ = ["CARD_FORMATS", "build_cards_command", "cards_export_command", "cards_stats_command",
           "cards_validate_command", "console"]
