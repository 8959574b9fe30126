"""`esc-eval bench validity` as a user runs it: options in, the table printed, the JSON written."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from esc_eval.cli.app import app


def test_bench_validity_prints_the_table_and_writes_the_json(tmp_path):
    out = tmp_path / "validity.json"
    res = CliRunner().invoke(app, ["bench", "validity", "--seeds", "1", "--size", "6", "--check", "spoiled",
                                   "--n-boot", "50", "--work", str(tmp_path / "work"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "| spoiled |" in res.stdout and "Printed, not yet checked" in res.stdout
    data = json.loads(out.read_text())
    assert data["seeds"] == 1 and data["sizes"] == [6] and data["machine"]["cpu"]
    assert [c["id"] for c in data["checks"]] == ["spoiled"] and data["checks"][0]["by_size"][0]["power"] == 1.0
    bad = CliRunner().invoke(app, ["bench", "validity", "--check", "no-such-check"])
    assert isinstance(bad.exception, ValueError) and "no such check" in str(bad.exception)
