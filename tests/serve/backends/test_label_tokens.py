"""The judge's label tokens are the ones a model emits right after the generation prompt, for a
SentencePiece tokenizer with a dummy prefix (bare encode('3') = '▁3') and a byte-level BPE one,
both built on the fly. No engine: the engine-side read-out is in test_sim_rank_vllm.py."""
import json
from types import SimpleNamespace

import pytest

from esc_eval.serve.chat.interface import ChatModelError, GenerationParams
from esc_eval.serve.backends.vllm_engine import VLLMChatModel

LABELS = ["0", "1", "2", "3", "4"]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def corpus():
    import random

    rng = random.Random(0)
    return [f"score {rng.randint(0, 4)} assistant\n{rng.randint(0, 4)} the answer is {rng.randint(0, 4)}. "
            f"Rate {rng.randint(0, 99)} user says hello world" for _ in range(3000)]


@pytest.fixture(scope="module")
def sentencepiece_tokenizer(tmp_path_factory):
    """A Llama-style SentencePiece BPE with a dummy prefix (as InternLM2 and Llama-2 have)."""
    sentencepiece = pytest.importorskip("sentencepiece")
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("sp")
    (root / "corpus.txt").write_text("\n".join(corpus()))
    sentencepiece.SentencePieceTrainer.train(
        input=str(root / "corpus.txt"), model_prefix=str(root / "tokenizer"), vocab_size=370, model_type="bpe",
        add_dummy_prefix=True, byte_fallback=True, user_defined_symbols=["<|im_start|>", "<|im_end|>"],
        minloglevel=2)
    (root / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "LlamaTokenizer", "add_bos_token": False, "legacy": False, "chat_template": CHATML}))
    return AutoTokenizer.from_pretrained(str(root))


@pytest.fixture(scope="module")
def byte_level_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus(), trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|im_start|>", "<|im_end|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, chat_template=CHATML)


def model_with(tokenizer):
    """label_token_ids and _sampling_params only need the host's tokenizer, cache and context length."""
    host = SimpleNamespace(tokenizer=tokenizer, label_ids={}, max_model_len=4096)
    return SimpleNamespace(_host=host, name="vllm/tiny", label_token_ids=lambda text, labels:
                           VLLMChatModel.label_token_ids(SimpleNamespace(_host=host), text, labels))


def prompt(tokenizer):
    return tokenizer.apply_chat_template([{"role": "user", "content": "Rate it. The number only."}],
                                         tokenize=False, add_generation_prompt=True)


@pytest.mark.parametrize("which", ["sentencepiece_tokenizer", "byte_level_tokenizer"])
def test_label_tokens_are_those_after_the_generation_prompt(which, request):
    tok = request.getfixturevalue(which)
    text = prompt(tok)
    ids = VLLMChatModel.label_token_ids(SimpleNamespace(_host=SimpleNamespace(tokenizer=tok, label_ids={})), text, LABELS)
    base = tok.encode(text, add_special_tokens=False)
    for label, got in zip(LABELS, ids):
        assert got == tok.encode(text + label, add_special_tokens=False)[len(base):]
        assert len(got) == 1 and tok.decode(got) == label


def test_sentencepiece_bare_encode_is_the_wrong_token(sentencepiece_tokenizer):
    tok = sentencepiece_tokenizer
    text = prompt(tok)
    after = VLLMChatModel.label_token_ids(SimpleNamespace(_host=SimpleNamespace(tokenizer=tok, label_ids={})), text, ["3"])[0]
    bare = tok.encode("3", add_special_tokens=False)
    assert tok.convert_ids_to_tokens(bare) == ["▁3"] and tok.convert_ids_to_tokens(after) == ["3"]


def test_sampling_params_mask_and_read_the_tokens_after_the_prompt(sentencepiece_tokenizer):
    pytest.importorskip("vllm")
    tok = sentencepiece_tokenizer
    m = model_with(tok)
    text = prompt(tok)
    sp = VLLMChatModel._sampling_params(m, GenerationParams(max_tokens=1, choices=LABELS, logprobs=5), 20, text)
    want = [tok.convert_tokens_to_ids(t) for t in LABELS]  # the bare digits, no '▁'
    assert sp.allowed_token_ids == want and sp.logprob_token_ids == want and sp.max_tokens == 1


def test_a_label_that_is_not_one_token_is_a_clear_error(sentencepiece_tokenizer):
    pytest.importorskip("vllm")
    m = model_with(sentencepiece_tokenizer)
    text = prompt(sentencepiece_tokenizer)
    with pytest.raises(ChatModelError, match=r"vllm/tiny: label 'hello world' is not one token after the generation prompt"):
        VLLMChatModel._sampling_params(m, GenerationParams(max_tokens=1, choices=["0", "hello world"], logprobs=2), 20, text)
