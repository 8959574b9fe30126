"""The whole build on a scripted fake model: stages, rejections, resume, annotation loop, CLI."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from cardbuild_fakes import ScriptedCardModel
from esc_eval.cli.jobs.cards import cards_build, cards_export, cards_stats
from esc_eval.sim.cardbuild import CardBuildConfigError, build_cards, load_build_config, parse_build_config
from esc_eval.sim.cards.card import CardError, load_cards, write_cards

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "sim" / "cardbuild" / "samples"
EXAMPLE = ROOT / "sim" / "cardbuild" / "configs" / "example.yaml"


def _config(tmp_path, **over):
    psych = tmp_path / "psych_extra.json"
    psych.write_text(json.dumps([{"instruction": "i", "input": "EMPTY-CARD: my cat ran away and my landlord blames me", "output": "o"}]),
                     encoding="utf-8")
    data = {
        "output": str(tmp_path / "out"),
        "sources": [{"path": "epitome", "dataset": "EPITOME"}, {"path": "mhp_reddit.jsonl"}, {"path": "psych8k.json"},
                    {"path": str(psych), "dataset": "Psych8K"}, {"path": "extes.json"}, {"path": "psyqa.json"},
                    {"path": "smile", "dataset": "smile"}, {"path": "bad"}, {"path": "epitome"}],  # epitome twice: dedup
        "model": {"spec": "fake/fixed"}, "concurrency": 4, "retry_wait_s": 0.0,
        **over,
    }
    return parse_build_config(data, base_dir=SAMPLES)


def test_build_counts_rejections_and_cards(tmp_path):
    cfg = _config(tmp_path)
    model = ScriptedCardModel()
    res = build_cards(cfg, model, show_progress=False)
    # 3 epitome + 2 mhp + 2 psych8k + 1 extra + 2 extes = 10 en; 3 psyqa + 2 smile = 5 zh (epitome twice: same ids)
    assert res.counts["Read"] == {"en": 10, "zh": 5}
    assert res.counts["Extract"] == {"en": 9, "zh": 4}  # EMPTY-CARD reply lacks fields; 心情不好 too short
    assert model.calls["extract"] == 15
    rejected = [json.loads(x) for x in (res.output / "rejected.jsonl").read_text(encoding="utf-8").splitlines()]
    by_stage = {}
    for r in rejected:
        by_stage.setdefault(r["stage"], []).append(r["reason"])
    assert any("lacks field(s) gender, occupation" in r for r in by_stage["extract"])
    assert any("not UTF-8" in r for r in by_stage["read"]) and any("unknown file format" in r for r in by_stage["read"])
    assert any("not detailed enough" in r for r in by_stage.get("filter", []))  # short problems discarded
    cards = load_cards(res.cards_path)
    assert len(cards) == res.counts["Cards"]["en"] + res.counts["Cards"]["zh"] > 0
    assert all(c.category_3 and c.category_1 and c.category_2 for c in cards)
    assert {c.source for c in cards} <= {"EPITOME", "MHP", "Psych", "ExTES", "PsyQA", "smile"}
    zh = [c for c in cards if c.language == "zh"]
    assert zh and all(c.age == "青年" and c.gender == "女" and c.occupation == "未提及" for c in zh)
    en = [c for c in cards if c.language == "en"]
    assert all(c.age == "middle-aged" and c.gender == "male" for c in en)
    classify = [json.loads(x) for x in (res.output / "stages" / "classify.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {r["method"] for r in classify} == {"llm"}
    manifest = json.loads((res.output / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["counts"] == res.counts and manifest["timings"]["extract"]["done"] == 15
    # annotation sheets exist, one row per card, nothing filled yet
    rows = list(csv.DictReader((res.output / "annotation" / "annotator_1.csv").open(encoding="utf-8")))
    assert len(rows) == len(cards) and all(r["quality"] == "" for r in rows)
    assert res.final_cards_path is None


def test_official_round_trip(tmp_path):
    res = build_cards(_config(tmp_path), ScriptedCardModel(), show_progress=False)
    cards = load_cards(res.cards_path)
    official = load_cards(res.official_path)
    keys = ("id", "language", "age", "gender", "occupation", "problem", "category_1", "source")
    assert [tuple(getattr(c, k) for k in keys) for c in official] == [tuple(getattr(c, k) for k in keys) for c in cards]
    raw = json.loads(res.official_path.read_text(encoding="utf-8"))
    assert set(raw[0]) == {"base", "res", "source", "base_biaozhu", "language", "id"}
    assert raw[0]["res"] in {"家庭生活", "工作学习", "社会与其他"}
    again = write_cards(official, tmp_path / "again.json", fmt="official")
    assert json.loads(again.read_text(encoding="utf-8")) == raw


def test_rerun_skips_finished_items_and_retries_errors(tmp_path):
    cfg = _config(tmp_path, max_attempts=2)
    flaky = ScriptedCardModel(fail_stage="filter", fail_times=1000)
    res = build_cards(cfg, flaky, show_progress=False)
    assert flaky.calls["filter"] == 2 * 13  # 13 extracted cards, 2 attempts each
    assert res.counts["LLM_F"] == {"en": 0, "zh": 0}
    with pytest.raises(CardError, match="holds no cards"):  # an empty card file is refused, not run
        load_cards(res.cards_path)
    errors = [json.loads(x) for x in (res.output / "stages" / "filter.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(e["status"] == "error" and "after 2 attempt(s)" in e["reason"] for e in errors)
    # a crash left half a line behind: it is ignored, and the next record starts on a new line
    with (res.output / "stages" / "extract.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"id": "torn", "sta')
    good = ScriptedCardModel()
    res2 = build_cards(cfg, good, show_progress=False)
    assert good.calls["extract"] == 0  # all extraction records were final
    assert good.calls["filter"] == 13  # the errors are retried
    assert res2.counts["LLM_F"]["en"] > 0
    third = ScriptedCardModel()
    build_cards(cfg, third, show_progress=False)
    assert sum(third.calls.values()) == 0


def test_dedup_across_sources(tmp_path):
    dup = tmp_path / "dups.json"
    post = "My manager moved me to the night shift without asking, and now I barely see my two kids before school."
    dup.write_text(json.dumps([{"instruction": "i", "input": post + " I asked to switch back and he said the schedule is final.", "output": "o"}]),
                   encoding="utf-8")
    cfg = parse_build_config({"output": str(tmp_path / "out"), "sources": [{"path": "epitome"}, {"path": str(dup)}],
                              "dedup": {"threshold": 0.6}, "annotation": {"enabled": False}}, base_dir=SAMPLES)
    res = build_cards(cfg, ScriptedCardModel(), show_progress=False)
    dups = [json.loads(x) for x in (res.output / "stages" / "dedup.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(dups) == 1 and dups[0]["similarity"] >= 0.6
    ids = {c.id for c in load_cards(res.cards_path)}
    assert f"c{dups[0]['id'][:15]}" not in ids and f"c{dups[0]['duplicate_of'][:15]}" in ids
    assert res.counts["LLM_F"]["en"] - res.counts["Dedup"]["en"] == 1


def _fill(path: Path, fn):
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    for r in rows:
        fn(r)
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return rows


def test_annotation_loop_through_rebuilds_and_cli(tmp_path):
    cfg = _config(tmp_path)
    res = build_cards(cfg, ScriptedCardModel(), show_progress=False)
    ann = res.output / "annotation"
    cards = load_cards(res.cards_path)
    ids = [c.id for c in cards]
    assert len(ids) >= 4

    def first(r):  # annotator 1: first card invalid, the rest high with the LLM's category
        r["quality"] = "invalid" if r["card_id"] == ids[0] else "high"
        r["category_3"] = "" if r["card_id"] == ids[0] else r["llm_category_3"].split(" (")[0]

    def second(r):  # annotator 2 disagrees on the tier of card 1 and the category of card 2
        r["quality"] = "middle" if r["card_id"] == ids[1] else "high"
        r["category_3"] = "1" if r["card_id"] == ids[2] else r["llm_category_3"].split(" (")[0]

    _fill(ann / "annotator_1.csv", first)
    _fill(ann / "annotator_2.csv", second)
    quiet = ScriptedCardModel()
    res = build_cards(cfg, quiet, show_progress=False)
    assert sum(quiet.calls.values()) == 0  # only the sheets were applied
    report = json.loads((ann / "report.json").read_text(encoding="utf-8"))
    assert report["counts"]["discarded"] == 1 and report["counts"]["needs_review"] == 2
    assert report["agreement"]["n_tier"] == len(ids)
    review = list(csv.DictReader((ann / "reviewer.csv").open(encoding="utf-8")))
    assert {r["card_id"]: r["needs"] for r in review} == {ids[1]: "tier", ids[2]: "category"}
    final = load_cards(res.final_cards_path)
    assert len(final) == len(ids) - 3 and all(c.quality == "high" for c in final)

    def decide(r):
        if r["needs"] == "tier":
            r["quality"] = "middle"
        else:
            r["category_3"] = "death_of_family_member"

    _fill(ann / "reviewer.csv", decide)
    res = build_cards(cfg, ScriptedCardModel(), show_progress=False)
    final = {c.id: c for c in load_cards(res.final_cards_path)}
    assert len(final) == len(ids) - 1
    assert final[ids[1]].quality == "middle" and final[ids[2]].category_3 == "death of family member"
    n = len(ids)
    assert sum(res.counts["Human_F"].values()) == n - 1
    assert sum(res.counts["High"].values()) == n - 2 and sum(res.counts["Middle"].values()) == 1

    out = tmp_path / "stats"
    cards_stats(res.output, out)
    t6 = list(csv.DictReader((out / "table6_stages.csv").open(encoding="utf-8")))
    assert [r["Language"] for r in t6] == ["English", "Chinese"] and "Human_F" in t6[0] and "High" in t6[0]
    t9 = list(csv.DictReader((out / "table9_categories.csv").open(encoding="utf-8")))
    assert len(t9) == 35 and sum(int(r["High"]) + int(r["Middle"]) for r in t9) == n - 1
    assert (out / "figure5_distribution.png").stat().st_size > 10_000

    cards_export(res.output, tmp_path / "official.json", fmt="official")
    back = {c.id: c for c in load_cards(tmp_path / "official.json")}
    assert set(back) == set(final) and all(back[i].problem == final[i].problem for i in back)


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(CardBuildConfigError, match=r"field 'sources.0.limit'"):
        parse_build_config({"output": "o", "sources": [{"path": "x", "limit": 0}]})
    with pytest.raises(CardBuildConfigError, match=r"field 'sources.0.dataset'.*unknown dataset 'reddit2'"):
        parse_build_config({"output": "o", "sources": [{"path": "x", "dataset": "reddit2"}]})
    with pytest.raises(CardBuildConfigError, match=r"field 'dedup.treshold'"):
        parse_build_config({"output": "o", "sources": [{"path": "x"}], "dedup": {"treshold": 0.5}})
    with pytest.raises(CardBuildConfigError, match=r"field 'sources'"):
        parse_build_config({"output": "o", "sources": []})
    with pytest.raises(CardBuildConfigError, match=r"dedup.bands"):
        parse_build_config({"output": "o", "sources": [{"path": "x"}], "dedup": {"num_perm": 100, "bands": 32}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("output: [unclosed", encoding="utf-8")
    with pytest.raises(CardBuildConfigError, match="not valid YAML"):
        load_build_config(bad)
    with pytest.raises(CardBuildConfigError, match="not found"):
        load_build_config(tmp_path / "missing.yaml")


def test_example_config_validates_and_resolves_paths():
    cfg = load_build_config(EXAMPLE)
    assert cfg.model.spec == "vllm/embedded" and len(cfg.sources) == 7
    assert cfg.sources[0].path == SAMPLES / "epitome" and cfg.sources[0].path.is_dir()
    assert yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["output"] == "runs/cards-example"


@pytest.mark.slow
@pytest.mark.beside
def test_llm_stages_inside_a_ray_task(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray = pytest.importorskip("ray")
    import cardbuild_fakes

    ray.cloudpickle.register_pickle_by_value(cardbuild_fakes)  # the worker cannot import the test helper
    cfg = _config(tmp_path, ray={"enabled": True, "num_cpus": 1})
    try:
        res = build_cards(cfg, ScriptedCardModel(), show_progress=False)
    finally:
        ray.shutdown()
    assert res.timings["ray"] == {"address": "local"}
    assert res.counts["Extract"] == {"en": 9, "zh": 4} and load_cards(res.cards_path)


def test_cards_build_cli_on_a_fake_spec(tmp_path, monkeypatch, capsys):
    reply = "Age: 30%0AGender: female%0AOccupation: nurse%0AProblem: My manager cut my hours after I reported a safety problem."
    config = tmp_path / "build.yaml"
    config.write_text(yaml.safe_dump({
        "output": "out", "sources": [{"path": str(SAMPLES / "psych8k.json")}, {"path": str(SAMPLES / "bad")}],
        "model": {"spec": f"fake/fixed?reply={reply}"}, "filter": {"enabled": False},
        "classify": {"method": "keyword"}, "annotation": {"enabled": False},
    }), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    cards_build(config, quiet=True)
    printed = capsys.readouterr().out
    assert "Table 6 layout" in printed and "English" in printed
    cards = load_cards(tmp_path / "out" / "cards.json")
    assert len(cards) == 1  # both posts give the same card: the second is a near-duplicate
    assert (cards[0].age, cards[0].gender, cards[0].occupation) == ("young", "female", "nurse")
    assert cards[0].category_3 == "Issues in getting along with colleagues or classmates"  # keyword: manager
    bad = tmp_path / "bad.yaml"
    bad.write_text("output: o\nsources: []\n", encoding="utf-8")
    import typer

    with pytest.raises(typer.Exit):
        cards_build(bad)
    assert "field 'sources'" in capsys.readouterr().out
