"""The records that flow through card construction: a source item, a dialogue turn, a rejection.

Every input (a QA post or a multi-turn dialogue) becomes a `SourceItem`; every item or file that
cannot go on becomes a `Rejection` naming the stage and the reason. Failures are data.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from esc_eval.sim.runs.records import stable_id

Kind = Literal["qa", "md"]
Speaker = Literal["seeker", "supporter"]

# canonical dataset key -> the `source` value the official ESC-Eval card JSON uses
OFFICIAL_SOURCE_NAMES = {
    "epitome": "EPITOME",
    "mhp_reddit": "MHP",
    "psych8k": "Psych",
    "esconv": "ESconv",
    "extes": "ExTES",
    "psyqa": "PsyQA",
    "smile": "smile",
}
DATASET_LANGUAGE = {
    "epitome": "en", "mhp_reddit": "en", "psych8k": "en", "esconv": "en", "extes": "en",
    "psyqa": "zh", "smile": "zh",
}
DATASET_KIND = {
    "epitome": "qa", "mhp_reddit": "qa", "psych8k": "qa", "psyqa": "qa",
    "esconv": "md", "extes": "md", "smile": "md",
}
_DATASET_ALIASES = {
    "epitome": "epitome", "mhp": "mhp_reddit", "mhp_reddit": "mhp_reddit", "mhp reddit": "mhp_reddit",
    "mhp-reddit": "mhp_reddit", "reddit": "mhp_reddit", "psych8k": "psych8k", "psych": "psych8k",
    "psych-8k": "psych8k", "esconv": "esconv", "failedesconv": "esconv", "extes": "extes",
    "psyqa": "psyqa", "smile": "smile", "smilechat": "smile",
}


def canonical_dataset(name: str) -> str:
    """'ESconv' / 'MHP' / 'Psych' / 'smile' ... -> the canonical key (esconv, mhp_reddit, ...)."""
    key = _DATASET_ALIASES.get(str(name).strip().lower())
    if key is None:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(sorted(OFFICIAL_SOURCE_NAMES))}")
    return key


class Turn(BaseModel):
    """One utterance of a multi-turn dialogue."""

    model_config = ConfigDict(frozen=True)
    speaker: Speaker = Field(description="seeker (the person in distress) or supporter.")
    text: str = Field(description="What was said.")


class SourceItem(BaseModel):
    """One input of card extraction: a single-turn post (kind qa) or a dialogue (kind md)."""

    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="Stable item id: a hash of the dataset and the native id.")
    dataset: str = Field(description="Canonical dataset key (epitome, mhp_reddit, psych8k, psyqa, esconv, extes, smile).")
    language: Literal["en", "zh"] = Field(description="Language of the text.")
    kind: Kind = Field(description="qa: single-turn post; md: multi-turn dialogue.")
    text: str | None = Field(None, description="The post (qa items).")
    turns: list[Turn] | None = Field(None, description="The dialogue (md items).")
    situation: str | None = Field(None, description="The dataset's situation summary, if it has one (ESConv, ExTES).")
    native_id: str = Field(description="The id inside the source dataset (or index/content hash when it has none).")
    source_file: str = Field(description="The file the item was read from.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Dataset-specific extras (problem_type, scene, ...).")

    @property
    def source_name(self) -> str:
        """The official card JSON's `source` value for this item's dataset."""
        return OFFICIAL_SOURCE_NAMES.get(self.dataset, self.dataset)


class Rejection(BaseModel):
    """An item (or a whole file) that stopped at some stage, with the reason."""

    model_config = ConfigDict(extra="forbid")
    stage: str = Field(description="read | extract | filter | dedup | classify | annotation.")
    reason: str = Field(description="Why it stopped, in words a person can act on.")
    item_id: str | None = Field(None, description="The item id, when the failure is about one item.")
    dataset: str | None = Field(None, description="Dataset key, when known.")
    source_file: str | None = Field(None, description="The file concerned.")
    locator: str | None = Field(None, description="Where in the file: record index, line number, file name.")


def item_id(dataset: str, native_id: str) -> str:
    return stable_id("source-item", dataset, native_id)
