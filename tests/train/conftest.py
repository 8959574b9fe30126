"""Fixtures for the training tests (helpers in train_testdata.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from train_testdata import SHARED_DATA, make_tiny_llama_dir, make_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return make_tokenizer()


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory, tokenizer) -> Path:
    return make_tiny_llama_dir(tmp_path_factory.mktemp("tiny-llama"), tokenizer)


@pytest.fixture
def esc_samples() -> Path:
    if not (SHARED_DATA / "esc-eval").is_dir():
        pytest.skip(f"shared sample data not found at {SHARED_DATA} (the ESC-Eval release samples live outside the repo)")
    return SHARED_DATA


@pytest.fixture(autouse=True)
def no_ray_left_from_other_tests():
    """Several tests here check that bad input fails before Ray starts; a Ray another package's
    test left initialised in this pytest process would make that unobservable."""
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
    yield
