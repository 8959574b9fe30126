"""Issue 14's commands on a large fake-backend run folder, through the CLI as a user runs them.

2,000 dialogues (400 cards in English and Chinese x 5 fake targets) simulated with fake/seeker and
scored by fake/judge (the real simulate and score jobs, local executor), then: view (a server
process; its JSON API), compare, export --official and score --input (round trip), analysis
correlate / text-metrics / roleplay-export / roleplay-import, leaderboard and report usage, cards
stats / validate over two files. Every command's output is checked for content, and each command
has a time budget a few times what it takes on a 2-core machine (the first versions of compare and
the report took minutes at 8,500 dialogues).
"""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from esc_eval.cli.app import app
from esc_eval.sim.cards.card import sample_cards, write_cards

N_CARDS = 400
TARGETS = ["fake/echo", "fake/fixed?reply=I hear you, tell me more.",
           "fake/fixed?reply=That sounds hard. What would help right now?",
           "fake/fixed?reply=你愿意多说一点吗？", "fake/fixed?reply=Have you tried making a list of what is on your plate?"]
N = N_CARDS * len(TARGETS)
JUDGE = "fake/judge:logprob:official"


def run(*args: str, budget_s: float) -> str:
    t0 = time.perf_counter()
    res = CliRunner().invoke(app, list(args), catch_exceptions=False)
    took = time.perf_counter() - t0
    assert res.exit_code == 0, f"esc-eval {' '.join(args)} exited {res.exit_code}: {res.output[-2000:]}"
    assert took < budget_s, f"esc-eval {args[0]} {args[1] if len(args) > 1 else ''} took {took:.1f} s (budget {budget_s} s)"
    return res.output


def get(url: str) -> tuple[dict | str, float]:
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read().decode("utf-8")
        ctype = r.headers.get("Content-Type", "")
    took = time.perf_counter() - t0
    return (json.loads(body) if "json" in ctype else body), took


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    base = sample_cards()
    cards = [base[i % len(base)].model_copy(update={"id": f"{base[i % len(base)].id}-v{i}",
                                                    "problem": f"{base[i % len(base)].problem} (case {i})"})
             for i in range(N_CARDS)]
    write_cards(cards, root / "cards.json")
    for lang in ("en", "zh"):
        write_cards([c for c in cards if c.language == lang], root / f"card_high_{lang}.json", fmt="official")
    targets = "\n".join(f'  - model: "{t}"' for t in TARGETS)
    ex = "execution: {executor: local, concurrency: 256, turn_checkpoints: false}"
    (root / "sim.yaml").write_text(f"cards: {root / 'cards.json'}\nrole: {{model: fake/seeker}}\ntargets:\n{targets}\n{ex}\n")
    (root / "score.yaml").write_text(f"judge: {{model: {{model: fake/judge}}}}\n{ex}\n")
    run("simulate", "-c", str(root / "sim.yaml"), "-o", str(root / "run"), budget_s=60)
    run("score", "-i", str(root / "run"), "-c", str(root / "score.yaml"), budget_s=90)
    langs = pd.Series([c.language for c in cards]).value_counts().to_dict()
    return {"root": root, "run": root / "run", "cards": cards, "langs": langs}


def test_view_serves_every_dialogue_quickly(lab):
    proc = subprocess.Popen([sys.executable, "-m", "esc_eval.cli", "view", str(lab["run"]), "--port", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line, m, t0 = "", None, time.perf_counter()
        while m is None and time.perf_counter() - t0 < 60:
            line += proc.stderr.readline()
            m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, line
        assert f"{N} dialogues from 1 run(s)" in line.replace("\n", " ")
        url = f"http://127.0.0.1:{m.group(1)}"
        page, _ = get(url + "/")
        assert "<html" in page.lower()
        meta, took = get(url + "/api/meta")
        assert meta["n_dialogues"] == N and meta["models"] == sorted(TARGETS) and meta["languages"] == ["en", "zh"]
        usage = meta["runs"][0]["usage"]
        stages = {(r["stage"], r["model"]): r for r in usage["by_stage"]}
        assert stages[("judge", JUDGE)]["calls"] == 7 * N and stages[("role", "fake/seeker")]["calls"] == 5 * N
        assert all(stages[("target", t)]["calls"] == 5 * N_CARDS for t in TARGETS)
        slowest = took
        q = urllib.parse.urlencode({"model": "fake/echo", "language": "zh", "limit": 20})
        page1, took = get(f"{url}/api/dialogues?{q}")
        slowest = max(slowest, took)
        assert page1["total"] == lab["langs"]["zh"] and len(page1["rows"]) == 20
        assert all(r["target_model"] == "fake/echo" and r["language"] == "zh" for r in page1["rows"])
        assert all(r["average"] is not None for r in page1["rows"])
        ranged, took = get(f"{url}/api/dialogues?dim=empathy&min=3&max=4&limit=500")
        slowest = max(slowest, took)
        assert 0 < ranged["total"] < N and all(3 <= r["empathy"] <= 4 for r in ranged["rows"])
        hits, _ = get(f"{url}/api/dialogues?q=manager")  # the fake seeker's second line, in every dialogue
        none, _ = get(f"{url}/api/dialogues?q=zzznotthere")
        assert hits["total"] == N and none["total"] == 0
        first = page1["rows"][0]
        d, took = get(f"{url}/api/dialogue?run={first['run']}&id={first['dialogue_id']}")
        slowest = max(slowest, took)
        assert len(d["turns"]) == 11 and len(d["scores"]) == 7
        assert all(len(s["probs"]) == 5 and s["raw"] for s in d["scores"])
        card, _ = get(f"{url}/api/card?card_id={first['card_id']}")
        assert card["models"] == sorted(TARGETS)
        q = urllib.parse.urlencode({"card_id": first["card_id"], "a": TARGETS[0], "b": TARGETS[1]})
        sbs, took = get(f"{url}/api/side-by-side?{q}")
        slowest = max(slowest, took)
        assert sbs["a"]["target_model"] == TARGETS[0] and sbs["b"]["target_model"] == TARGETS[1]
        assert sbs["a"]["card_id"] == sbs["b"]["card_id"] == first["card_id"]
        assert slowest < 2.0, f"an API call took {slowest:.2f} s"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0


def test_compare_pairs_two_models_by_card(lab):
    out = lab["root"] / "cmp"
    run("compare", str(lab["run"]), str(lab["run"]), "--model-a", TARGETS[0], "--model-b", TARGETS[1],
        "-o", str(out), "--n-resamples", "2000", budget_s=45)
    res = json.loads((out / "compare.json").read_text())
    assert res["pair_by"] == "card" and res["models_a"] == [TARGETS[0]] and res["models_b"] == [TARGETS[1]]
    dims = {r["dimension"]: r for r in res["dimensions"]}
    assert len(dims) == 8 and all(r["n_pairs"] == N_CARDS for r in dims.values())
    assert all(r["p_holm"] >= r["p_value"] for r in dims.values() if r["p_value"] is not None)
    assert any(abs(r["diff"]) > 5 for r in dims.values())  # the two fakes are scored differently
    assert len(res["cards_moved"]) == 10 and "| Average |" in (out / "compare.md").read_text()


def test_export_official_and_score_it_back(lab):
    off = lab["root"] / "off"
    run("export", str(lab["run"]), "--official", str(off), budget_s=45)
    files = sorted(p.name for p in (off / "dialogues").glob("*.json"))
    assert len(files) == 2 * len(TARGETS) and "fake_echo_zh.json" in files
    assert sorted(p.name for p in (off / "scores").glob("*.json")) == files
    dialogues = {f: json.loads((off / "dialogues" / f).read_text(encoding="utf-8")) for f in files}
    assert sum(len(d) for d in dialogues.values()) == N
    one = next(iter(dialogues["fake_echo_en.json"].values()))
    assert len(one) == 11 and one[0].startswith("AI assistant：") and one[1].startswith("ESC-Role：")
    scores = json.loads((off / "scores" / "fake_echo_en.json").read_text())
    assert set(next(iter(scores.values()))) == {"fluency", "diversity", "empathic", "suggestion", "tech", "human", "overall"}
    # score --input reads the exported turns back: the same fake judge gives the same scores.
    run("score", "--input", str(off / "dialogues"), "-c", str(lab["root"] / "score.yaml"),
        "--official-out", str(off / "rescored"), budget_s=120)
    for f in files:
        assert json.loads((off / "rescored" / f).read_text()) == json.loads((off / "scores" / f).read_text()), f


def test_correlate_against_filled_annotation_sheets(lab):
    sheets = lab["root"] / "sheets"
    run("annotate", "sheets", str(lab["run"]), "-o", str(sheets), "--annotators", "2", budget_s=30)
    rng = np.random.default_rng(7)
    dims = ["fluency", "expression", "empathy", "information", "skillful", "humanoid", "overall"]
    # Annotators who agree with the judge up to +-1.
    from esc_eval.analysis.results.loaders import load_scores

    wide = load_scores([lab["run"]]).pivot_table(index="dialogue_id", columns="dimension", values="score")
    for a in ("a1", "a2"):
        sheet = pd.read_csv(sheets / f"annotate_{a}.csv")
        for dim in dims:
            sheet[dim] = np.clip(sheet["dialogue_id"].map(wide[dim]) + rng.integers(-1, 2, len(sheet)), 0, 4).astype(int)
        sheet.to_csv(sheets / f"annotate_{a}.csv", index=False)
    out = lab["root"] / "corr"
    run("analysis", "correlate", str(lab["run"]), "--human", str(sheets), "--n-boot", "200", "-o", str(out), budget_s=60)
    rows = json.loads((out / "correlations.json").read_text())["rows"]
    sample = [r for r in rows if r["level"] == "sample"]
    assert len(sample) == 8 * 3 and all(r["n"] == N for r in sample)
    assert all(r["r"] > 0.5 and r["ci_lo"] <= r["r"] <= r["ci_hi"] for r in sample)
    dataset = [r for r in rows if r["level"] == "dataset"]
    assert dataset and all(r["n"] == len(TARGETS) for r in dataset)


def test_text_metrics_against_references_by_card(lab):
    refs = {c.id: ["I'm sorry you are going through this. Can you tell me more?", "That sounds really hard.",
                   "What would help right now?", "It is okay to feel this way.", "Let's make a plan together."]
            for c in lab["cards"][::2]}  # every other card: dialogues without references are left out
    (lab["root"] / "refs.json").write_text(json.dumps(refs))
    out = lab["root"] / "tm"
    run("analysis", "text-metrics", str(lab["run"]), "--references", str(lab["root"] / "refs.json"), "-o", str(out),
        budget_s=90)
    corpus = pd.DataFrame(json.loads((out / "text_metrics.json").read_text())["corpus"])
    assert len(corpus) == 2 * len(TARGETS) and corpus["n"].sum() == 5 * N // 2
    hard = corpus[corpus["target_model"] == TARGETS[2]]  # replies "That sounds hard. What would help right now?"
    assert (hard["bleu1"] > 0).all() and (hard["rouge_l"] > 0).all() and (hard["meteor"] > 0).all()
    per = pd.read_csv(out / "text_metrics_per_dialogue.csv")
    assert len(per) == N // 2 and (per["n_pairs"] == 5).all()


def test_roleplay_sheets_for_two_role_models(lab):
    root = lab["root"]
    run("simulate", "-c", str(root / "sim.yaml"), "--role", "fake/echo", "-o", str(root / "run-echo-role"), budget_s=60)
    rp = root / "rp"
    run("analysis", "roleplay-export", str(lab["run"]), str(root / "run-echo-role"), "--role-a", "fake/seeker",
        "--role-b", "fake/echo", "-o", str(rp), budget_s=45)
    sheet = pd.read_csv(rp / "roleplay_pairs.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    key = pd.read_csv(rp / "roleplay_pairs_key.csv", dtype=str)
    assert len(sheet) == N and set(key["role_1"]) | set(key["role_2"]) == {"fake/seeker", "fake/echo"}
    # The annotator always rates fake/seeker's dialogue 2 and prefers it; fake/echo's gets 0.
    for n in (1, 2):
        seeker = key[f"role_{n}"] == "fake/seeker"
        for c in [c for c in sheet.columns if c.startswith(f"d{n}_")]:
            sheet[c] = np.where(seeker, "2", "0")
    sheet["more_human_like"] = np.where(key["role_1"] == "fake/seeker", "1", "2")
    sheet.to_csv(rp / "filled.csv", index=False, encoding="utf-8-sig")
    run("analysis", "roleplay-import", str(rp / "filled.csv"), "--key", str(rp / "roleplay_pairs_key.csv"),
        "-o", str(root / "rp-out"), budget_s=60)
    res = json.loads((root / "rp-out" / "roleplay.json").read_text())
    t1 = {(r["role_model"], r["language"]): r for r in res["table1"]}
    assert t1[("fake/seeker", "en")]["Average"] == 10.0 and t1[("fake/echo", "zh")]["Average"] == 0.0
    wins = {(r["agent"], r["opponent"]): r for r in res["win_rates"]}
    assert wins[("fake/seeker", "fake/echo")]["win"] == 1.0 and wins[("fake/seeker", "fake/echo")]["n"] == N
    assert Path(res["figure3"]).exists()


def test_usage_in_leaderboard_and_report(lab):
    out = lab["root"] / "report"
    run("report", str(lab["run"]), "-o", str(out), budget_s=120)
    lb = pd.read_csv(out / "leaderboard.csv")
    assert len(lb) == 2 * len(TARGETS) and set(lb["n_dialogues"]) == set(lab["langs"].values())
    assert (lb["usage_calls"] == 5 * N_CARDS).all() and (lb["usage_prompt_tokens"] > 0).all()
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "Usage and cost" in md and JUDGE in md and f"| {7 * N} |" in md


def test_cards_stats_and_validate_over_two_files(lab):
    root = lab["root"]
    files = [str(root / "card_high_en.json"), str(root / "card_high_zh.json")]
    out = run("cards", "validate", *files, budget_s=30)
    summary = json.loads(out[out.index("{"):])
    assert summary["cards"] == N_CARDS and summary["by_language"] == lab["langs"]
    run("cards", "stats", *files, "--out", str(root / "cstats"), budget_s=45)
    stats = json.loads((root / "cstats" / "stats.json").read_text())
    text = json.dumps(stats)
    assert str(N_CARDS) in text and '"high"' in text
