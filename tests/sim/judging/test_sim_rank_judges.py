"""The multi-LoRA judge builder (sim/judging/judges.py) and per-language adapter selection, on fakes."""
import asyncio
import json

import pytest

from esc_eval.serve.chat.interface import ChatResult
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import load_registry
from esc_eval.sim.jobs.config import ScoringConfig
from esc_eval.sim.jobs.scoring import score_dialogue
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.judging.dimensions import DIMENSION_NAMES, DIMENSIONS
from esc_eval.sim.judging.judges import (JudgeBuildError, judge_from_registry, multi_lora_judge, official_adapter_name,
                                         scan_adapter_folder, select_adapter, vllm_max_lora_rank)

OFFICIAL = list(DIMENSIONS.values())


def fake_adapter(path, r=4):
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"r": r, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"],
                                                          "peft_type": "LORA"}))
    return path


@pytest.fixture
def adapter_dir(tmp_path):
    root = tmp_path / "esc-rank"
    for key in OFFICIAL:
        fake_adapter(root / key)
        fake_adapter(root / f"{key}_en", r=8 if key == "tech" else 4)
    return root


def test_official_adapter_names():
    assert official_adapter_name("empathy") == "empathic"
    assert official_adapter_name("empathic", "en") == "empathic_en"
    assert official_adapter_name("skillful", "zh") == "tech"
    with pytest.raises(JudgeBuildError, match="language 'fr'"):
        official_adapter_name("fluency", "fr")


def test_multi_lora_judge_from_a_folder_in_the_official_layout(adapter_dir):
    judge = multi_lora_judge(adapter_dir, "vllm/embedded")
    assert isinstance(judge, JudgeConfig) and judge.dimensions == DIMENSION_NAMES
    # each paper dimension -> its official adapter, plus the English variant
    assert {d: judge.adapters[d] for d in DIMENSION_NAMES} == DIMENSIONS
    assert {judge.adapters[f"{d}:en"] for d in DIMENSION_NAMES} == {f"{k}_en" for k in OFFICIAL}
    opts = judge.model.options
    assert set(opts["adapters"]) == set(OFFICIAL) | {f"{k}_en" for k in OFFICIAL}
    assert opts["adapters"]["empathic_en"] == str(adapter_dir / "empathic_en")
    assert opts["max_lora_rank"] == 8 and opts["max_loras"] == 14  # rank 8 is the largest; all 14 resident
    for dim in DIMENSION_NAMES:
        assert select_adapter(judge, dim, "en") == official_adapter_name(dim, "en")
        assert select_adapter(judge, dim, "zh") == official_adapter_name(dim)
    # the options are what VLLMChatModel(model, adapters=..., **engine_kwargs) takes
    from esc_eval.serve.backends.vllm_engine import VLLMChatModel
    import inspect

    assert "adapters" in inspect.signature(VLLMChatModel).parameters
    # and the config round-trips through YAML-like data (what `esc-eval score -c` loads)
    assert ScoringConfig.model_validate({"judge": judge.model_dump(mode="json")}).judge == judge


def test_english_falls_back_to_the_base_adapter_when_no_variant(tmp_path):
    root = tmp_path / "zh-only"
    for key in OFFICIAL:
        fake_adapter(root / key)
    judge = multi_lora_judge(root, "vllm/embedded")
    assert not any(":" in k for k in judge.adapters)
    assert select_adapter(judge, "fluency", "en") == "fluency" and judge.model.options["max_loras"] == 7


def test_missing_adapter_and_bad_folders_are_named(tmp_path, adapter_dir):
    paths = scan_adapter_folder(adapter_dir)
    del paths["tech"]
    with pytest.raises(JudgeBuildError, match="missing adapter\\(s\\) tech"):
        multi_lora_judge(paths)
    # a subset of dimensions needs only their adapters
    judge = multi_lora_judge(paths, dimensions=["fluency", "empathic"])
    assert judge.dimensions == ["fluency", "empathy"] and set(judge.model.options["adapters"]) == {
        "fluency", "fluency_en", "empathic", "empathic_en"}
    with pytest.raises(JudgeBuildError, match="does not exist"):
        scan_adapter_folder(tmp_path / "nowhere")
    with pytest.raises(JudgeBuildError, match="no adapter subfolders"):
        scan_adapter_folder(tmp_path)
    with pytest.raises(JudgeBuildError, match="not a PEFT adapter folder"):
        multi_lora_judge({**scan_adapter_folder(adapter_dir), "fluency": str(tmp_path)})
    with pytest.raises(JudgeBuildError, match="vLLM backend"):
        multi_lora_judge(adapter_dir, "openai/gpt-4")
    assert vllm_max_lora_rank([4]) == 8 and vllm_max_lora_rank([16, 2]) == 16
    with pytest.raises(JudgeBuildError, match="exceeds"):
        vllm_max_lora_rank([1024])


def test_judge_from_registry_needs_local_adapters(adapter_dir, tmp_path):
    with pytest.raises(JudgeBuildError, match="not local folders; set ESC_EVAL_MODEL_PATHS='esc-rank:"):
        judge_from_registry("esc-rank", load_registry(env={}))
    paths = ",".join(f"esc-rank:{p.name}={p}" for p in sorted(adapter_dir.iterdir()))
    reg = load_registry(env={"ESC_EVAL_MODEL_PATHS": f"esc-rank={tmp_path / 'internlm2'},{paths}"})
    judge = judge_from_registry("esc-rank", reg)
    assert judge.model.model == f"vllm/{tmp_path / 'internlm2'}"
    assert judge.model.options["trust_remote_code"] is True and judge.name == "esc-rank"
    assert select_adapter(judge, "humanoid", "en") == "human_en" and select_adapter(judge, "humanoid", "zh") == "human"
    with pytest.raises(JudgeBuildError, match="no adapters"):
        judge_from_registry("embedded", reg)


class RecordingJudge:
    """A chat model that records which adapter each request named."""

    def __init__(self):
        self.adapters = []

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        self.adapters.append(adapter)
        return ChatResult(text="2", prompt_tokens=10, top_logprobs=[{"2": -0.1, "3": -2.4}])


@pytest.mark.parametrize("language", ["en", "zh"])
async def test_scoring_sends_each_dimension_to_its_language_adapter(adapter_dir, language):
    # Needs sim/jobs/scoring.py to pick the adapter with sim.judging.judges.select_adapter (see the report's diff).
    judge = multi_lora_judge(adapter_dir, "vllm/embedded")
    model = RecordingJudge()
    rows = await score_dialogue([("assistant", "Hi"), ("seeker", "I feel low")], language, judge, model)
    assert [r["score"] for r in rows] == [2] * 7
    assert model.adapters == [official_adapter_name(d, language) for d in DIMENSION_NAMES]


async def test_single_adapter_judge_still_uses_the_model_adapter():
    judge = JudgeConfig(model=ModelRef(model="fake/judge", adapter="my-judge"))
    model = RecordingJudge()
    await score_dialogue([("assistant", "Hi")], "en", judge, model, ["fluency"])
    assert model.adapters == ["my-judge"] and select_adapter(judge, "fluency", "en") == "my-judge"


class EventJudge:
    """Records when each request starts and ends (after a short await), with its adapter."""

    def __init__(self):
        self.events = []

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        self.events.append(("start", adapter))
        await asyncio.sleep(0.01)
        self.events.append(("end", adapter))
        return ChatResult(text="3", prompt_tokens=10, top_logprobs=[{"3": -0.1, "2": -2.4}])


async def test_dialogue_first_sends_one_prompt_then_the_rest_per_adapter(adapter_dir):
    turns = [("assistant", "Hi"), ("seeker", "I feel low")]
    model = EventJudge()
    judge = JudgeConfig(model=ModelRef(model="vllm/embedded"), prompt_order="dialogue_first")
    rows = await score_dialogue(turns, "en", judge, model)
    assert [r["dimension"] for r in rows] == DIMENSION_NAMES and [r["score"] for r in rows] == [3] * 7
    # one engine prefix: the first request finishes (its prefix cached) before the other six start
    assert model.events[:3] == [("start", None), ("end", None), ("start", None)]
    assert [e for e, _ in model.events[2:8]] == ["start"] * 6
    # the paper's order: all seven at once
    model = EventJudge()
    await score_dialogue(turns, "en", JudgeConfig(model=ModelRef(model="vllm/embedded")), model)
    assert [e for e, _ in model.events[:7]] == ["start"] * 7
    # per-dimension adapters have separate KV caches: nothing to wait for, all seven at once
    model = EventJudge()
    lora = multi_lora_judge(adapter_dir, "vllm/embedded", prompt_order="dialogue_first")
    await score_dialogue(turns, "en", lora, model)
    assert [e for e, _ in model.events[:7]] == ["start"] * 7
