"""The run folder's schema, generated from its pyarrow schemas (sim/runs/records.py): every schema
and struct the module defines, every column with its Arrow type and whether a row must carry it.

A column's description is the comment beside it in records.py, else a note below. A note naming a
column that no schema has is an error: a renamed or removed column cannot keep a stale line."""
from __future__ import annotations

import inspect
import re
from types import ModuleType

import pyarrow as pa

from docgen_text import anchor, cell, code

RECORDS = "esc_eval.sim.runs.records"

# What each schema is, where its rows live.
TITLES = {
    "DIALOGUE_SCHEMA": ("Dialogue rows", "`dialogues/part-*.parquet`: one row per dialogue."),
    "SCORE_SCHEMA": ("Score rows", "`scores/part-*.parquet`: one row per (dialogue, dimension, judge)."),
    "PAIRWISE_SCHEMA": ("Pairwise verdict rows", "`pairwise/part-*.parquet`: one row per (pair of dialogues, dimension, "
                        "order, judge), written by `esc-eval pairwise`."),
    "SEEKER_RATING_SCHEMA": ("Seeker-rating rows", "`seeker_ratings/part-*.parquet`: one row per (dialogue, question, "
                             "rater): the person's own view, written by `esc-eval simulate --seeker-ratings` and "
                             "`esc-eval analysis seeker-check`."),
    "TURN_TYPE": ("Turn", "One turn of a dialogue row's `turns` list, in order: the opener, then seeker and assistant in turn."),
    "CALL_TYPE": ("Call", "One call of a dialogue row's `between_calls` list: a model call made before a session of a "
                  "course, not a turn of it ([Courses of sessions](../guides/sessions.md))."),
    "DISCLOSURE_TYPE": ("Disclosure", "One disclosure of a dialogue row's `risk_disclosures` list, in order: risk that "
                        "emerges mid-conversation ([guide](../guides/emerging-risk.md))."),
    "REPLY_SAFETY_SCHEMA": ("Per-reply safety rows", "`reply_safety/part-*.parquet`: one row per (dialogue, reply, "
                            "question, judge), written by `esc-eval score --reply-safety` for the replies after risk "
                            "emerged ([guide](../guides/emerging-risk.md))."),
}

# Descriptions of the columns whose line in records.py carries no comment.
NOTES = {
    "DIALOGUE_SCHEMA": {
        "run_id": "The run that wrote the row (manifest.json `run_id`).",
        "dialogue_id": "A stable hash of card, target, role model, strategy and seed, so a re-run skips finished dialogues.",
        "card_id": "The role card's id.",
        "language": "The card's language: en or zh.",
        "category_1": "The card's first-level taxonomy category (Table 9).",
        "category_2": "Its second-level category.",
        "category_3": "Its third-level category.",
        "card_source": "Where the card came from (its dataset; `official:<file>` for official dialogue JSON).",
        "target_model": "The model under test, by its name in the run (the config's `name`, else the model).",
        "role_model": "The role-play model (ESC-Role).",
        "strategy": "The role-play strategy (official, zero_shot, ..., resistant, low_engagement, volatile), with its seeker controls when it has any (official+resistance=strong).",
        "seed": "The seed; one dialogue per card, target, strategy and seed.",
        "role_params": "JSON of the role model's effective generation parameters.",
        "turns": "The turns, in order (see Turn below).",
        "n_turns": "Number of turns.",
        "error": "The error of a failed dialogue: its type and message.",
        "attempts": "Attempts per call the dialogue ran under: 1 for an ok row, `execution.max_attempts` for a failed one.",
        "prompt_tokens": "Prompt tokens of all the dialogue's calls.",
        "completion_tokens": "Completion tokens of all the dialogue's calls.",
        "started_at": "When the dialogue started.",
        "finished_at": "When its row was made.",
    },
    "SCORE_SCHEMA": {
        "run_id": "The run that wrote the row.",
        "dialogue_id": "The scored dialogue (a dialogue row's id, or `<file stem>:<key>` for official JSON).",
        "target_model": "The model under test of that dialogue.",
        "language": "The dialogue's language.",
        "error": "The error of a failed call.",
        "prompt_tokens": "Prompt tokens of the judge's call.",
        "latency_s": "Seconds the judge's call took.",
        "scored_at": "When the row was made.",
    },
    "PAIRWISE_SCHEMA": {
        "run_id": "The run of the two dialogues.",
        "card_id": "The card both targets talked about.",
        "language": "The card's language.",
        "strategy": "The role-play strategy both dialogues share.",
        "seed": "The seed both dialogues share.",
        "dialogue_a": "The dialogue of model_a.",
        "dialogue_b": "The dialogue of model_b.",
        "model_b": "The target model of dialogue_b.",
        "judge": "The judge id (the judge's name, else `<model>:pairwise:<method>`).",
        "error": "The error of a failed call.",
        "prompt_tokens": "Prompt tokens of the judge's call.",
        "latency_s": "Seconds the judge's call took.",
        "judged_at": "When the row was made.",
    },
    "CALL_TYPE": {
        "prompt_tokens": "Prompt tokens of the call.",
        "completion_tokens": "Its completion tokens.",
        "latency_s": "Seconds the call took.",
    },
    "REPLY_SAFETY_SCHEMA": {
        "run_id": "The run of the dialogue.",
        "dialogue_id": "The dialogue whose reply was judged.",
        "target_model": "The model under test of that dialogue.",
        "language": "The dialogue's language.",
        "judge": "The judge id (as score rows name it).",
        "error": "The error of a failed call.",
    },
    "SEEKER_RATING_SCHEMA": {
        "run_id": "The run of the dialogue (`people` for people's dialogues in a check).",
        "dialogue_id": "The rated dialogue.",
        "card_id": "The dialogue's card (a person's dialogue: its own id).",
        "language": "The dialogue's language.",
        "error": "The error of a failed call.",
        "prompt_tokens": "Prompt tokens of the call.",
        "latency_s": "Seconds the call took.",
        "rated_at": "When the row was made.",
    },
    "TURN_TYPE": {
        "index": "Position in the dialogue, from 0.",
        "text": "What was said.",
        "prompt_tokens": "Prompt tokens of the call that produced it.",
        "completion_tokens": "Its completion tokens.",
        "latency_s": "Seconds the call took.",
        "finish_reason": "Why generation stopped (stop, length, ...).",
    },
}

_ASSIGN = re.compile(r"^([A-Z][A-Z0-9_]*)\s*=\s*pa\.(schema|struct)\(")
_COLUMN = re.compile(r"""^\s*\(\s*["'](\w+)["']\s*,.*?#\s*(.+?)\s*$""")


def _module() -> ModuleType:
    import importlib

    return importlib.import_module(RECORDS)


def schemas(module: ModuleType | None = None) -> dict[str, pa.Schema | pa.StructType]:
    """Every pa.Schema and struct type the module defines at its top level, in source order."""
    module = module or _module()
    found = {name: value for name, value in vars(module).items()
             if name.isupper() and (isinstance(value, pa.Schema) or isinstance(value, pa.StructType))}
    order = [m.group(1) for line in inspect.getsource(module).splitlines() if (m := _ASSIGN.match(line))]
    return {name: found[name] for name in sorted(found, key=lambda n: order.index(n) if n in order else len(order))}


def comments(module: ModuleType | None = None) -> dict[str, dict[str, str]]:
    """schema name -> column -> the comment on the column's line in the module's source."""
    out: dict[str, dict[str, str]] = {}
    current = None
    for line in inspect.getsource(module or _module()).splitlines():
        if m := _ASSIGN.match(line):
            current = out.setdefault(m.group(1), {})
        elif current is not None and (c := _COLUMN.match(line)):
            current[c.group(1)] = c.group(2)
        elif line.startswith(")") or (line and not line[0].isspace() and not line.startswith("#")):
            current = None
    return out


def _fields(schema: pa.Schema | pa.StructType) -> list[pa.Field]:
    return list(schema) if isinstance(schema, pa.Schema) else [schema.field(i) for i in range(schema.num_fields)]


def stale_notes(module: ModuleType | None = None) -> list[str]:
    """Notes that name a schema or column the module no longer has."""
    found = schemas(module)
    stale = []
    for name, notes in NOTES.items():
        columns = {f.name for f in _fields(found[name])} if name in found else set()
        stale += [f"{name}.{col}" for col in notes if col not in columns]
    return stale


def _type(t: pa.DataType, names: dict[pa.DataType, str]) -> str:
    if t in names:
        return f"[{TITLES.get(names[t], (names[t],))[0]}](#{anchor(TITLES.get(names[t], (names[t],))[0])})"
    if pa.types.is_list(t):
        return "list of " + _type(t.value_type, names)
    return code(str(t))


def render_schema(module: ModuleType | None = None) -> str:
    module = module or _module()
    found = schemas(module)
    notes = comments(module)
    structs = {value: name for name, value in found.items() if isinstance(value, pa.StructType)}
    lines: list[str] = []
    for name, schema in found.items():
        title, where = TITLES.get(name, (name, ""))
        required = set(getattr(module, name.replace("_SCHEMA", "_REQUIRED"), ()) if name.endswith("_SCHEMA") else ())
        lines += [f"## {title} {{ #{anchor(title)} }}", "", f"`{RECORDS}.{name}`. {where}".strip(), ""]
        lines += ["| Column | Arrow type | Required | Description |", "|---|---|---|---|"]
        for field in _fields(schema):
            text = notes.get(name, {}).get(field.name) or NOTES.get(name, {}).get(field.name, "")
            must = "yes" if field.name in required else ""
            lines.append(f"| {code(field.name)} | {_type(field.type, structs)} | {must} | {cell(text)} |")
        lines.append("")
    return "\n".join(lines)
