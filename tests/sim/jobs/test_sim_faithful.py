"""Faithful runs on fake backends: registry adapters apply, generation settings and profiles,
seeds, and no stale reuse of a run folder made with another config."""
import json
import re

import pytest

import esc_eval.serve.registry.registry as registry_mod
from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.backends.fake import FakeChatModel
from esc_eval.serve.registry.entry import MissingAdapterError, PATHS_ENV, default_adapter, vllm_engine_options
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import load_registry, resolve
from esc_eval.sim.dialogue.generation import effective_adapter, effective_params, hf_sampling_defaults
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig
from esc_eval.sim.jobs.fingerprint import StaleRunError
from esc_eval.sim.jobs.scoring import run_scoring
from esc_eval.sim.jobs.simulation import run_simulation
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.runfolder import RunFolder


def make_adapter(path, r=8):
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"r": r, "peft_type": "LORA"}))
    (path / "adapter_model.safetensors").write_bytes(b"\0" * 64)
    return path


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """The packaged registry plus fake entries with adapters, installed as the process default."""
    role_lora = make_adapter(tmp_path / "lora" / "role")
    dims = {k: str(make_adapter(tmp_path / "lora" / k)) for k in
            ("fluency", "diversity", "empathic", "suggestion", "tech", "human", "overall")}
    reg = load_registry(env={}, overrides={
        "fake-role": {"title": "fake role", "group": "role", "source": "seeker", "spec": "fake/seeker",
                      "languages": ["en", "zh"], "adapters": {"role-lora": str(role_lora)}},
        "fake-target": {"title": "fake target", "group": "open", "source": "echo", "spec": "fake/echo",
                        "languages": ["en", "zh"], "generation": {"max_tokens": 256, "temperature": 0.7}},
        "fake-rank": {"title": "fake judge", "group": "judge", "source": "judge", "spec": "fake/judge",
                      "languages": ["en", "zh"], "judge_rendering": "official", "adapters": dims},
    })
    monkeypatch.setattr(registry_mod, "_DEFAULT", reg)
    return reg


@pytest.fixture
def calls(monkeypatch):
    """Every fake call's (script, adapter, params)."""
    seen: list[tuple[str, str | None, GenerationParams]] = []
    original = FakeChatModel.chat

    async def chat(self, messages, params=None, *, adapter=None, session_id=None):
        seen.append((self.script, adapter, params))
        return await original(self, messages, params, adapter=adapter, session_id=session_id)

    monkeypatch.setattr(FakeChatModel, "chat", chat)
    return seen


def cfg(**kw):
    base = dict(cards="sample", limit=2, role=ModelRef(model="fake-role"), targets=[ModelRef(model="fake/echo")],
                execution=ExecutionConfig(executor="local", concurrency=4))
    base.update(kw)
    return SimulationConfig(**base)


# -- 1. registry adapters -------------------------------------------------------------------
def test_missing_adapter_names_entry_and_path():
    reg = load_registry(env={})
    with pytest.raises(MissingAdapterError, match=r"'esc-role': adapter 'esc-role' folder haidequanbu/ESC-Role does not exist") as e:
        vllm_engine_options(reg.get("esc-role"))
    assert "\n" not in str(e.value) and PATHS_ENV in str(e.value)
    with pytest.raises(MissingAdapterError, match="esc-rank"):
        resolve("esc-rank", reg)


def test_local_adapters_become_engine_options(tmp_path):
    lora = make_adapter(tmp_path / "role", r=64)
    reg = load_registry(env={PATHS_ENV: f"esc-role={tmp_path / 'qwen'},esc-role:esc-role={lora}"})
    opts = vllm_engine_options(reg.get("esc-role"))
    assert opts["adapters"] == {"esc-role": str(lora)} and opts["max_lora_rank"] == 64 and opts["max_loras"] == 1
    assert default_adapter(reg.get("esc-role")) == "esc-role"
    assert default_adapter(reg.get("esc-rank")) is None  # per dimension, picked per call


def test_merged_weights_drop_the_adapter(tmp_path):
    reg = load_registry(env={PATHS_ENV: f"esc-role={tmp_path / 'merged'},esc-role:esc-role=-"})
    entry = reg.get("esc-role")
    assert entry.adapters == {} and "adapters" not in vllm_engine_options(entry)
    assert entry.resolved_spec() == f"vllm/{tmp_path / 'merged'}"


def test_registry_adapter_used_on_every_role_call_and_recorded(registry, calls, tmp_path):
    run_simulation(cfg(), tmp_path / "run")
    role_calls = [a for script, a, _ in calls if script == "seeker"]
    assert role_calls and set(role_calls) == {"role-lora"}
    assert {a for script, a, _ in calls if script == "echo"} == {None}
    rows = list(RunFolder(tmp_path / "run").iter_rows("dialogues"))
    assert {r["role_adapter"] for r in rows} == {"role-lora"} and {r["target_adapter"] for r in rows} == {None}


def test_missing_role_adapter_stops_before_any_dialogue(registry, calls, tmp_path):
    (registry.get("fake-role").adapters)["role-lora"] = str(tmp_path / "gone")
    with pytest.raises(MissingAdapterError, match=f"'fake-role': adapter 'role-lora' folder {tmp_path / 'gone'}"):
        run_simulation(cfg(), tmp_path / "run")
    assert calls == [] and not (tmp_path / "run").exists()


def test_registry_judge_uses_one_adapter_per_dimension_and_records_it(registry, calls, tmp_path):
    run_simulation(cfg(role=ModelRef(model="fake/seeker")), tmp_path / "run")
    scoring = ScoringConfig(judge=JudgeConfig(model=ModelRef(model="fake-rank"), name="rank"),
                            execution=ExecutionConfig(executor="local"))
    run_scoring(scoring, tmp_path / "run")
    judge_adapters = {a for script, a, _ in calls if script == "judge"}
    assert judge_adapters == {"fluency", "diversity", "empathic", "suggestion", "tech", "human", "overall"}
    rows = list(RunFolder(tmp_path / "run").iter_rows("scores"))
    assert {(r["dimension"], r["adapter"]) for r in rows} >= {("empathy", "empathic"), ("information", "suggestion")}
    assert {r["judge"] for r in rows} == {"rank"}


# -- 3. generation settings and profiles ----------------------------------------------------
def test_registry_params_are_defaults_and_config_overrides_field_by_field(registry):
    ref = ModelRef(model="fake-target", params=GenerationParams(max_tokens=100))
    release = effective_params(ref, "release")
    assert release.max_tokens == 100 and release.temperature == 0.7  # the config's field, the registry's other
    greedy = effective_params(ModelRef(model="fake-target"), "greedy")
    assert greedy.temperature == 0.0 and greedy.max_tokens == 256
    assert effective_params(ModelRef(model="llama-3-8b-instruct"), "release").max_tokens == 256
    assert effective_params(ModelRef(model="qwen1.5-7b-chat"), "release").max_tokens == 512
    assert effective_params(ModelRef(model="fake-target", params=GenerationParams(temperature=0.3)), "greedy").temperature == 0.3


def test_release_profile_reads_the_folders_sampling_defaults(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"do_sample": True, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}))
    assert hf_sampling_defaults(tmp_path) == {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}
    (tmp_path / "generation_config.json").write_text(json.dumps({"do_sample": False, "temperature": 0.7}))
    assert hf_sampling_defaults(tmp_path) == {}
    assert hf_sampling_defaults(tmp_path / "absent") == {}


def test_rows_and_manifest_record_effective_params_and_profile(registry, calls, tmp_path):
    run_simulation(cfg(targets=[ModelRef(model="fake-target")], profile="release"), tmp_path / "run")
    rows = list(RunFolder(tmp_path / "run").iter_rows("dialogues"))
    tp = json.loads(rows[0]["target_params"])
    assert tp["max_tokens"] == 256 and tp["temperature"] == 0.7 and rows[0]["profile"] == "release"
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["simulation"]["profile"] == "release"
    inputs = manifest["simulation"]["inputs"]
    assert len(inputs["cards"]["sha256"]) == 64 and set(inputs["prompts"]) == {"roleplay.yaml", "seeker_controls.yaml"}
    assert inputs["targets"]["fake-target"]["params"]["max_tokens"] == 256


# -- 4. seeds -------------------------------------------------------------------------------
def test_seed_reaches_every_sampled_call(registry, calls, tmp_path):
    run_simulation(cfg(targets=[ModelRef(model="fake-target")], profile="release", seeds=[3, 4]), tmp_path / "run")
    target_seeds = {p.seed for script, _, p in calls if script == "echo"}
    assert target_seeds == {3, 4}
    rows = list(RunFolder(tmp_path / "run").iter_rows("dialogues"))
    assert len(rows) == 4 and {r["seed"] for r in rows} == {3, 4}


def test_several_seeds_under_greedy_are_refused(registry, tmp_path):
    with pytest.raises(ValueError, match="seeds: 2 seeds under greedy decoding") as e:
        run_simulation(cfg(seeds=[0, 1]), tmp_path / "run")
    assert "\n" not in str(e.value) and not (tmp_path / "run").exists()


# -- 2. no stale reuse ----------------------------------------------------------------------
def snapshot(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("change, field", [
    (dict(rounds=3), "rounds"),
    (dict(role=ModelRef(model="fake-role", params=GenerationParams(max_tokens=64))), "role.params.max_tokens"),
    (dict(targets=[ModelRef(model="fake/echo", system_prompt="Be brief.")]), "target[fake/echo].system_prompt"),
    (dict(profile="release"), "profile"),
])
def test_changed_config_on_resume_is_refused_naming_the_field(registry, tmp_path, change, field):
    run_simulation(cfg(), tmp_path / "run")
    before = snapshot(tmp_path / "run")
    with pytest.raises(StaleRunError, match=re.escape(f"'{field}'")) as e:
        run_simulation(cfg(**change), tmp_path / "run")
    assert "\n" not in str(e.value)
    assert snapshot(tmp_path / "run") == before  # nothing touched


def test_changed_adapter_weights_or_card_file_are_refused(registry, tmp_path):
    cards = tmp_path / "cards.json"
    from esc_eval.sim.jobs.fingerprint import card_file

    cards.write_bytes(card_file(cfg()).read_bytes())
    run_simulation(cfg(cards=str(cards)), tmp_path / "run")
    (tmp_path / "lora" / "role" / "adapter_config.json").write_text(json.dumps({"r": 16}))
    with pytest.raises(StaleRunError, match="'role.adapter_weights'"):
        run_simulation(cfg(cards=str(cards)), tmp_path / "run")
    (tmp_path / "lora" / "role" / "adapter_config.json").write_text(json.dumps({"r": 8, "peft_type": "LORA"}))
    cards.write_bytes(cards.read_bytes() + b"\n")
    with pytest.raises(StaleRunError, match="'cards.sha256'"):
        run_simulation(cfg(cards=str(cards)), tmp_path / "run")


def test_same_config_resumes_and_a_new_target_is_new_work(registry, tmp_path):
    run_simulation(cfg(), tmp_path / "run")
    again = run_simulation(cfg(), tmp_path / "run")
    assert again["items"] == 0 and again["skipped_done"] == 2
    more = run_simulation(cfg(targets=[ModelRef(model="fake/echo"), ModelRef(model="fake-target")]), tmp_path / "run")
    assert more["items"] == 2 and more["skipped_done"] == 2
    assert effective_adapter(ModelRef(model="fake-role", adapter="other")) == "other"


# -- 7. ESC-RANK sees what it saw in the release -------------------------------------------------
# score.py prompt_EN[4] (humanoid), character for character: "AI " then two U+200B before each
# "assistant’s"; the stray "'" at its end is the release's too.
HUMANOID_EN = (
    "I need to evaluate the humanoid of an AI assistant through a conversation between an AI assistant and a user. "
    "As a data annotator, please help me rate the conversation according to the following rules:\n"
    "The humanoid of an AI assistant primarily focuses on the conversation content of AI assistants is different from "
    "that of humans.The total score ranges from 0 to 4, and here are the rules corresponding to each score:\n"
    "0: The dialogue content is difficult to understand.\n"
    "1: AI assistant has obvious AI tendencies, such as structured replies, or saying 'as a large language model'\n"
    "2: There are more than two places in the AI \u200b\u200bassistant\u2019s reply indicating that it is an AI assistant.\n"
    "3: There are two places in the AI \u200b\u200bassistant\u2019s reply that indicate it is an AI assistant.\n"
    "4: There are less than two places in the AI \u200b\u200bassistant\u2019s reply indicating that it is an AI assistant.\n"
)
INTERNLM2_META = (
    "You are an AI assistant whose name is InternLM (书生·浦语).\n"
    "- InternLM (书生·浦语) is a conversational language model that is developed by Shanghai AI Laboratory "
    "(上海人工智能实验室). It is designed to be helpful, honest, and harmless.\n"
    "- InternLM (书生·浦语) can understand and communicate fluently in the language chosen by the user such as "
    "English and 中文."
)


def test_official_rubric_full_strings_with_zero_width_spaces():
    from esc_eval.sim.judging.prompts import judge_messages
    from esc_eval.sim.judging.rubrics import rubric_text

    assert rubric_text("humanoid", "en", "official") == HUMANOID_EN
    assert rubric_text("humanoid", "zh", "official") == HUMANOID_EN  # prompt_ZH repeats it
    counts = {(d, lang): rubric_text(d, lang, "official").count("\u200b") for d in
              ("fluency", "expression", "empathy", "information", "skillful", "humanoid", "overall") for lang in ("en", "zh")}
    assert {k: v for k, v in counts.items() if v} == {("fluency", "en"): 4, ("information", "en"): 2,
                                                     ("information", "zh"): 2, ("humanoid", "en"): 6, ("humanoid", "zh"): 6}
    turns = [("assistant", "Hi, AI assistant here."), ("seeker", "I feel low.")]
    [msg] = judge_messages("humanoid", turns, "en")
    assert msg.role == "user" and msg.content == (
        HUMANOID_EN + "Dialogue between user and AI assistant: \n"
        "**AI助手**：Hi, **AI助手** here.\n\n**用户**I feel low.\n"
        "Based on the rules, give your humanoid score (The number only) to the Dialogue.")


def test_esc_rank_judge_gets_the_internlm2_meta_instruction_and_release_cap(tmp_path, monkeypatch):
    reg = load_registry(env={})
    entry = reg.get("esc-rank")
    assert entry.judge_system_prompt == INTERNLM2_META and entry.generation.max_tokens == 1024
    paths = ",".join(f"esc-rank:{name}={make_adapter(tmp_path / name)}" for name in entry.adapters)
    monkeypatch.setattr(registry_mod, "_DEFAULT", load_registry(env={PATHS_ENV: f"esc-rank={tmp_path / 'base'},{paths}"}))
    from esc_eval.sim.jobs.scoring_judges import with_registry_adapters

    judge = with_registry_adapters(JudgeConfig(model=ModelRef(model="esc-rank"), method="generate"))
    assert judge.system_prompt == INTERNLM2_META and judge.model.params.max_tokens == 1024
    assert judge.adapters["empathy:en"] == "empathic_en" and judge.judge_id == "esc-rank:generate:official"


async def test_scoring_puts_the_judge_system_prompt_first(calls):
    from esc_eval.serve.chat.interface import ChatMessage, get_chat_model
    from esc_eval.sim.jobs.scoring import score_dialogue

    seen = []
    model = get_chat_model("fake/judge")
    original = model.chat

    async def chat(messages, params=None, **kw):
        seen.append(messages)
        return await original(messages, params, **kw)

    model.chat = chat
    judge = JudgeConfig(model=ModelRef(model="fake/judge"), system_prompt=INTERNLM2_META, dimensions=["humanoid"])
    await score_dialogue([("assistant", "Hello."), ("seeker", "Hi.")], "en", judge, model)
    assert seen[0][0] == ChatMessage(role="system", content=INTERNLM2_META) and seen[0][1].role == "user"


def test_release_profile_follows_evaluate_py_per_model(tmp_path, monkeypatch):
    (tmp_path / "generation_config.json").write_text(json.dumps({"do_sample": True, "temperature": 0.7, "top_p": 0.8}))
    reg = load_registry(env={PATHS_ENV: f"qwen1.5-7b-chat={tmp_path},llama-3-8b-instruct={tmp_path}"})
    monkeypatch.setattr(registry_mod, "_DEFAULT", reg)
    qwen = effective_params(ModelRef(model="qwen1.5-7b-chat"), "release")
    assert (qwen.temperature, qwen.top_p, qwen.max_tokens) == (0.7, 0.8, 512)  # generate() with the folder's defaults
    llama = effective_params(ModelRef(model="llama-3-8b-instruct"), "release")
    assert (llama.temperature, llama.max_tokens) == (0.0, 256)  # do_sample=False in evaluate.py
    assert effective_params(ModelRef(model="qwen1.5-7b-chat"), "greedy").temperature == 0.0


def test_cli_bad_inputs_are_one_line_errors(tmp_path):
    """A missing registry adapter and a changed config on resume: one line, non-zero exit."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "RAY_AUTH_MODE": "disabled", PATHS_ENV: f"esc-role={tmp_path / 'qwen'}"}
    env.pop("ESC_EVAL_MODEL_PATHS_FILE", None)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "esc_eval.cli", *args], capture_output=True, text=True,
                              timeout=120, env=env)

    proc = cli("simulate", "--role", "esc-role", "--target", "fake/echo", "-n", "1", "-o", str(tmp_path / "run"))
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "'esc-role'" in lines[0] and "haidequanbu/ESC-Role" in lines[0] and not (tmp_path / "run").exists()
    cfg_file = tmp_path / "sim.yaml"
    cfg_file.write_text("role: {model: fake/seeker}\nexecution: {executor: local}\nlimit: 1\n")
    assert cli("simulate", "-c", str(cfg_file), "--target", "fake/echo", "-o", str(tmp_path / "ok")).returncode == 0
    cfg_file.write_text("role: {model: fake/seeker}\nexecution: {executor: local}\nlimit: 1\nrounds: 2\n")
    proc = cli("simulate", "-c", str(cfg_file), "--target", "fake/echo", "-o", str(tmp_path / "ok"))
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode != 0 and len(lines) == 1 and "'rounds'" in lines[0], proc.stderr


async def test_a_label_missing_from_top_k_makes_the_distribution_partial_not_zero():
    import math

    from esc_eval.serve.chat.interface import ChatResult
    from esc_eval.sim.jobs.scoring import score_dialogue

    class TopThree:
        async def chat(self, messages, params=None, **kw):  # a server that returns only its top 3
            return ChatResult(text="3", top_logprobs=[{"3": -0.2, " 2": -1.9, "4": -2.5}])

    judge = JudgeConfig(model=ModelRef(model="fake/judge"), dimensions=["fluency"])
    [row] = await score_dialogue([("assistant", "Hi."), ("seeker", "Hello.")], "en", judge, TopThree())
    assert row["probs_status"] == "partial" and row["score"] == 3 and row["expected"] is None
    assert math.isnan(row["probs"][0]) and math.isnan(row["probs"][1]) and row["probs"][3] > row["probs"][2] > row["probs"][4] > 0
