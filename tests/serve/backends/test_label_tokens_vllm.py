"""The judge's label read-out in the real vLLM engine, with a tiny random Llama and the dummy-prefix
SentencePiece tokenizer built on the fly: the five probabilities are those of the tokens greedy
decoding emits after the generation prompt, not of the bare encode('3') = '▁3' tokens."""
import pytest

from esc_eval.serve.chat.interface import GenerationParams
from esc_eval.serve.backends.vllm_engine import VLLMChatModel
from test_label_tokens import LABELS, prompt, sentencepiece_tokenizer  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow


# -- the real engine: a tiny random Llama with the dummy-prefix SentencePiece tokenizer ----------------
@pytest.fixture(scope="module")
def tiny_sentencepiece_model(sentencepiece_tokenizer, tmp_path_factory):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-sp-llama")
    tok = sentencepiece_tokenizer
    torch.manual_seed(0)
    # a large init range: peaked logits, so the right and the wrong label tokens score far apart
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      initializer_range=0.5, tie_word_embeddings=False)
    LlamaForCausalLM(cfg).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


async def test_engine_reads_the_labels_greedy_decoding_emits(tiny_sentencepiece_model, sentencepiece_tokenizer):
    import math

    import torch
    from transformers import LlamaForCausalLM

    from esc_eval.serve.chat.interface import ChatMessage
    from esc_eval.sim.judging.score_parser import distribution

    from esc_eval.serve.backends.vllm_engine import engines_started_here

    tok = sentencepiece_tokenizer
    messages = [ChatMessage(role="user", content="Rate it. The number only.")]
    with engines_started_here():  # the session's shared engine stays up for later tests
        model = VLLMChatModel(str(tiny_sentencepiece_model), max_model_len=512, dtype="float32")
        result = await model.chat(messages, GenerationParams(max_tokens=1, temperature=0.0, choices=LABELS, logprobs=5))
        greedy = await model.chat(messages, GenerationParams(max_tokens=1, temperature=0.0, choices=LABELS))
    probs = distribution(result.top_logprobs[0])
    assert set(result.top_logprobs[0]) == set(LABELS) and math.isclose(sum(probs), 1.0, rel_tol=1e-6)
    # the reference: the same weights in transformers, the next-token logits after the prompt
    hf = LlamaForCausalLM.from_pretrained(str(tiny_sentencepiece_model), dtype=torch.float32).eval()
    text = prompt(tok)
    ids = tok.encode(text, add_special_tokens=False)
    with torch.no_grad():
        logits = hf(torch.tensor([ids])).logits[0, -1]
    right = [tok.convert_tokens_to_ids(t) for t in LABELS]  # '3' as emitted after the prompt
    wrong = [tok.encode(t, add_special_tokens=False)[0] for t in LABELS]  # '▁3' from a bare encode
    ref = torch.softmax(logits[right], 0).tolist()
    bare = torch.softmax(logits[wrong], 0).tolist()
    assert max(abs(a - b) for a, b in zip(probs, ref)) < 1e-3
    assert max(abs(a - b) for a, b in zip(bare, ref)) > 1e-2  # the bare tokens would have read something else
    assert greedy.text == LABELS[max(range(5), key=ref.__getitem__)]
