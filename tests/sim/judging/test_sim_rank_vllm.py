"""The judge on the real stack: official samples through run_scoring on the embedded judge, digit
probabilities vs greedy answers, a multi-LoRA judge with per-request adapters, the bench, a dialogue
over the judge's context (whole-dialogue and per-reply judgments)."""
import asyncio
import json
import math

import pytest

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring import run_scoring, score_dialogue
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSIONS
from esc_eval.sim.judging.judges import multi_lora_judge, official_adapter_name, select_adapter
from esc_eval.sim.judging.prompts import judge_messages, render_dialogue
from esc_eval.sim.judging.score_parser import LABELS, distribution
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.official import read_official_dialogues, write_official_scores
from esc_eval.sim.runs.parse_failures import parse_failure_report
from esc_eval.sim.runs.runfolder import RunFolder

# beside the other slow tests: in-process engines and a local Ray pool of its own, no timing compared
pytestmark = [pytest.mark.slow, pytest.mark.beside]
OFFICIAL_KEYS = set(DIMENSIONS.values())
LOGPROB = GenerationParams(max_tokens=1, temperature=0.0, choices=list(LABELS), logprobs=len(LABELS))


# A short dialogue keeps the LoRA tests fast: LoRA prefill on CPU runs at ~100 tokens/s.
SHORT_TURNS = [
    ("assistant", "Hello, I'm your personal assistant. You can confide in me about any worries."),
    ("seeker", "I can't sleep since I lost my job, and I feel like a failure."),
    ("assistant", "I'm sorry, losing a job is hard. What goes through your mind at night?"),
]


def official_turns(shared_data, name="llama3_en.json", key="1"):
    rows = read_official_dialogues(shared_data / "esc-eval" / "dialogues" / name)
    row = next(r for r in rows if r["card_id"] == key)
    return [(t["speaker"], t["text"]) for t in row["turns"]]


def test_official_samples_score_end_to_end_on_the_embedded_judge(shared_data, embedded_model, tmp_path):
    # The first dialogue of each official file (en/zh x 2 models), each of its 11 turns cut to 160 characters:
    # the full layout, a fraction of the prefill (the whole dialogues took 200 s of the AVX2 EPYC's suite, all 12
    # ~8 minutes; the fast tests score all 12 whole with a fake judge). Dialogue-first, as the demo scores with
    # the embedded judge: a dialogue's seven prompts share it as a cached prefix (rubric-first on this engine:
    # test_digit_probabilities_... below).
    src = tmp_path / "official_in"
    src.mkdir()
    for f in sorted((shared_data / "esc-eval" / "dialogues").glob("*.json")):
        turns = [t[:160] for t in json.loads(f.read_text())["0"]]
        (src / f.name).write_text(json.dumps({"0": turns}, ensure_ascii=False))
    judge = JudgeConfig(model=ModelRef(model="vllm/embedded"), prompt_order="dialogue_first")
    cfg = ScoringConfig(judge=judge, execution=ExecutionConfig(executor="local", concurrency=12))
    result = run_scoring(cfg, src, tmp_path / "run")
    assert result["dialogues"] == 4 and result["items"] == 4 and result["failed"] == 0
    run = RunFolder(tmp_path / "run", create=False)
    scores = list(run.iter_rows("scores"))
    assert len(scores) == 28
    for s in scores:
        assert s["parse_status"] == "ok" and s["score"] in range(5) and s["raw"] == str(s["score"])
        # the rubric and its frame are about 300 tokens; the 11 cut turns at least as many again
        assert math.isclose(sum(s["probs"]), 1.0, rel_tol=1e-5) and s["prompt_tokens"] > 600
    files = write_official_scores(scores, list(run.iter_rows("dialogues")), tmp_path / "official")
    reference = shared_data / "esc-eval" / "scores"
    assert sorted(p.name for p in files) == sorted(p.name for p in reference.glob("*.json"))
    for p in files:
        ours, theirs = json.loads(p.read_text()), json.loads((reference / p.name).read_text())
        assert set(ours) == {"0"} and set(theirs) == {"0", "1", "2"}
        for key, entry in ours.items():
            assert set(entry) == set(theirs[key]) == OFFICIAL_KEYS
            assert all(type(v) is int and 0 <= v <= 4 for v in entry.values())
    report = parse_failure_report(tmp_path / "run")
    assert len(report) == 2 * 7 and (report["failure_rate"] == 0).all()  # 2 target models x 7 dimensions


async def test_digit_probabilities_sum_to_one_and_argmax_is_the_greedy_answer(shared_data, embedded_model):
    # the official dialogue's opening (three turns, ending on a reply to judge): ~450-token prompts instead
    # of ~1,400; what is checked (the label distribution vs the greedy answers) does not depend on the length
    turns = official_turns(shared_data)[:3]
    prompts = [judge_messages(d, turns, "en") for d in DIMENSION_NAMES]
    with_probs = await asyncio.gather(*(embedded_model.chat(m, LOGPROB) for m in prompts))
    greedy = await asyncio.gather(*(embedded_model.chat(m, GenerationParams(max_tokens=1, temperature=0.0,
                                                                            choices=list(LABELS))) for m in prompts))
    free = await asyncio.gather(*(embedded_model.chat(m, GenerationParams(max_tokens=1, temperature=0.0)) for m in prompts))
    for p, g, f in zip(with_probs, greedy, free):
        probs = distribution(p.top_logprobs[0])
        assert probs is not None and len(probs) == 5 and math.isclose(sum(probs), 1.0, rel_tol=1e-6)
        assert set(p.top_logprobs[0]) == set(LABELS)  # exactly the five labels' logprobs came back
        argmax = max(range(5), key=probs.__getitem__)
        assert g.text == str(argmax) == p.text
        # an unconstrained greedy digit is the top token overall, so also the top label
        if f.text.strip() in LABELS:
            assert f.text.strip() == str(argmax)


def test_bench_score_runs_on_one_short_dialogue(embedded_model, tmp_path, monkeypatch):
    import esc_eval.sim.bench.loops.scoring as scoring
    from esc_eval.sim.bench.loops.scoring import bench_score
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.sim.jobs.simulation import run_simulation

    # a short fake-model dialogue in a run folder: the bench's path, not its numbers, is tested here
    # one round: the seven judge prompts stay short (each phase prefills them without a cache)
    run_simulation(SimulationConfig(cards="sample", languages=["en"], limit=1, rounds=1, role=ModelRef(model="fake/seeker"),
                                    targets=[ModelRef(model="fake/echo")], execution=ExecutionConfig(executor="local")),
                   tmp_path / "run")
    from esc_eval.serve.backends.vllm_engine import engines_started_here

    out = tmp_path / "bench.json"
    monkeypatch.setattr(scoring, "PHASE_PAUSE_S", 0)  # the pauses between phases steady timings, not the path
    # one binding probed (all cores where there are several), an engine start fewer: the choice between two is
    # tested on stand-ins (test_sim_rank_bench.py), their engines being distinct in test_vllm_engine_host.py
    bindings = dict(list(scoring._reference_bindings().items())[-1:])
    monkeypatch.setattr(scoring, "_reference_bindings", lambda: bindings)
    with engines_started_here():  # the bench's own engines must not idle beside later tests' engines
        result = bench_score(dialogues=1, out=out, source=tmp_path / "run", reference_dialogues=1, max_new_tokens=8,
                             model="embedded", workers=1)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    phases = result["phases"]
    # ours: the service's path (a Ray pool), gone again afterwards
    assert phases["ours"]["scored_dialogues"] == 1 and phases["ours"]["failed"] == 0 and phases["ours"]["workers"] == 1
    import ray

    assert not ray.is_initialized()
    assert result["source"]["kind"] == "run_folder" and phases["ours_one_engine"]["requests"] == 7
    # the same 7 requests in every phase: same prompt tokens
    tokens = {phases[p]["prompt_tokens"] for p in ("ours", "ours_one_engine", "ours_one_engine_dimension_major",
                                                   "batched_no_cache", "prefill_reference")}
    assert len(tokens) == 1 and tokens.pop() > 7 * 300
    binding = result["reference_binding"]
    assert binding["chosen"] in binding["probes"] and all(p["decoded_tokens"] >= 1 for p in binding["probes"].values())
    # each binding timed on an engine of its own (a second probe once reused the first's: started in 0.0 s)
    assert all(p["engine_start_s"] >= 1 for p in binding["probes"].values()), binding
    assert phases["batched_no_cache"]["cached_prompt_tokens"] == 0 and phases["prefill_reference"]["cached_prompt_tokens"] == 0
    assert 1 <= phases["reference"]["decoded_tokens_mean"] <= 8
    assert result["speedup_vs_reference"] > 0 and result["speedup_vs_prefill_reference"] > 0
    assert result["score_agreement"]["ours_vs_dimension_major"] is not None


def test_dialogue_first_order_computes_the_dialogue_once(embedded_model):
    from esc_eval.sim.bench.loops.scoring import _counting_model_class

    model = _counting_model_class()("embedded")
    assert model.host is embedded_model.host  # same engine kwargs: the session's engine
    turns = SHORT_TURNS * 6  # ~18 turns: the dialogue spans several KV blocks

    def score(order):
        asyncio.run_coroutine_threadsafe(model.host.engine.reset_prefix_cache(), model.host.loop).result()
        before = model.cached_tokens
        rows = asyncio.run(score_dialogue(turns, "en", JudgeConfig(model=ModelRef(), prompt_order=order), model))
        assert all(r["parse_status"] == "ok" for r in rows)
        return model.cached_tokens - before, rows

    cached_first, rows = score("dialogue_first")
    cached_paper, _ = score("rubric_first")
    dialogue_tokens = len(model.host.tokenizer.encode(render_dialogue(turns, "official")))
    # six of the seven prompts reuse the first one's dialogue (up to a KV block at its end)
    assert cached_first >= 6 * (dialogue_tokens - 128), (cached_first, dialogue_tokens)
    assert cached_first > 3 * cached_paper


# -- multi-LoRA judge ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lora_folder(tmp_path_factory):
    """14 tiny PEFT LoRA adapters for the embedded SmolLM2, in the release's layout."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from esc_eval.serve.engines.embedded import embedded_model_path

    root = tmp_path_factory.mktemp("esc-rank-tiny")
    base = AutoModelForCausalLM.from_pretrained(str(embedded_model_path()), dtype=torch.float32)
    names = [k + suffix for suffix in ("", "_en") for k in DIMENSIONS.values()]
    for i, name in enumerate(names):
        torch.manual_seed(1000 + i)
        # init_lora_weights=False: random A and B (PEFT's default zero B would equal the base model)
        model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                init_lora_weights=False))
        model.save_pretrained(str(root / name))
        base = model.unload()  # the base without this adapter, for the next one
    return root


@pytest.fixture(scope="module")
def lora_judge(lora_folder):
    from esc_eval.serve.chat.interface import get_chat_model
    from esc_eval.serve.backends.vllm_engine import engines_started_here

    with engines_started_here():  # its 14-adapter engine must not outlive the module's tests
        judge = multi_lora_judge(lora_folder, "vllm/embedded", name="tiny-lora")
        model = get_chat_model(judge.model.model, **judge.model.options)
        model.host.ensure_started()
        yield judge, model


async def test_each_adapter_gives_its_own_distribution_in_one_engine(lora_judge):
    judge, model = lora_judge
    assert model.host.engine_kwargs["max_lora_rank"] == 8 and model.host.engine_kwargs["max_loras"] == 14
    messages = judge_messages("fluency", SHORT_TURNS, "en")
    names = sorted(judge.model.options["adapters"])
    # all 15 requests in flight at once: one batch, one LoRA per request
    results = await asyncio.gather(model.chat(messages, LOGPROB), *(model.chat(messages, LOGPROB, adapter=a) for a in names))
    dists = [distribution(r.top_logprobs[0]) for r in results]
    assert all(d is not None and math.isclose(sum(d), 1.0, rel_tol=1e-5) for d in dists)
    base, adapted = dists[0], dict(zip(names, dists[1:]))
    for name, d in adapted.items():
        assert max(abs(x - y) for x, y in zip(d, base)) > 1e-3, f"adapter {name} scores like the base model"
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert max(abs(x - y) for x, y in zip(adapted[a], adapted[b])) > 1e-4, f"{a} and {b} give the same distribution"


async def test_scoring_routes_each_dimension_to_its_adapter(lora_judge):
    judge, model = lora_judge
    turns = SHORT_TURNS
    rows = await score_dialogue(turns, "zh", judge, model)
    assert [r["dimension"] for r in rows] == DIMENSION_NAMES and all(r["parse_status"] == "ok" for r in rows)
    direct = await asyncio.gather(*(model.chat(judge_messages(d, turns, "zh"), LOGPROB, adapter=select_adapter(judge, d, "zh"))
                                    for d in DIMENSION_NAMES))
    for r, res, d in zip(rows, direct, DIMENSION_NAMES):
        assert select_adapter(judge, d, "zh") == official_adapter_name(d)
        # same adapter, same prompt: the same distribution (up to bf16 batch-shape noise)
        assert max(abs(x - y) for x, y in zip(r["probs"], distribution(res.top_logprobs[0]))) < 0.05


async def test_a_dialogue_over_the_real_judges_context_is_windowed(embedded_model):
    """40 rounds of about 100 tokens a turn: over the embedded model's 8,192-token context as a whole,
    so the engine refuses it (ContextOverflowError) and the judge reads the opener, round 1 and the
    last 19 rounds (sim/judging/window.py); a score, and the rows say 20 rounds were left out."""
    filler = ("I keep going over the same worries about work and my family, and every night I lie awake "
              "thinking about what I could have done differently, what people expect of me, and whether "
              "anything will change if I keep trying this hard. ")
    turns = [("assistant", "Hello, I'm your personal assistant.")]
    for k in range(1, 41):
        turns += [("seeker", f"Round {k}. {filler * 2}"), ("assistant", f"Reply {k}. {filler * 2}")]
    judge = JudgeConfig(model=ModelRef(model="vllm/embedded"), dimensions=["empathy"])
    (row,) = await score_dialogue(turns, "en", judge, embedded_model)
    assert row["error"] is None and row["parse_status"] == "ok" and row["score"] in range(5), row
    assert row["rounds_left_out"] == 20 and 4000 < row["prompt_tokens"] < 8192
    # the per-reply judge (score --by-reply) on the same engine: round 40's reply rated in its context, the
    # context windowed by the same rule, the reply itself always shown; and a short dialogue read whole
    per_reply = judge.model_copy(update={"reads": "reply"})
    (reply,) = await score_dialogue(turns, "en", per_reply, embedded_model)
    assert reply["error"] is None and reply["parse_status"] == "ok" and reply["score"] in range(5), reply
    assert reply["rounds_left_out"] >= 20 and 4000 < reply["prompt_tokens"] < 8192
    (short,) = await score_dialogue(SHORT_TURNS, "en", per_reply, embedded_model)
    assert short["parse_status"] == "ok" and short["score"] in range(5) and short["rounds_left_out"] == 0
