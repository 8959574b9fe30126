"""The model registry: every entry validates, the paper's targets are there, bad YAML is named."""
from __future__ import annotations

import pytest

from esc_eval.serve.chat.interface import UnknownModelError
from esc_eval.serve.registry.entry import PATHS_ENV, ModelEntry, RegistryError
from esc_eval.serve.registry.registry import load_registry, parse_path_overrides, resolve_spec

PAPER_TARGETS = {
    # registry name: (group, languages in Table 2)
    "gpt-4": ("close", {"en", "zh"}),
    "chatgpt": ("close", {"en", "zh"}),
    "vicuna-7b-v1.5": ("open", {"en", "zh"}),
    "wizardlm2-7b": ("open", {"en", "zh"}),
    "qwen1.5-7b-chat": ("open", {"en", "zh"}),
    "chatglm3-6b": ("open", {"en", "zh"}),
    "yi-6b-chat": ("open", {"en", "zh"}),
    "llama-3-8b-instruct": ("open", {"en"}),
    "extes-llama": ("domain", {"en"}),
    "chatcounselor": ("domain", {"en", "zh"}),
    "mindchat": ("domain", {"en", "zh"}),
    "soulchat": ("domain", {"en", "zh"}),
    "emollm": ("domain", {"en", "zh"}),
    "mechat": ("domain", {"en", "zh"}),
}


@pytest.fixture()
def reg():
    return load_registry(env={})


def test_every_entry_validates_and_round_trips(reg):
    assert len(reg.models) == 17
    for name, entry in reg.models.items():
        again = ModelEntry.model_validate(entry.model_dump())
        assert again == entry and again.name == name


def test_the_14_targets_with_groups_and_languages(reg):
    targets = {m.name: m for m in reg.targets()}
    assert set(targets) == set(PAPER_TARGETS)
    for name, (group, langs) in PAPER_TARGETS.items():
        assert targets[name].group == group, name
        assert set(targets[name].languages) == langs, name
    # Table 2: 14 English rows, 12 Chinese rows
    assert len(reg.targets("en")) == 14 and len(reg.targets("zh")) == 12


def test_role_judge_embedded(reg):
    role, rank, emb = reg.get("esc-role"), reg.get("esc-rank"), reg.get("embedded")
    assert role.group == "role" and role.source == "Qwen/Qwen1.5-14B-Chat" and role.adapters
    assert rank.group == "judge" and rank.trust_remote_code and rank.judge_rendering == "official"
    dims = ["fluency", "diversity", "empathic", "suggestion", "human", "tech", "overall"]
    assert set(rank.adapters) == set(dims) | {d + "_en" for d in dims}
    assert rank.adapters["tech_en"] == "haidequanbu/ESC-RANK/tech_en"
    assert emb.resolved_spec() == "vllm/embedded" and emb.group == "open"


def test_generation_defaults_follow_release(reg):
    assert reg.get("qwen1.5-7b-chat").generation.max_tokens == 512
    assert reg.get("llama-3-8b-instruct").generation.max_tokens == 256
    assert all(m.generation.temperature == 0.0 for m in reg.models.values())
    assert reg.get("gpt-4").api_key_env == "OPENAI_API_KEY"


def test_template_overrides_exist(reg):
    for m in reg.models.values():
        p = m.template.template_path()
        if p is not None:
            assert p.is_file() and "{%" in p.read_text(), m.name
    assert reg.get("soulchat").template.supports_system is False


def test_vicuna_template_renders_fastchat_format(reg):
    jinja2 = pytest.importorskip("jinja2")
    tpl = jinja2.Template(reg.get("vicuna-7b-v1.5").template.template_path().read_text())
    out = tpl.render(
        messages=[
            {"role": "system", "content": "SYS"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "sad"},
        ],
        bos_token="<s>", eos_token="</s>", add_generation_prompt=True,
    )
    assert out == "<s>SYS USER: hi ASSISTANT: hello</s> USER: sad ASSISTANT:"


def test_resolve_spec(reg):
    assert reg.resolve_spec("qwen1.5-7b-chat") == "vllm/Qwen/Qwen1.5-7B-Chat"
    assert reg.resolve_spec("gpt-4") == "openai/gpt-4"
    assert resolve_spec("fake/echo", reg) == "fake/echo"
    assert resolve_spec("openai/whatever", reg) == "openai/whatever"
    # 'Qwen/...' is not a backend prefix: looked up, and unknown
    with pytest.raises(UnknownModelError):
        resolve_spec("Qwen/Qwen1.5-7B-Chat", reg)


def test_unknown_name_lists_close_matches(reg):
    with pytest.raises(UnknownModelError, match="did you mean.*qwen1.5-7b-chat"):
        reg.get("qwen1.5-7b")


def test_model_without_weights_says_how_to_fix(reg):
    with pytest.raises(UnknownModelError, match=PATHS_ENV + "=extes-llama="):
        reg.resolve_spec("extes-llama")


def test_env_path_overrides(tmp_path):
    reg = load_registry(env={PATHS_ENV: "extes-llama=/m/extes, esc-rank:fluency_en=/lora/f"})
    assert reg.resolve_spec("extes-llama") == "vllm//m/extes"
    assert reg.get("esc-rank").adapters["fluency_en"] == "/lora/f"
    assert reg.get("esc-rank").adapters["fluency"] == "haidequanbu/ESC-RANK/fluency"
    pf = tmp_path / "paths.yaml"
    pf.write_text("qwen1.5-7b-chat: /m/qwen\n")
    reg = load_registry(paths_file=pf, env={})
    assert reg.get("qwen1.5-7b-chat").weights == "/m/qwen"
    with pytest.raises(UnknownModelError, match="qwen1.5-7b-chat"):
        load_registry(env={PATHS_ENV: "qwen1.5-7b-cht=/x"})
    with pytest.raises(RegistryError, match="name=path"):
        parse_path_overrides("no-equals-sign")


def test_overrides_merge_and_add(reg):
    r = load_registry(overrides={"gpt-4": {"generation": {"max_tokens": 64}},
                                 "mine": {"title": "Mine", "group": "open", "source": "a/b",
                                          "spec": "openai/a", "languages": ["en"]}}, env={})
    assert r.get("gpt-4").generation.max_tokens == 64 and r.get("gpt-4").generation.temperature == 0.0
    assert r.resolve_spec("mine") == "openai/a"


@pytest.mark.parametrize(
    "body, field",
    [
        ("languages: [fr]", "models.bad.languages.0"),
        ("languages: []", "models.bad.languages"),
        ("languages: [en]\n    groop: open", "models.bad.groop"),
        ("languages: [en]\n    generation: {temperature: -1}", "models.bad.generation.temperature"),
    ],
)
def test_bad_yaml_names_the_field(tmp_path, body, field):
    p = tmp_path / "r.yaml"
    head = "models:\n  bad:\n    title: Bad\n    group: open\n    source: a/b\n    spec: vllm/{path}\n"
    p.write_text(head + "    " + body + "\n")
    with pytest.raises(RegistryError) as ei:
        load_registry(p, env={})
    assert field in str(ei.value)


def test_bad_backend_and_unparseable_yaml(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("models:\n  x: {title: X, group: open, source: a, spec: hf/a, languages: [en]}\n")
    with pytest.raises(RegistryError, match=r"models\.x\.spec.*unknown backend 'hf'"):
        load_registry(p, env={})
    p.write_text("models: [unclosed\n")
    with pytest.raises(RegistryError, match="not valid YAML"):
        load_registry(p, env={})
    p.write_text("models:\n  x: {title: X, group: close, source: a, spec: openai/a, languages: [en]}\n")
    with pytest.raises(RegistryError, match="api_key_env"):
        load_registry(p, env={})


def test_build_chat_model_passes_registry_options(reg, monkeypatch):
    from esc_eval.serve.backends.openai_http import OpenAIChatModel
    from esc_eval.serve.registry.registry import build_chat_model

    r = load_registry(overrides={"gpt-4": {"api_key_env": "MY_KEY_VAR", "base_url": "http://127.0.0.1:9/v1",
                                           "generation": {"max_tokens": 99}}}, env={})
    m = build_chat_model("gpt-4", r)
    assert isinstance(m, OpenAIChatModel) and m.model == "gpt-4"
    assert (m.api_key_env, m.base_url, m.default_params.max_tokens) == ("MY_KEY_VAR", "http://127.0.0.1:9/v1", 99)
    assert build_chat_model("gpt-4", r, timeout_s=7).timeout_s == 7
    assert build_chat_model("openai/x", r).model == "x"


def test_vllm_entries_carry_their_template_quirks(reg):
    from esc_eval.serve.registry.entry import backend_options
    from esc_eval.serve.registry.registry import resolve

    vicuna = backend_options(reg.get("vicuna-7b-v1.5"))
    assert vicuna["chat_template"].endswith("vicuna_v1.1.jinja") and "supports_system" not in vicuna
    soul = backend_options(reg.get("soulchat"))
    assert soul["chat_template"].endswith("soulchat.jinja") and soul["supports_system"] is False
    assert backend_options(reg.get("mechat")) == {"trust_remote_code": True, "supports_system": False}
    assert "chat_template" not in backend_options(reg.get("embedded"))
    # the one resolver (used by simulation, scoring, card building) gives the same options
    spec, options = resolve("vicuna-7b-v1.5")
    assert spec == "vllm/lmsys/vicuna-7b-v1.5" and options == vicuna
