"""The annotation page's web app: the page and a JSON API over an AnnotationService, served by
uvicorn (the guard and the server: http_app.py). Bound to 127.0.0.1 by default.

    GET  /                              the page
    GET  /api/session[?study=]          who the asker is, the studies they may open
    GET  /api/rubric?language=en|zh     the seven rubrics (paper Figures 12-19 + Table 16)
    GET  /api/item?study=&position=     one dialogue of the asker's queue, with their own answers
    GET  /api/next?study=&after=        the next position neither complete nor skipped
    POST /api/answer   {study, position, dimension, score, seconds}   saved before the reply
    POST /api/mark     {study, position, note?, flagged?, skipped?, seconds?}
    GET  /api/progress?study=           the asker's progress (everyone's for the organiser)
    GET  /api/results?study=            agreement, ICC, judge vs human (organiser only)
    POST /api/study    {name, annotators, overlap, sample, strata, ...}    create a study (organiser)

Who asks: header X-Annotator-Token (required off loopback), or on loopback ?annotator=NAME (the
page sends header X-Annotator); known before the request is validated.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Any, Callable

from pydantic import BaseModel, BeforeValidator, Field

from esc_eval.analysis.annotation.answers import check_dimension, check_score, check_seconds
from esc_eval.analysis.annotation.study import study_config
from esc_eval.analysis.web.annotation_service import AnnotationService, Forbidden, Unauthorized
from esc_eval.analysis.web.http_app import Server, is_loopback, json_app


@functools.lru_cache(maxsize=1)
def annotation_page() -> str:
    """The single-page front end (package data next to this module)."""
    return Path(__file__).with_name("annotate.html").read_text(encoding="utf-8")


class Ask(BaseModel):
    """The GET routes' parameters."""

    study: str | None = Field(None, description="The study (default: the token's, or the store's only one).")
    position: int | None = Field(None, description="A position in the asker's queue (/api/item).")
    after: int = Field(-1, description="The position to look after (/api/next; -1: from the start).")
    language: str = Field("en", description="The rubric's language (/api/rubric).")


class Item(BaseModel):
    """What a POST about one dialogue of the asker's queue names."""

    study: str | None = Field(None, description="The study (default: the token's, or the store's only one).")
    position: int = Field(description="The dialogue's position in the asker's queue.")
    seconds: Annotated[float | None, BeforeValidator(check_seconds)] = Field(None, description="Time on it so far.")


class Answer(Item):
    """POST /api/answer: one score, saved before the reply."""

    dimension: Annotated[str, BeforeValidator(check_dimension)] = Field(description="A dimension the study scores.")
    score: Annotated[int, BeforeValidator(check_score)] = Field(description="The score, an integer 0-4.")


class Mark(Item):
    """POST /api/mark: a dialogue's note, flag and skip (None keeps the stored value)."""

    note: str | None = Field(None, max_length=20_000, description="Free text, at most 20,000 characters.")
    flagged: bool | None = Field(None, description="Flagged for the organiser.")
    skipped: bool | None = Field(None, description="Skipped: /api/next passes it by.")


def make_annotation_server(service: AnnotationService, host: str = "127.0.0.1", port: int = 8766) -> Server:
    """A server bound to host:port (port 0 = any free port). Off loopback the service must require tokens."""
    loopback = is_loopback(host)
    if not loopback and not service.require_tokens:
        raise ValueError(f"--host {host} is not a loopback address: the service must require annotator tokens")

    def asked(fn: Callable[[Any, Any], Any], parse: Callable[[dict[str, Any]], Any]) -> Callable[[Any, dict], Any]:
        def run(request: Any, data: dict[str, Any]) -> Any:
            who = service.identify(request.headers.get("X-Annotator-Token"),
                                   request.headers.get("X-Annotator") or data.get("annotator"))
            return fn(who, parse(data))
        return run

    gets = {
        "/api/session": lambda who, q: service.session(who, q.study),
        "/api/rubric": lambda who, q: service.rubric(q.language),
        "/api/item": lambda who, q: service.item(who, q.study, q.position),
        "/api/next": lambda who, q: service.next_position(who, q.study, q.after),
        "/api/progress": lambda who, q: service.progress(who, q.study),
        "/api/results": lambda who, q: service.results(who, q.study),
    }
    posts = {
        "/api/answer": asked(lambda who, b: service.answer(who, b.model_dump()), Answer.model_validate),
        "/api/mark": asked(lambda who, b: service.mark(who, b.model_dump()), Mark.model_validate),
        "/api/study": asked(service.create, study_config),
    }
    gets = {path: asked(fn, Ask.model_validate) for path, fn in gets.items()}
    return Server(json_app(annotation_page, gets, posts, loopback=loopback, errors={Unauthorized: 401, Forbidden: 403}),
                  host, port)
