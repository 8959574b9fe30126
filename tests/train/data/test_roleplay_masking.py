"""Role-play SFT examples: the role model's view of a dialogue and loss only on the seeker's turns."""
from __future__ import annotations

import pytest

from esc_eval.sim.dialogue.prompts import opener
from esc_eval.train.data.chat_tokens import IGNORE_INDEX, tokenize_chat
from esc_eval.train.data.dialogue_sources import SourceDialogue
from esc_eval.train.errors import TrainInputError
from esc_eval.train.data.roleplay_data import RolePlayExample, build_roleplay_examples, roleplay_messages, tokenize_roleplay

CARD = "Age: young\nGender: female\nOccupation: student\nProblem: exam stress"


def dialogue(turns, **kw):
    return SourceDialogue(dialogue_id="d", language="en", turns=turns, card_text=CARD, **kw)


def test_roles_swap_and_system_prompt_holds_card():
    msgs = roleplay_messages(dialogue([("assistant", "Hello, how can I help?"), ("seeker", "I am stressed."),
                                       ("assistant", "Why?"), ("seeker", "Exams."), ("assistant", "I see.")]))
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant"]
    assert CARD in msgs[0]["content"]
    assert msgs[2]["content"] == "I am stressed." and msgs[4]["content"] == "Exams."  # trailing AI turn dropped


def test_seeker_first_gets_the_opener():
    msgs = roleplay_messages(dialogue([("seeker", "hello"), ("assistant", "Hi, how are you?"), ("seeker", "bad")]))
    assert msgs[1] == {"role": "user", "content": opener("en")}
    assert [m["role"] for m in msgs[1:]] == ["user", "assistant", "user", "assistant"]


def test_no_card_or_no_seeker_turn_is_an_error():
    with pytest.raises(TrainInputError, match="no role card"):
        roleplay_messages(SourceDialogue("x", "en", [("seeker", "hi")]))
    with pytest.raises(TrainInputError, match="no seeker turn"):
        roleplay_messages(dialogue([("assistant", "Hello")]))
    assert build_roleplay_examples([dialogue([("assistant", "Hello")])]) == []


def _targets(tokenizer, tok):
    """Decoded text of each contiguous run of labelled tokens."""
    runs, cur = [], []
    for i, lab in zip(tok.input_ids, tok.labels):
        if lab != IGNORE_INDEX:
            assert lab == i
            cur.append(i)
        elif cur:
            runs.append(tokenizer.decode(cur))
            cur = []
    if cur:
        runs.append(tokenizer.decode(cur))
    return runs


def test_loss_only_on_seeker_turns(tokenizer):
    ex = build_roleplay_examples([dialogue([("assistant", "Hello there."), ("seeker", "I am stressed."),
                                            ("assistant", "Why?"), ("seeker", "My exams.")])])[0]
    tok = tokenize_roleplay(tokenizer, ex, max_length=4096)
    assert _targets(tokenizer, tok) == ["I am stressed.<|im_end|>\n", "My exams.<|im_end|>\n"]
    assert not tok.truncated and len(tok.input_ids) == len(tok.labels)
    # everything before the first seeker turn (system, opener, role headers) carries no loss
    first = tok.labels.index(next(x for x in tok.labels if x != IGNORE_INDEX))
    assert "Hello there." in tokenizer.decode(tok.input_ids[:first])


def test_mask_matches_assistant_tokens_mask_of_a_generation_template(tokenizer):
    """Growing prefixes give the same mask as a {% generation %} template (up to the newline)."""
    gen_template = (
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' }}"
        "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
        "{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
    msgs = roleplay_messages(dialogue([("assistant", "Hello."), ("seeker", "I am sad."), ("assistant", "Why?"),
                                       ("seeker", "Work.")]))
    ours = tokenize_chat(tokenizer, msgs, 4096)
    out = tokenizer.apply_chat_template(msgs, chat_template=gen_template, tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True)
    assert out["input_ids"] == ours.input_ids
    newline = tokenizer("\n", add_special_tokens=False)["input_ids"]
    ours_mask = [lab != IGNORE_INDEX and not (i > 0 and ours.input_ids[i - 1] == tokenizer.convert_tokens_to_ids("<|im_end|>")
                                              and [ours.input_ids[i]] == newline)
                 for i, lab in enumerate(ours.labels)]
    assert ours_mask == [bool(m) for m in out["assistant_masks"]]


def test_truncation_keeps_complete_leading_turns(tokenizer):
    long = " ".join(["I have been feeling really stressed about my exams and my parents."] * 30)
    ex = build_roleplay_examples([dialogue([("assistant", "Hello."), ("seeker", "Short answer."),
                                            ("assistant", "Tell me more."), ("seeker", long)])])[0]
    full = tokenize_roleplay(tokenizer, ex, max_length=100000)
    cut = tokenize_roleplay(tokenizer, ex, max_length=len(full.input_ids) - 10)
    assert cut.truncated and _targets(tokenizer, cut) == ["Short answer.<|im_end|>\n"]
    assert cut.input_ids == full.input_ids[: len(cut.input_ids)]
    assert tokenize_roleplay(tokenizer, ex, max_length=20) is None  # not even the first turn fits
    with pytest.raises(TrainInputError, match="longer than max_length"):
        tokenize_chat(tokenizer, ex.messages, 20, truncation="error")


def test_esconv_shared_sample_masks(tokenizer, esc_samples):
    from esc_eval.train.data.dialogue_sources import load_dialogues

    dialogues = load_dialogues(esc_samples / "esconv" / "FailedESConv.json")[:5]
    for ex in build_roleplay_examples(dialogues):
        tok = tokenize_roleplay(tokenizer, ex, max_length=100000)
        seeker_texts = [m["content"] for m in ex.messages if m["role"] == "assistant"]
        assert _targets(tokenizer, tok) == [t + "<|im_end|>\n" for t in seeker_texts]
        assert isinstance(ex, RolePlayExample)
