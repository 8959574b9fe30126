"""What the annotation page can ask, and who may ask it (the HTTP server is a thin shell over this).

Who is asking:
- bound to a loopback address (the default), everyone on this machine is trusted: the page names
  its annotator (`?annotator=a1`), and a request without one may see results and create studies;
- bound to another address, every API call carries a token (header X-Annotator-Token): an
  annotator's token opens only their own queue of their own study; the admin token (made with
  the store's first study) opens results, progress and study creation, and answers nothing.
Nobody is shown another annotator's answers, a dialogue's model, card or id: an item is its
position in the asker's own queue, its language and its turns.
"""
from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable

import pandas as pd

from esc_eval.analysis.annotation.answers import AnnotationStoreError, answers_long, study_dimensions
from esc_eval.analysis.web.annotation_results import live_results
from esc_eval.analysis.annotation.store import ADMIN, AnnotationStore
from esc_eval.analysis.annotation.study import create_study
from esc_eval.analysis.results.loaders import load_scores
from esc_eval.analysis.annotation.rubric import annotation_rubric, annotation_rubric_version
from esc_eval.analysis.web.viewer import ResultsViewer
from esc_eval.sim.judging.dimensions import ALL_DIMENSION_NAMES, DIMENSION_NAMES
from esc_eval.sim.runs.storage import as_location

log = logging.getLogger(__name__)


class Forbidden(AnnotationStoreError):
    """The asker may not do this (HTTP 403); an unknown token is Unauthorized (401)."""


class Unauthorized(Forbidden):
    pass


@dataclass(frozen=True)
class Identity:
    role: str  # "annotator" | "admin" | "local" (loopback without an annotator)
    annotator: str | None = None
    study: str | None = None  # an annotator token's study

    @property
    def sees_results(self) -> bool:
        return self.role in ("admin", "local")


class AnnotationService:
    """The dialogues of the runs (the viewer's index: no turns held in memory) and a store."""

    def __init__(self, run_dirs: Iterable[str | os.PathLike[str]], store: AnnotationStore, require_tokens: bool = False,
                 viewer: ResultsViewer | None = None):
        self.run_dirs = [as_location(p) for p in run_dirs]  # local Paths; storage URIs stay strings
        self.store = store
        self.require_tokens = require_tokens
        self.viewer = viewer or ResultsViewer(self.run_dirs)
        idx = self.viewer.index
        # dialogue id -> (run label, part, row) of its first run: opening a dialogue is a dict lookup
        # plus one part read.
        first = idx.drop_duplicates("dialogue_id")
        self._where = dict(zip(first["dialogue_id"], zip(first["run"].astype(str), first["_part"].astype(int),
                                                         first["_row"].astype(int))))
        self._queues: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._lock = threading.Lock()
        self._judge_scores: pd.DataFrame | None = None
        self._results: dict[str, tuple[tuple, dict, float]] = {}
        self._results_lock = threading.Lock()

    # -- who --------------------------------------------------------------------------------
    def identify(self, token: str | None, annotator: str | None) -> Identity:
        if token:
            who = self.store.token_identity(token)
            if who is None:
                raise Unauthorized("unknown annotator token: ask the study's organiser for yours "
                                   "(esc-eval annotate tokens)")
            return Identity(who["role"], who["annotator"], who["study"])
        if self.require_tokens:
            raise Unauthorized("this server needs a token (X-Annotator-Token): open the link with your token")
        return Identity("annotator", annotator, None) if annotator else Identity("local")

    def _study_of(self, who: Identity, study: str | None) -> str:
        if who.study is not None:
            if study and study != who.study:
                raise Forbidden(f"your token is for study {who.study!r}, not {study!r}")
            return who.study
        if study:
            self.store.study(study)
            return study
        studies = self.store.studies()
        if len(studies) == 1:
            return studies[0]["study"]
        raise AnnotationStoreError("name the study (?study=...): " + (", ".join(s["study"] for s in studies)
                                                                        or "the store holds none yet"))

    def _annotator(self, who: Identity) -> str:
        if who.role != "annotator" or not who.annotator:
            raise Forbidden("only an annotator answers: open the page as one (?annotator=NAME, or your token's link)")
        return who.annotator

    def _queue(self, study: str, annotator: str) -> list[tuple[str, str]]:
        key = (study, annotator)
        if key not in self._queues:  # queues never change once a study is made
            self._queues[key] = self.store.queue(study, annotator)
        return self._queues[key]

    def _dialogue_at(self, study: str, annotator: str, position: Any) -> tuple[int, str, str]:
        queue = self._queue(study, annotator)
        try:
            pos = int(position)
        except (TypeError, ValueError):
            raise AnnotationStoreError(f"position {position!r} is not an integer") from None
        if not 0 <= pos < len(queue):
            raise AnnotationStoreError(f"position {pos} is outside {annotator}'s queue (0-{len(queue) - 1})")
        did, language = queue[pos]
        return pos, did, language

    # -- what the page asks -----------------------------------------------------------------
    def session(self, who: Identity, study: str | None = None) -> dict[str, Any]:
        studies = [s for s in self.store.studies() if who.study is None or s["study"] == who.study]
        if who.role == "annotator":
            studies = [s for s in studies if who.annotator in self.store.annotators(s["study"])]
        # `dimensions`: the named study's (or the seven); each study lists its own (safety is optional)
        named = next((s for s in studies if s["study"] == study), None)
        return {"role": who.role, "annotator": who.annotator, "sees_results": who.sees_results,
                "can_create": who.sees_results,
                "dimensions": study_dimensions(named["config"]) if named else DIMENSION_NAMES,
                "rubric_version": named["rubric_version"] if named else annotation_rubric_version(),
                "studies": [{"study": s["study"], "created_at": s["created_at"], "dimensions": study_dimensions(s["config"]),
                             **({"overlap": s["config"].get("overlap"), "n_dialogues": s["config"].get("n_dialogues"),
                                 "annotators": s["config"].get("annotators")} if who.sees_results else {})}
                            for s in studies]}

    def rubric(self, language: str) -> dict[str, Any]:
        # every dimension a study may ask for: the page shows those of the study it is on
        return {"language": language, "version": annotation_rubric_version(),
                "dimensions": annotation_rubric(language, tuple(ALL_DIMENSION_NAMES))}

    def item(self, who: Identity, study: str | None, position: Any) -> dict[str, Any]:
        name = self._study_of(who, study)
        annotator = self._annotator(who)
        pos, did, language = self._dialogue_at(name, annotator, position)
        if did not in self._where:
            raise KeyError(f"dialogue {pos} of your queue is not in the run(s) this server was started with "
                           f"({', '.join(str(p) for p in self.run_dirs)})")
        run, part, row = self._where[did]
        turns = self.viewer.runs[run].dialogue_row(part, row)["turns"] or []
        mine = self.store.answers(name, annotator, did)
        state = self.store.item_state(name, annotator, did)
        return {"study": name, "position": pos, "total": len(self._queue(name, annotator)), "language": language,
                "turns": [{"speaker": t["speaker"], "text": t["text"]} for t in turns],
                "answers": {r.dimension: int(r.score) for r in mine.itertuples()}, **state}

    def next_position(self, who: Identity, study: str | None, after: Any = -1) -> dict[str, Any]:
        """The first position after `after` (wrapping round) that is neither complete nor skipped."""
        name = self._study_of(who, study)
        annotator = self._annotator(who)
        try:
            after = int(after)
        except (TypeError, ValueError):
            raise AnnotationStoreError(f"after {after!r} is not an integer") from None
        self._queue(name, annotator)  # an annotator outside the study is an error, not an empty queue
        position, remaining = self.store.next_open(name, annotator, after)
        return {"position": position, "remaining": remaining}

    def answer(self, who: Identity, body: dict[str, Any]) -> dict[str, Any]:
        name = self._study_of(who, body.get("study"))
        annotator = self._annotator(who)
        _, did, _ = self._dialogue_at(name, annotator, body.get("position"))
        return self.store.save_answer(name, annotator, did, body.get("dimension", ""), body.get("score"),
                                      seconds=body.get("seconds"))

    def mark(self, who: Identity, body: dict[str, Any]) -> dict[str, Any]:
        name = self._study_of(who, body.get("study"))
        annotator = self._annotator(who)
        _, did, _ = self._dialogue_at(name, annotator, body.get("position"))
        return self.store.save_item_state(name, annotator, did, note=body.get("note"), flagged=body.get("flagged"),
                                          skipped=body.get("skipped"), seconds=body.get("seconds"))

    def progress(self, who: Identity, study: str | None) -> dict[str, Any]:
        name = self._study_of(who, study)
        rows = self.store.progress(name)
        if not who.sees_results:
            rows = [r for r in rows if r["annotator"] == who.annotator]
        return {"study": name, "annotators": rows}

    def judge_scores(self) -> pd.DataFrame:
        with self._lock:
            if self._judge_scores is None:
                self._judge_scores = load_scores(self.run_dirs, extra_dimensions=True)  # safety vs humans too
            return self._judge_scores

    def results(self, who: Identity, study: str | None) -> dict[str, Any]:
        """The live results, recomputed when answers arrived, but at most once per 5x the time the
        last computation took (a whole 8,500-dialogue study takes seconds): the organiser's panel
        never takes more than a sixth of a core from the annotators. `as_of` says when it was
        computed and `stale` whether answers arrived since."""
        if not who.sees_results:
            raise Forbidden("results are for the study's organiser (the admin token), not for annotators")
        name = self._study_of(who, study)
        with self._results_lock:
            sig = self.store.signature(name)
            cached = self._results.get(name)
            if cached and (cached[0] == sig or time.monotonic() < cached[2]):
                return {**cached[1], "stale": cached[0] != sig}
            t0 = time.monotonic()
            out = {"study": name, **live_results(answers_long(self.store.answers(name)), self.judge_scores()),
                   "progress": self.store.progress(name), "as_of": dt.datetime.now(dt.timezone.utc).isoformat()}
            took = time.monotonic() - t0
            self._results[name] = (sig, out, time.monotonic() + 5 * took)
            return {**out, "stale": False}

    def create(self, who: Identity, body: dict[str, Any]) -> dict[str, Any]:
        if not who.sees_results:
            raise Forbidden("only the organiser (the admin token, or a local page) creates studies")
        out = create_study(self.store, self.viewer.index, body, runs=[str(p) for p in self.run_dirs])
        if who.role == "admin":
            out["tokens"].pop(ADMIN, None)  # the asker already holds it
        return out
