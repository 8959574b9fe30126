"""Fixtures of the analysis tests; the row builders live in analysis_testdata.py."""
from __future__ import annotations

from pathlib import Path

import pytest

from esc_eval.sim.runs.runfolder import RunFolder

@pytest.fixture
def make_run(tmp_path):
    """make_run(name, dialogues=[...], scores=[...], manifest={...}) -> Path of a run folder."""
    def _make(name: str = "run", dialogues: list[dict] | None = None, scores: list[dict] | None = None,
              manifest: dict | None = None, events: list[dict] | None = None) -> Path:
        folder = RunFolder(tmp_path / name)
        if dialogues:
            folder.write_part("dialogues", dialogues)
        if scores:
            folder.write_part("scores", scores)
        if manifest or events:
            folder.update_manifest(**(manifest or {}), **({"events": events} if events else {}))
        return folder.path
    return _make
