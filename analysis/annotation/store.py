"""The human-evaluation store: studies, each annotator's queue, and every answer, in SQLite.

One file that several server processes (and their threads) write at once: WAL mode (readers never
block the writer), a busy timeout (writers queue instead of failing), and synchronous=FULL (a
committed answer survives a killed process and a power loss). Every answer is its own transaction,
committed before the page is told it was saved, and keyed by (study, annotator, dialogue,
dimension): giving it again (a retry after a lost reply, a changed mind) replaces it, so each
answer is there exactly once.

The file lives beside a local run folder by default (`<run>/annotations/annotations.sqlite`); a
run folder that is not on a local disk needs an explicit path (`esc-eval annotate ... --store`).

Tokens are stored as SHA-256 hashes only; the plain token is shown once, when it is made.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from esc_eval.analysis.annotation.answers import (ANSWER_COLUMNS, AnnotationStoreError, check_dimension, check_score,
                                                  check_seconds, study_dimensions)

SCHEMA_VERSION = 1
STORE_DIR = "annotations"
STORE_FILE = "annotations.sqlite"
ADMIN = "admin"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS studies (
  study TEXT PRIMARY KEY, created_at TEXT NOT NULL, config TEXT NOT NULL, rubric_version TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queue (
  study TEXT NOT NULL REFERENCES studies(study), annotator TEXT NOT NULL, position INTEGER NOT NULL,
  dialogue_id TEXT NOT NULL, language TEXT NOT NULL,
  PRIMARY KEY (study, annotator, position), UNIQUE (study, annotator, dialogue_id));
CREATE TABLE IF NOT EXISTS tokens (
  token_hash TEXT PRIMARY KEY, role TEXT NOT NULL, study TEXT, annotator TEXT, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS answers (
  study TEXT NOT NULL, annotator TEXT NOT NULL, dialogue_id TEXT NOT NULL, dimension TEXT NOT NULL,
  score INTEGER NOT NULL CHECK (score BETWEEN 0 AND 4), seconds REAL, rubric_version TEXT NOT NULL,
  answered_at TEXT NOT NULL, source TEXT NOT NULL DEFAULT 'page',
  PRIMARY KEY (study, annotator, dialogue_id, dimension));
CREATE TABLE IF NOT EXISTS item_state (
  study TEXT NOT NULL, annotator TEXT NOT NULL, dialogue_id TEXT NOT NULL, note TEXT NOT NULL DEFAULT '',
  flagged INTEGER NOT NULL DEFAULT 0, skipped INTEGER NOT NULL DEFAULT 0, seconds REAL,
  updated_at TEXT NOT NULL, PRIMARY KEY (study, annotator, dialogue_id));
"""


def default_store_path(run_dir: str | Path) -> Path:
    """Where a run's annotations live when no --store is given: beside the (local) run folder."""
    return Path(run_dir) / STORE_DIR / STORE_FILE


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(18)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


class AnnotationStore:
    """One SQLite file; safe to share between threads (one connection per thread) and processes."""

    def __init__(self, path: str | Path, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.exists():
            raise AnnotationStoreError(f"no annotation store at {self.path} (create a study first: "
                                       "esc-eval annotate study RUN ...)")
        if create:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise AnnotationStoreError(f"cannot create {self.path.parent}: {e.strerror or e}") from e
        self._local = threading.local()
        self._dimensions: dict[str, list[str]] = {}
        con = self._con()
        with con:
            con.executescript(_SCHEMA)
            con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        if int(version) != SCHEMA_VERSION:
            raise AnnotationStoreError(f"{self.path}: store schema version {version}, this esc-eval reads {SCHEMA_VERSION}")

    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            try:
                con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
                con.execute("PRAGMA journal_mode=WAL")
                con.execute("PRAGMA synchronous=FULL")
                con.execute("PRAGMA foreign_keys=ON")
            except sqlite3.Error as e:
                raise AnnotationStoreError(f"{self.path}: cannot open the annotation store ({e})") from e
            con.row_factory = sqlite3.Row
            self._local.con = con
        return con

    def _write(self, fn) -> Any:
        """Run fn(connection) in one IMMEDIATE transaction (the write lock taken up front, so two
        writers queue on the busy timeout rather than fail on a lock upgrade)."""
        con = self._con()
        con.execute("BEGIN IMMEDIATE")
        try:
            result = fn(con)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
        return result

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    # -- studies ----------------------------------------------------------------------------
    def create_study(self, name: str, config: dict[str, Any], queues: dict[str, list[tuple[str, str]]],
                     rubric_version: str) -> dict[str, str]:
        """Store a study and each annotator's queue of (dialogue_id, language); returns new tokens:
        one per annotator and, if the store has none yet, an admin token (key "admin")."""
        tokens = {a: new_token() for a in queues}

        def write(con: sqlite3.Connection) -> dict[str, str]:
            if con.execute("SELECT 1 FROM studies WHERE study = ?", (name,)).fetchone():
                raise AnnotationStoreError(f"study {name!r} already exists in {self.path}")
            now = _now()
            con.execute("INSERT INTO studies VALUES (?, ?, ?, ?)", (name, now, json.dumps(config), rubric_version))
            con.executemany("INSERT INTO queue VALUES (?, ?, ?, ?, ?)",
                            [(name, a, i, did, lang) for a, items in queues.items() for i, (did, lang) in enumerate(items)])
            con.executemany("INSERT INTO tokens VALUES (?, 'annotator', ?, ?, ?)",
                            [(hash_token(t), name, a, now) for a, t in tokens.items()])
            out = dict(tokens)
            if not con.execute("SELECT 1 FROM tokens WHERE role = ?", (ADMIN,)).fetchone():
                out[ADMIN] = new_token()
                con.execute("INSERT INTO tokens VALUES (?, ?, NULL, NULL, ?)", (hash_token(out[ADMIN]), ADMIN, now))
            return out

        return self._write(write)

    def reissue_token(self, study: str | None, annotator: str | None) -> str:
        """A new token for an annotator of a study (or the admin when annotator is None); the old one stops working."""
        token = new_token()

        def write(con: sqlite3.Connection) -> None:
            if annotator is None:
                con.execute("DELETE FROM tokens WHERE role = ?", (ADMIN,))
                con.execute("INSERT INTO tokens VALUES (?, ?, NULL, NULL, ?)", (hash_token(token), ADMIN, _now()))
                return
            self._check_annotator(con, study, annotator)
            con.execute("DELETE FROM tokens WHERE role = 'annotator' AND study = ? AND annotator = ?", (study, annotator))
            con.execute("INSERT INTO tokens VALUES (?, 'annotator', ?, ?, ?)", (hash_token(token), study, annotator, _now()))

        self._write(write)
        return token

    def studies(self) -> list[dict[str, Any]]:
        rows = self._con().execute("SELECT study, created_at, config, rubric_version FROM studies ORDER BY created_at").fetchall()
        return [{"study": r["study"], "created_at": r["created_at"], "config": json.loads(r["config"]),
                 "rubric_version": r["rubric_version"]} for r in rows]

    def study(self, name: str) -> dict[str, Any]:
        for s in self.studies():
            if s["study"] == name:
                return s
        known = [s["study"] for s in self.studies()]
        raise AnnotationStoreError(f"no study {name!r} in {self.path}" + (f" (studies: {', '.join(known)})" if known
                                                                           else " (it holds no study yet)"))

    def dimensions(self, study: str) -> list[str]:
        """The dimensions a study's annotators score (study_dimensions of its config; a study's
        config never changes once made, so it is read once)."""
        dims = self._dimensions.get(study)
        if dims is None:
            dims = self._dimensions[study] = study_dimensions(self.study(study)["config"])
        return dims

    def _check_study_dimension(self, study: str, dimension: str) -> None:
        dims = self.dimensions(study)
        if dimension not in dims:
            raise AnnotationStoreError(f"dimension {dimension!r} is not scored in study {study!r} (its dimensions: "
                                       f"{', '.join(dims)})")

    def annotators(self, study: str) -> list[str]:
        self.study(study)
        rows = self._con().execute("SELECT DISTINCT annotator FROM queue WHERE study = ? ORDER BY annotator", (study,))
        return [r[0] for r in rows]

    def queue(self, study: str, annotator: str) -> list[tuple[str, str]]:
        """The annotator's (dialogue_id, language) in their order."""
        rows = self._con().execute("SELECT dialogue_id, language FROM queue WHERE study = ? AND annotator = ? "
                                   "ORDER BY position", (study, annotator)).fetchall()
        if not rows:
            self._check_annotator(self._con(), study, annotator)
        return [(r[0], r[1]) for r in rows]

    def _check_annotator(self, con: sqlite3.Connection, study: str | None, annotator: str) -> None:
        if not con.execute("SELECT 1 FROM queue WHERE study = ? AND annotator = ? LIMIT 1", (study, annotator)).fetchone():
            self.study(study or "")
            raise AnnotationStoreError(f"annotator {annotator!r} is not in study {study!r}")

    def token_identity(self, token: str) -> dict[str, str | None] | None:
        """{"role", "study", "annotator"} of a token, or None when it is unknown."""
        if not token:
            return None
        row = self._con().execute("SELECT role, study, annotator FROM tokens WHERE token_hash = ?",
                                  (hash_token(token),)).fetchone()
        return None if row is None else {"role": row["role"], "study": row["study"], "annotator": row["annotator"]}

    # -- answers ----------------------------------------------------------------------------
    def _assigned(self, con: sqlite3.Connection, study: str, annotator: str, dialogue_id: str) -> None:
        if not con.execute("SELECT 1 FROM queue WHERE study = ? AND annotator = ? AND dialogue_id = ?",
                           (study, annotator, dialogue_id)).fetchone():
            self._check_annotator(con, study, annotator)
            raise AnnotationStoreError(f"dialogue {dialogue_id!r} is not in {annotator}'s queue of study {study!r}")

    def save_answer(self, study: str, annotator: str, dialogue_id: str, dimension: str, score: Any,
                    seconds: Any = None, rubric_version: str | None = None, source: str = "page") -> dict[str, Any]:
        """Validate, then write one answer (replacing that annotator's earlier answer to it)."""
        dim, value, secs = check_dimension(dimension), check_score(score), check_seconds(seconds)
        self._check_study_dimension(study, dim)
        version = rubric_version or self.study(study)["rubric_version"]
        at = _now()

        def write(con: sqlite3.Connection) -> None:
            self._assigned(con, study, annotator, dialogue_id)
            con.execute(
                "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (study, annotator, dialogue_id, dimension) "
                "DO UPDATE SET score = excluded.score, seconds = excluded.seconds, rubric_version = excluded.rubric_version, "
                "answered_at = excluded.answered_at, source = excluded.source",
                (study, annotator, dialogue_id, dim, value, secs, version, at, source))

        self._write(write)
        return {"dimension": dim, "score": value, "answered_at": at}

    def save_item_state(self, study: str, annotator: str, dialogue_id: str, *, note: str | None = None,
                        flagged: bool | None = None, skipped: bool | None = None, seconds: Any = None) -> dict[str, Any]:
        """Note, flag and skip of one dialogue (fields left None keep their stored value)."""
        if note is not None and (not isinstance(note, str) or len(note) > 20_000):
            raise AnnotationStoreError("note must be text of at most 20,000 characters")
        secs = check_seconds(seconds)

        def write(con: sqlite3.Connection) -> dict[str, Any]:
            self._assigned(con, study, annotator, dialogue_id)
            row = con.execute("SELECT note, flagged, skipped, seconds FROM item_state WHERE study = ? AND annotator = ? "
                              "AND dialogue_id = ?", (study, annotator, dialogue_id)).fetchone()
            state = dict(row) if row else {"note": "", "flagged": 0, "skipped": 0, "seconds": None}
            if note is not None:
                state["note"] = note
            if flagged is not None:
                state["flagged"] = int(bool(flagged))
            if skipped is not None:
                state["skipped"] = int(bool(skipped))
            if secs is not None:
                state["seconds"] = secs
            con.execute("INSERT OR REPLACE INTO item_state VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (study, annotator, dialogue_id, state["note"], state["flagged"], state["skipped"],
                         state["seconds"], _now()))
            return {"note": state["note"], "flagged": bool(state["flagged"]), "skipped": bool(state["skipped"])}

        return self._write(write)

    def import_answers(self, study: str, rows: Iterable[dict[str, Any]], source: str) -> int:
        """Answers from elsewhere (e.g. Label Studio) into a study, all or nothing: every row is
        checked (annotator in the study, dialogue in their queue, dimension, score) before one is written."""
        rows = list(rows)
        version = self.study(study)["rubric_version"]
        clean, errors = [], []
        con = self._con()
        for i, r in enumerate(rows):
            try:
                self._assigned(con, study, str(r["annotator"]), str(r["dialogue_id"]))
                dim = check_dimension(r["dimension"])
                self._check_study_dimension(study, dim)
                clean.append((study, str(r["annotator"]), str(r["dialogue_id"]), dim,
                              check_score(r["score"]), check_seconds(r.get("seconds")),
                              str(r.get("rubric_version") or version), str(r.get("answered_at") or _now()), source))
            except AnnotationStoreError as e:
                errors.append(f"{r.get('where', f'row {i}')}: {e}")
        if errors:
            more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
            raise AnnotationStoreError(f"{len(errors)} bad answer(s), nothing imported: " + "; ".join(errors[:5]) + more)

        def write(con: sqlite3.Connection) -> int:
            con.executemany(
                "INSERT INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (study, annotator, dialogue_id, dimension) "
                "DO UPDATE SET score = excluded.score, seconds = excluded.seconds, rubric_version = excluded.rubric_version, "
                "answered_at = excluded.answered_at, source = excluded.source", clean)
            return len(clean)

        return self._write(write)

    def answers(self, study: str, annotator: str | None = None, dialogue_id: str | None = None) -> pd.DataFrame:
        """Answer rows (ANSWER_COLUMNS), optionally of one annotator and one dialogue."""
        sql, args = "SELECT * FROM answers WHERE study = ?", [study]
        if annotator is not None:
            sql, args = sql + " AND annotator = ?", [*args, annotator]
        if dialogue_id is not None:
            sql, args = sql + " AND dialogue_id = ?", [*args, dialogue_id]
        rows = self._con().execute(sql + " ORDER BY annotator, dialogue_id, dimension", args).fetchall()
        return pd.DataFrame([dict(r) for r in rows], columns=ANSWER_COLUMNS)

    def item_states(self, study: str, annotator: str | None = None) -> pd.DataFrame:
        sql, args = "SELECT annotator, dialogue_id, note, flagged, skipped, seconds FROM item_state WHERE study = ?", [study]
        if annotator is not None:
            sql, args = sql + " AND annotator = ?", [*args, annotator]
        rows = self._con().execute(sql, args).fetchall()
        return pd.DataFrame([dict(r) for r in rows], columns=["annotator", "dialogue_id", "note", "flagged", "skipped",
                                                              "seconds"])

    def item_state(self, study: str, annotator: str, dialogue_id: str) -> dict[str, Any]:
        row = self._con().execute("SELECT note, flagged, skipped FROM item_state WHERE study = ? AND annotator = ? "
                                  "AND dialogue_id = ?", (study, annotator, dialogue_id)).fetchone()
        return {"note": row["note"], "flagged": bool(row["flagged"]), "skipped": bool(row["skipped"])} if row else \
            {"note": "", "flagged": False, "skipped": False}

    def signature(self, study: str) -> tuple:
        """Changes when an answer or an item state of the study is written (the live results are
        recomputed only then): counts and latest write times, a few ms even at 60K answers."""
        con = self._con()
        a = con.execute("SELECT COUNT(*), MAX(answered_at) FROM answers WHERE study = ?", (study,)).fetchone()
        s = con.execute("SELECT COUNT(*), MAX(updated_at) FROM item_state WHERE study = ?", (study,)).fetchone()
        return tuple(a) + tuple(s)

    def next_open(self, study: str, annotator: str, after: int) -> tuple[int | None, int]:
        """(the first queue position after `after`, wrapping round, whose dialogue is neither
        complete nor skipped, or None; how many such remain). Two indexed queries: milliseconds
        whatever the queue's length and the answers stored."""
        where = ("FROM queue q WHERE q.study = ? AND q.annotator = ? AND (SELECT COUNT(*) FROM answers a "
                 "WHERE a.study = q.study AND a.annotator = q.annotator AND a.dialogue_id = q.dialogue_id) < ? "
                 "AND NOT EXISTS (SELECT 1 FROM item_state s WHERE s.study = q.study AND s.annotator = q.annotator "
                 "AND s.dialogue_id = q.dialogue_id AND s.skipped = 1)")
        args = (study, annotator, len(self.dimensions(study)))
        con = self._con()
        row = con.execute(f"SELECT q.position {where} ORDER BY q.position <= ?, q.position LIMIT 1", (*args, after)).fetchone()
        remaining = con.execute(f"SELECT COUNT(*) {where}", args).fetchone()[0]
        return (None if row is None else int(row[0])), int(remaining)

    def progress(self, study: str) -> list[dict[str, Any]]:
        """Per annotator: dialogues assigned, done (every dimension of the study scored), skipped, flagged,
        answers given, median seconds per done dialogue (its last answer's time since it opened)."""
        import statistics

        con = self._con()
        assigned = dict(con.execute("SELECT annotator, COUNT(*) FROM queue WHERE study = ? GROUP BY annotator", (study,)).fetchall())
        n_answers = dict(con.execute("SELECT annotator, COUNT(*) FROM answers WHERE study = ? GROUP BY annotator",
                                     (study,)).fetchall())
        done: dict[str, list[float | None]] = {a: [] for a in assigned}
        for a, secs in con.execute("SELECT annotator, MAX(seconds) FROM answers WHERE study = ? "
                                   "GROUP BY annotator, dialogue_id HAVING COUNT(*) = ?", (study, len(self.dimensions(study)))):
            done.setdefault(a, []).append(secs)
        marks = {a: (int(f or 0), int(s or 0)) for a, f, s in con.execute(
            "SELECT annotator, SUM(flagged), SUM(skipped) FROM item_state WHERE study = ? GROUP BY annotator", (study,))}
        out = []
        for a in sorted(assigned):
            secs = [x for x in done.get(a, []) if x is not None]
            flagged, skipped = marks.get(a, (0, 0))
            out.append({"annotator": a, "assigned": int(assigned[a]), "done": len(done.get(a, [])), "skipped": skipped,
                        "flagged": flagged, "answers": int(n_answers.get(a, 0)),
                        "median_seconds": float(statistics.median(secs)) if secs else None})
        return out
