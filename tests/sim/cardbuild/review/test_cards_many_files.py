"""cards stats / cards validate over several files at once; the release's card_high_* files are
recognised as the high tier without --assume-quality."""
from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from esc_eval.cli.app import app
from esc_eval.sim.cardbuild.review.stats import tier_from_file_name

SAMPLE = Path(__file__).resolve().parents[4] / "sim" / "data" / "sample_cards.json"


def _split(tmp_path: Path) -> tuple[Path, Path, list[dict]]:
    cards = json.loads(SAMPLE.read_text(encoding="utf-8"))
    for c in cards:
        c.pop("quality", None)
    en = tmp_path / "card_high_en.json"  # the release's name: high tier
    other = tmp_path / "more_cards.json"  # any other name: no tier assumed
    en.write_text(json.dumps(cards[:20], ensure_ascii=False), encoding="utf-8")
    other.write_text(json.dumps(cards[20:], ensure_ascii=False), encoding="utf-8")
    return en, other, cards


def test_tier_from_file_name():
    assert tier_from_file_name("/x/card_high_zh.json") == "high" and tier_from_file_name("test_en.json") is None


def test_stats_pools_several_files(tmp_path):
    en, other, cards = _split(tmp_path)
    out = tmp_path / "stats"
    r = CliRunner().invoke(app, ["cards", "stats", str(en), str(other), "--out", str(out)])
    assert r.exit_code == 0, r.output
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["summary"]["cards"] == len(cards) and stats["source"] == [str(en), str(other)]
    assert stats["summary"]["by_quality"].get("high") == 20
    assert sum(row["Total"] for row in stats["table9"]) == len(cards)
    assert sum(row["High"] for row in stats["table9"]) == 20
    # One card_high_* file alone: every card is high.
    r = CliRunner().invoke(app, ["cards", "stats", str(en), "--out", str(tmp_path / "one")])
    assert r.exit_code == 0, r.output
    one = json.loads((tmp_path / "one" / "stats.json").read_text(encoding="utf-8"))
    assert one["summary"]["by_quality"] == {"high": 20}


def test_validate_several_files(tmp_path):
    en, other, cards = _split(tmp_path)
    r = CliRunner().invoke(app, ["cards", "validate", str(en), str(other)])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["cards"] == len(cards) and [f["cards"] for f in data["files"]] == [20, len(cards) - 20]
    assert sum(data["by_language"].values()) == len(cards) and data["unique_cards"] == len(cards)
    assert "repeated_across_files" not in data and "warning" not in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    r = CliRunner().invoke(app, ["cards", "validate", str(en), str(bad)])
    assert r.exit_code != 0


def test_validate_warns_about_ids_repeated_across_files(tmp_path):
    en, other, cards = _split(tmp_path)
    again = tmp_path / "again.json"  # the first 3 cards of card_high_en.json once more
    again.write_text(json.dumps(cards[:3], ensure_ascii=False), encoding="utf-8")
    r = CliRunner().invoke(app, ["cards", "validate", str(en), str(other), str(again)])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["cards"] == len(cards) + 3 and data["unique_cards"] == len(cards)
    rep = data["repeated_across_files"]
    assert rep["count"] == 3 and rep["first"][0] == {"id": cards[0]["id"], "language": cards[0]["language"],
                                                      "first_in": str(en), "again_in": str(again)}
    assert "warning: 3 card id(s)" in r.stderr and str(again) in r.stderr
