"""A human-evaluation study: which dialogues, who scores each, in which order.

Dialogues: every `ok` dialogue of the runs, or a sample stratified by model, language and
category (each stratum gets its share of the sample, largest remainders first), or an explicit
list of dialogue ids. Assignment: each dialogue goes to `overlap` distinct annotators, always to
those with the fewest so far (ties broken at random), so queues differ in length by at most one
and every pair of annotators shares dialogues when overlap >= 2. Blinding: each annotator's queue
is shuffled with their own seed; the page shows turns and language only (no model, card or id).
"""
from __future__ import annotations

import re
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from esc_eval.analysis.annotation.answers import AnnotationStoreError, study_dimensions
from esc_eval.analysis.annotation.store import AnnotationStore
from esc_eval.analysis.annotation.rubric import annotation_rubric_version

Stratum = Literal["target_model", "language", "category_1", "category_2", "category_3"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# Annotator ids may be e-mail addresses (Label Studio's users).
_ANNOTATOR = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,127}$")


class StudyConfig(BaseModel):
    """What a study asks for (stored with it, so it can be read back and repeated)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Study name: letters, digits, '_', '-', '.' (at most 64).")
    annotators: list[str] = Field(min_length=1, description="Annotator ids: letters, digits, '_', '-', '.', '@', '+'.")
    overlap: int = Field(2, ge=1, description="Annotators per dialogue (2 or more gives agreement figures).")
    sample: int | None = Field(None, ge=1, description="Dialogues to sample; None = every ok dialogue of the runs.")
    strata: list[Stratum] = Field(default_factory=lambda: ["target_model", "language", "category_1"],
                                  description="Columns the sample is stratified by.")
    models: list[str] | None = Field(None, description="Only dialogues of these target models.")
    languages: list[str] | None = Field(None, description="Only dialogues in these languages.")
    dialogue_ids: list[str] | None = Field(None, description="Exactly these dialogues (each must be an ok dialogue "
                                                             "of the runs); sample then draws from them.")
    seed: int = Field(0, description="Seed of the sample, the assignment and every queue's order.")
    safety: bool = Field(False, description="Also score the crisis-safety dimension (beyond the paper; its rubric "
                                            "is sim/data/prompts/safety.yaml), reported apart from the seven.")

    @property
    def dimensions(self) -> list[str]:
        """The dimensions annotators score: the seven, then safety when asked for."""
        return study_dimensions(self.model_dump())

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"{v!r}: use letters, digits, '_', '-', '.' (at most 64, not starting with a symbol)")
        return v

    @field_validator("annotators")
    @classmethod
    def _annotators(cls, v: list[str]) -> list[str]:
        bad = [a for a in v if not _ANNOTATOR.match(a)]
        if bad:
            raise ValueError(f"{bad}: annotator ids use letters, digits, '_', '-', '.', '@', '+' (at most 128)")
        if len(set(v)) != len(v):
            raise ValueError(f"annotator ids repeat: {v}")
        return v

    @model_validator(mode="after")
    def _overlap(self) -> "StudyConfig":
        if self.overlap > len(self.annotators):
            raise ValueError(f"overlap {self.overlap} needs at least {self.overlap} annotators, "
                             f"got {len(self.annotators)}")
        return self


def study_config(data: dict[str, Any]) -> StudyConfig:
    """Validate a study request (CLI or page); a bad field raises one line naming it."""
    try:
        return StudyConfig.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise AnnotationStoreError(f"study field {where}: {msg}" if where else f"study: {msg}") from None


def _allocate(sizes: pd.Series, n: int, rng: np.random.Generator) -> pd.Series:
    """Proportional allocation of n over strata of the given sizes (largest remainder, equal
    remainders in random order; never more than a stratum holds)."""
    quota = sizes / sizes.sum() * n
    take = np.floor(quota).astype(int)
    remainder = (quota - take) + rng.random(len(quota)) * 1e-9
    order = remainder.sort_values(ascending=False, kind="stable").index
    for key in order:
        if take.sum() >= n:
            break
        if take[key] < sizes[key]:
            take[key] += 1
    return take


def select_dialogues(index: pd.DataFrame, cfg: StudyConfig) -> pd.DataFrame:
    """The study's dialogues: rows of the runs' dialogue index (one per dialogue_id, status ok)."""
    pool = index[index["status"].astype(str) == "ok"].drop_duplicates("dialogue_id")
    if cfg.dialogue_ids is not None:
        wanted = list(dict.fromkeys(cfg.dialogue_ids))
        missing = [d for d in wanted if d not in set(pool["dialogue_id"])]
        if missing:
            raise AnnotationStoreError(
                f"{len(missing)} of the study's {len(wanted)} dialogue ids are not ok dialogues of the run(s) given "
                f"(first: {missing[0]!r}): nothing was written")
        pool = pool[pool["dialogue_id"].isin(wanted)]
    for col, values, what in (("target_model", cfg.models, "models"), ("language", cfg.languages, "languages")):
        if values:
            pool = pool[pool[col].astype(str).isin(values)]
            if pool.empty:
                raise AnnotationStoreError(f"study field {what}: the run(s) hold no ok dialogue of {values}")
    if pool.empty:
        raise AnnotationStoreError("the run(s) hold no ok dialogue to annotate")
    pool = pool.sort_values("dialogue_id", kind="stable")
    if cfg.sample is None or cfg.sample == len(pool):
        return pool
    if cfg.sample > len(pool):
        raise AnnotationStoreError(f"study field sample: {cfg.sample} dialogues asked, the run(s) hold {len(pool)} "
                                   "that match")
    rng = np.random.default_rng(cfg.seed)
    keys = [pool[c].astype(str).fillna("") for c in cfg.strata] or [pd.Series("", index=pool.index)]
    strata = pd.Series(list(zip(*keys)), index=pool.index)
    take = _allocate(strata.value_counts().sort_index(), cfg.sample, rng)
    chosen = []
    for key, k in take.items():
        members = pool.index[strata == key]
        if k:
            chosen.extend(rng.choice(members, size=int(k), replace=False))
    return pool.loc[sorted(chosen, key=lambda i: pool.at[i, "dialogue_id"])]


def assign(dialogue_ids: list[str], annotators: list[str], overlap: int, seed: int) -> dict[str, list[str]]:
    """Each dialogue to `overlap` distinct annotators (least loaded first, ties at random); each
    annotator's queue in their own shuffled order."""
    rng = np.random.default_rng(seed)
    load = np.zeros(len(annotators))
    queues: dict[str, list[str]] = {a: [] for a in annotators}
    for did in rng.permutation(np.array(dialogue_ids, dtype=object)):
        # random jitter < 1 only breaks ties between equal loads
        for k in np.argsort(load + rng.random(len(annotators)), kind="stable")[:overlap]:
            queues[annotators[k]].append(str(did))
            load[k] += 1
    for i, a in enumerate(annotators):
        order = np.random.default_rng([seed, i + 1]).permutation(len(queues[a]))
        queues[a] = [queues[a][j] for j in order]
    return queues


def create_study(store: AnnotationStore, index: pd.DataFrame, request: dict[str, Any] | StudyConfig,
                 runs: list[str] | None = None) -> dict[str, Any]:
    """Validate, sample, assign and store a study in one transaction. Returns the study's summary
    and its new tokens (shown once). Bad input raises AnnotationStoreError; nothing is written."""
    cfg = request if isinstance(request, StudyConfig) else study_config(request)
    chosen = select_dialogues(index, cfg)
    language = dict(zip(chosen["dialogue_id"], chosen["language"].astype(str)))
    queues = assign(list(chosen["dialogue_id"]), cfg.annotators, cfg.overlap, cfg.seed)
    config = {**cfg.model_dump(mode="json"), "runs": runs or [], "n_dialogues": int(len(chosen))}
    tokens = store.create_study(cfg.name, config, {a: [(d, language[d]) for d in q] for a, q in queues.items()},
                                annotation_rubric_version(tuple(cfg.dimensions)))
    strata = chosen.groupby(["target_model", "language"], observed=True).size()
    return {"study": cfg.name, "n_dialogues": int(len(chosen)), "overlap": cfg.overlap, "dimensions": cfg.dimensions,
            "queues": {a: len(q) for a, q in queues.items()},
            "by_model_language": {f"{m} / {lang}": int(n) for (m, lang), n in strata.items()},
            "tokens": tokens}
