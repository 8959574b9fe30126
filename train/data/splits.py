"""Seeded train/validation/test splits of judge annotations (paper 3.4: 7:1:2 at random).

Units are (dialogue_id, dimension) pairs, so the annotators of one label never straddle splits.
- `split_annotations(..., group="annotation")`: within each dimension (and language, when the
  items carry one: the official judges are per dimension and language) the units are shuffled
  with a seed derived from (seed, stratum) and cut 7:1:2 -> every dimension keeps the ratio.
- `group="dialogue"`: whole dialogues are assigned (all their dimensions together), so a test
  dialogue's text is never seen in training; the cut is stratified by the dialogues' first
  annotated dimension (every dimension still gets ~7:1:2 when dialogues carry all seven).
- `holdout_model="X"`: leave-one-model-out; the test split is every unit whose dialogue's
  target model is X, the rest is split train:validation in the same 7:1 proportion.
"""
from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from typing import Callable, Iterable, Literal, Sequence, TypeVar

from esc_eval.train.config import SPLIT_GROUP
from esc_eval.train.errors import TrainInputError

T = TypeVar("T")
Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")


def _rng(seed: int, stratum: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{stratum}".encode()).hexdigest()
    return random.Random(int(digest[:16], 16))


def _cut(keys: list, ratios: Sequence[float], rng: random.Random) -> dict:
    keys = sorted(keys)
    rng.shuffle(keys)
    total = sum(ratios)
    n = len(keys)
    n_test = round(n * ratios[2] / total) if len(ratios) > 2 else 0
    n_val = round(n * ratios[1] / total)
    n_train = n - n_val - n_test
    out = {}
    for i, k in enumerate(keys):
        out[k] = "train" if i < n_train else ("validation" if i < n_train + n_val else "test")
    return out


def split_keys(items: Iterable[T], key: Callable[[T], str], stratum: Callable[[T], str],
               seed: int = 0, ratios: Sequence[float] = (7, 1, 2),
               test_filter: Callable[[T], bool] | None = None) -> dict[Split, list[T]]:
    """Generic seeded stratified split. Items sharing a key go to the same split; each key's
    stratum is the stratum of its first item. test_filter: items selected by it form the test
    split (leave-one-out) and the rest is cut train:validation by ratios[0]:ratios[1]."""
    items = list(items)
    if len(ratios) != 3 or any(r < 0 for r in ratios) or ratios[0] <= 0:
        raise TrainInputError(f"split ratios must be three non-negative numbers with train > 0, got {list(ratios)}")
    key_stratum: dict[str, str] = {}
    held: set[str] = set()
    for it in items:
        k = key(it)
        key_stratum.setdefault(k, stratum(it))
        if test_filter is not None and test_filter(it):
            held.add(k)
    by_stratum: dict[str, list[str]] = defaultdict(list)
    for k, s in key_stratum.items():
        if k not in held:
            by_stratum[s].append(k)
    assignment: dict[str, str] = {k: "test" for k in held}
    cut_ratios = ratios if test_filter is None else (ratios[0], ratios[1], 0)
    for s, keys in by_stratum.items():
        assignment.update(_cut(keys, cut_ratios, _rng(seed, s)))
    out: dict[Split, list[T]] = {s: [] for s in SPLITS}
    for it in items:
        out[assignment[key(it)]].append(it)
    return out


def split_annotations(annotations: Iterable, seed: int = 0, ratios: Sequence[float] = (7, 1, 2),
                      group: Literal["annotation", "dialogue"] = SPLIT_GROUP,
                      holdout_model: str | None = None,
                      model_of: Callable[[str], str] | None = None) -> dict[Split, list]:
    """Split annotation rows (objects with dialogue_id, dimension, target_model) as described in
    the module docstring. model_of maps a dialogue id to its target model for holdout_model."""
    annotations = list(annotations)
    if group == "annotation":
        key = lambda a: f"{a.dialogue_id}\x00{a.dimension}"  # noqa: E731
    elif group == "dialogue":
        key = lambda a: a.dialogue_id  # noqa: E731
    else:
        raise TrainInputError(f"unknown split group {group!r} (annotation | dialogue)")
    stratum = lambda a: f"{a.dimension}/{getattr(a, 'language', '')}"  # noqa: E731
    test_filter = None
    if holdout_model is not None:
        def model(a) -> str:
            return a.target_model or (model_of(a.dialogue_id) if model_of else None) or "unknown"

        models = sorted({model(a) for a in annotations})
        if holdout_model not in models:
            raise TrainInputError(f"holdout_model {holdout_model!r} has no annotated dialogue; models: {models}")
        test_filter = lambda a: model(a) == holdout_model  # noqa: E731
    return split_keys(annotations, key, stratum, seed=seed, ratios=ratios, test_filter=test_filter)
