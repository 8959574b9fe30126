"""The dialogues a benchmark scores or replays (bench score, bench gpu, bench serve): a run folder or
official dialogue JSON given, else the official samples in ../shared, else runs/demo, else fresh
5-round dialogues of the scripted fake models on the sample cards."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from esc_eval.serve.registry.ref import ModelRef

REPO = Path(__file__).resolve().parents[2]
SHARED_DIALOGUES = REPO.parent / "shared" / "data" / "esc-eval" / "dialogues"
DEMO_RUN = REPO / "runs" / "demo"


def _ok_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("status") == "ok" and r.get("turns")]


def _from_run_folder(path: Path) -> list[dict[str, Any]]:
    from esc_eval.sim.runs.runfolder import RunFolder

    return _ok_rows(list(RunFolder(path, create=False).iter_rows("dialogues")))


def _from_official(path: Path) -> list[dict[str, Any]]:
    from esc_eval.sim.runs.official import official_dialogue_files, read_official_dialogues

    rows: list[dict[str, Any]] = []
    for f in official_dialogue_files(path):
        rows.extend(read_official_dialogues(f))
    return _ok_rows(rows)


def _fake_dialogues(n: int) -> list[dict[str, Any]]:
    """Fresh 5-round dialogues from the scripted fake seeker and target (no engine needed)."""
    from esc_eval.sim.pool.config import ExecutionConfig
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.sim.jobs.simulation import run_simulation

    with tempfile.TemporaryDirectory(prefix="bench-score-") as tmp:
        cfg = SimulationConfig(cards="sample", languages=["en"], limit=n, role=ModelRef(model="fake/seeker"),
                               targets=[ModelRef(model="fake/echo")], execution=ExecutionConfig(executor="local"))
        run_simulation(cfg, tmp)
        return _from_run_folder(Path(tmp))


def load_bench_dialogues(n: int, source: Path | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Up to n dialogue rows and where they came from: `source` (run folder or official JSON),
    else the official samples in ../shared, else runs/demo, else fake-model dialogues."""
    from esc_eval.sim.jobs.scoring import is_run_folder

    if source is not None:
        source = Path(source)
        if not source.exists():
            raise FileNotFoundError(f"{source}: no such run folder or official dialogue JSON")
        if is_run_folder(source):
            rows, kind = _from_run_folder(source), "run_folder"
        else:
            rows, kind = _from_official(source), "official_json"
        where = str(source)
    elif SHARED_DIALOGUES.is_dir():
        rows, kind, where = _from_official(SHARED_DIALOGUES), "official_sample", str(SHARED_DIALOGUES)
    elif DEMO_RUN.is_dir() and _from_run_folder(DEMO_RUN):
        rows, kind, where = _from_run_folder(DEMO_RUN), "demo_run_folder", str(DEMO_RUN)
    else:
        rows, kind, where = _fake_dialogues(n), "fake_generated", "fake/seeker x fake/echo on the sample cards"
    if not rows:
        raise ValueError(f"{where}: no completed dialogues to benchmark on")
    rows = rows[:n]
    return rows, {"kind": kind, "path": where, "dialogues": len(rows),
                  "languages": sorted({r["language"] for r in rows})}
