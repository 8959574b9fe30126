"""Dialogues the simulator spoiled, for every reader: the flags the simulation job stored with the
run (the dialogue row's `spoiled` and `spoiled_reasons`), and the same rule (sim/dialogue/spoiled.py)
computed on the fly where a row has none: run folders written before the columns, official JSON.

On the fly, `ignores_card` needs the card: it is read from the run's card file (the simulation
config's `cards`, when that file can still be read); without it the rule is not checked and the
row's flag_source says so ("computed, card unknown").
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

import pandas as pd
import pyarrow as pa

from esc_eval.analysis.results.loaders import AnalysisInputError, is_official_json, load_dialogues, load_manifests
from esc_eval.sim.cards.card import CardError, card_file_path, load_cards
from esc_eval.sim.dialogue.spoiled import REASON_TITLES, REASONS, card_content, spoiled_columns

STORED, COMPUTED, NO_CARD = "stored", "computed", "computed, card unknown"
FLAG_COLUMNS = ["dialogue_id", "spoiled", "spoiled_reasons", "flag_source"]


def run_cards(manifest: Mapping[str, Any]) -> dict[str, str]:
    """card id -> the card's content (occupation and problem, sim.dialogue.spoiled.card_content) of the
    card file a run was simulated from; {} when the manifest names none or the file cannot be read
    any more (the flags are then computed without `ignores_card`)."""
    cards = ((manifest.get("simulation") or {}).get("config") or {}).get("cards")
    if not cards:
        return {}
    try:
        return {c.id: card_content(c.occupation, c.problem) for c in load_cards(card_file_path(cards))}
    except (CardError, OSError, ValueError):
        return {}


def card_contents(manifests: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(run folder, card id) -> the card's content, over the runs' manifests (analysis.results.loaders.load_manifests)."""
    return {(run, card): content for run, m in manifests.items() for card, content in run_cards(m).items()}


def _reasons(value: Any) -> list[str]:
    return [] if value is None or (isinstance(value, float) and value != value) else [str(r) for r in value]


def flags_of(rows: Iterable[tuple[Any, ...]], cards: Mapping[tuple[str, str], str] | None = None
             ) -> list[tuple[bool | None, list[str] | None, str | None]]:
    """(spoiled, reasons, source) per row of (run_dir, card_id, language, status, turns, stored
    spoiled, stored reasons): the stored flag where there is one, else computed."""
    cards = cards or {}
    out = []
    for run_dir, card_id, language, status, turns, spoiled, reasons in rows:
        if spoiled is not None and not pd.isna(spoiled):
            out.append((bool(spoiled), _reasons(reasons), STORED))
            continue
        if status != "ok":
            out.append((None, None, None))
            continue
        card = cards.get((str(run_dir), str(card_id)))
        flag, why = spoiled_columns(list(turns) if turns is not None else [], status, card, language)
        out.append((flag, why, COMPUTED if card else NO_CARD))
    return out


def spoiled_flags(dialogues: pd.DataFrame, cards: Mapping[tuple[str, str], str] | None = None) -> pd.DataFrame:
    """FLAG_COLUMNS per dialogue row (analysis.results.loaders.load_dialogues): spoiled (True / False,
    None for a failed dialogue), spoiled_reasons (list), flag_source (stored | computed | computed,
    card unknown). cards: card_contents() of the runs (for `ignores_card` on the fly)."""
    if dialogues.empty:
        return pd.DataFrame(columns=FLAG_COLUMNS)
    need = {"dialogue_id", "turns", "status"}
    if need - set(dialogues.columns):
        raise AnalysisInputError(f"dialogue frame lacks columns {sorted(need - set(dialogues.columns))}")
    n = len(dialogues)

    def col(name: str) -> Iterable[Any]:
        return dialogues[name] if name in dialogues.columns else [None] * n

    flags = flags_of(zip(col("run_dir"), col("card_id"), col("language"), dialogues["status"], dialogues["turns"],
                         col("spoiled"), col("spoiled_reasons")), cards)
    return pd.DataFrame({"dialogue_id": dialogues["dialogue_id"].to_numpy(),
                         "spoiled": pd.array([f[0] for f in flags], dtype="boolean"),
                         "spoiled_reasons": [f[1] for f in flags], "flag_source": [f[2] for f in flags]},
                        index=dialogues.index, columns=FLAG_COLUMNS)


def with_spoiled(dialogues: pd.DataFrame, manifests: Mapping[str, Mapping[str, Any]] | None = None) -> pd.DataFrame:
    """The dialogue frame with spoiled, spoiled_reasons and flag_source filled for every row."""
    flags = spoiled_flags(dialogues, card_contents(manifests or {}))
    if flags.empty:
        return dialogues.assign(spoiled=pd.array([], dtype="boolean"), spoiled_reasons=[], flag_source=[])
    return dialogues.assign(spoiled=flags["spoiled"], spoiled_reasons=flags["spoiled_reasons"],
                            flag_source=flags["flag_source"])


def spoiled_dialogues(run_dirs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> pd.DataFrame:
    """The runs' dialogue rows with their flags (stored, else computed with the run's cards)."""
    paths = [run_dirs] if isinstance(run_dirs, (str, os.PathLike)) else list(run_dirs)
    folders = [p for p in paths if not is_official_json(p)]
    return with_spoiled(load_dialogues(paths), load_manifests(folders) if folders else {})


def spoiled_by_dialogue(run_dirs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> dict[str, bool | None]:
    """dialogue id -> spoiled (None for a failed one) over the runs' dialogues; {} where the runs hold
    no dialogue rows (official score JSON on its own): the leaderboard then says n/a."""
    try:
        flagged = spoiled_dialogues(run_dirs)
    except AnalysisInputError:
        return {}
    return flag_map(flagged)


def flag_map(flagged: pd.DataFrame) -> dict[str, bool | None]:
    """dialogue id -> spoiled of with_spoiled's (or spoiled_flags') frame."""
    return {str(d): (None if pd.isna(f) else bool(f)) for d, f in zip(flagged["dialogue_id"], flagged["spoiled"])}


def exclude_spoiled(scores: pd.DataFrame, flagged: pd.DataFrame) -> pd.DataFrame:
    """Score rows of the dialogues that are not spoiled (flagged: with_spoiled's frame)."""
    bad = set(flagged.loc[flagged["spoiled"].fillna(False).astype(bool), "dialogue_id"])
    return scores[~scores["dialogue_id"].isin(bad)].reset_index(drop=True)


def excluded_line(flagged: pd.DataFrame, scored: Iterable[str]) -> str:
    """One line: how many of the scored dialogues are spoiled and left out, why, and where the flags came from."""
    scored = set(scored)
    f = flagged[flagged["dialogue_id"].isin(scored)]
    bad = f[f["spoiled"].fillna(False).astype(bool)]
    counts = {r: sum(r in (x or []) for x in bad["spoiled_reasons"]) for r in REASONS}
    why = ", ".join(f"{REASON_TITLES[r]} {n}" for r, n in counts.items() if n)
    sources = f["flag_source"].dropna().value_counts()
    line = (f"Left out {len(bad)} of {len(scored)} scored dialogues the simulator spoiled"
            + (f" ({why}; a dialogue may have several reasons)" if why else "") + ". Flags: "
            + ", ".join(f"{src} for {n}" for src, n in sources.items()) + ".")
    missing = len(scored - set(f["dialogue_id"]))
    return line + (f" {missing} scored dialogues have no dialogue row and are kept." if missing else "")


def split_spoiled(run_dirs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], scores: pd.DataFrame
                  ) -> tuple[pd.DataFrame, str]:
    """The score rows without the spoiled dialogues, and the line saying what was left out. An error
    when none of the scored dialogues has its turns in the runs (nothing to judge)."""
    flagged = spoiled_dialogues(run_dirs)
    scored = set(scores["dialogue_id"])
    if flagged.empty or not scored & set(flagged["dialogue_id"]):
        paths = [run_dirs] if isinstance(run_dirs, (str, os.PathLike)) else list(run_dirs)
        raise AnalysisInputError(f"--exclude-spoiled: none of the scored dialogues has its turns in {', '.join(map(str, paths))} "
                                 "(for official score JSON, give the official dialogue JSON as well)")
    return exclude_spoiled(scores, flagged), excluded_line(flagged, scored)


def fill_part_flags(table: pa.Table, read_turns: Callable[[], pa.ChunkedArray], cards: Mapping[str, str]) -> pa.Table:
    """A part's projected columns (card_id, language, status, and spoiled / spoiled_reasons where the
    part has them) with the flags of its completed rows that have none computed (the viewer's index).
    read_turns: the part's `turns` column, read only when some row needs it; cards: card id -> content (run_cards)."""
    n = table.num_rows
    spoiled = table.column("spoiled").to_pylist() if "spoiled" in table.column_names else [None] * n
    reasons = table.column("spoiled_reasons").to_pylist() if "spoiled_reasons" in table.column_names else [None] * n
    status, card_ids, languages = (table.column(c).to_pylist() for c in ("status", "card_id", "language"))
    todo = [i for i in range(n) if spoiled[i] is None and status[i] == "ok"]
    if todo:
        turns = read_turns().to_pylist()
        flags = flags_of((("", card_ids[i], languages[i], "ok", turns[i], None, None) for i in todo),
                         {("", c): p for c, p in cards.items()})
        for i, (flag, why, _) in zip(todo, flags):
            spoiled[i], reasons[i] = flag, why
    for name, values in (("spoiled", pa.array(spoiled, pa.bool_())), ("spoiled_reasons", pa.array(reasons, pa.list_(pa.string())))):
        table = (table.set_column(table.column_names.index(name), name, values) if name in table.column_names
                 else table.append_column(name, values))
    return table
