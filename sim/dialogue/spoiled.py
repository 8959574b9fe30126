"""Dialogues the simulator spoiled: which of a dialogue's faults are the simulated seeker's, as a
pure function of its turns and its card. A flagged dialogue measures the role model more than the
model under test (tau2-bench found up to 30% of failed trajectories were the simulator's errors).

Reasons, each a rule anyone can recompute (the lexicons are seeker_lexicon.py's):
  out_of_character      a seeker turn says it is an AI / language model, or speaks about the
                        role-play itself ("my character card", "角色扮演")
  talks_like_assistant  a seeker turn offers help or advice in the supporter's voice ("How can I
                        help you", "I'm here to help", "here are some tips", "you're not alone"),
                        or lists tips: 3+ lines starting with a list marker (1. / - / * / •)
  repeats_itself        a seeker turn of 5+ words (8+ characters in Chinese) near-identical
                        (difflib ratio >= 0.9 over words; characters in Chinese) to an earlier
                        seeker turn, or to the assistant turn right before it
  empty_or_truncated    a seeker turn with no text, or cut by the token limit (finish reason "length";
                        not "sentence": a reply cut back to its last full sentence by the run's
                        end_at_sentence reads whole)
  resolves_in_first_round  in its opening turn or its reply to the supporter's first answer, the
                        seeker says goodbye with thanks, or says its distress is gone ("I feel
                        better now", "好多了") with no negative word of the lexicon in that turn
  ignores_card          none of the card's words (its problem and occupation) appears in anything
                        the seeker said. Conservative: checked only when the card has 3+ such
                        words and the seeker said 40+ words of its own (words the card's words
                        could be: not function words, not affect; 100+ Chinese characters). People
                        who never name their situation say less: of FailedESConv's 196 seekers, 19
                        never do in their first five rounds and none of them says 40 such words
                        there (the most: 20); over whole dialogues 3 of the 17 who never do say
                        more. A simulated seeker writes 30-50 words a turn. The card's
                        words leave out function words and the affect lexicon (any seeker says
                        "stressed"); a seeker word matches on a shared 4-letter prefix (Chinese: a
                        shared character bigram), so "divorced" matches "divorce" and "job" "jobs".
Only completed dialogues are judged: a failed one is a failure already (its flag is None).
"""
from __future__ import annotations

import difflib
import re
from typing import Any, Iterable, Mapping

from esc_eval.sim.dialogue.seeker_lexicon import (ASSISTANT_VOICE_RE, OUT_OF_CHARACTER_RE, affect_hits, is_affect_word,
                                                  negativity)

REASONS = ("out_of_character", "talks_like_assistant", "repeats_itself", "empty_or_truncated",
           "resolves_in_first_round", "ignores_card")
REASON_TITLES = {"out_of_character": "out of character", "talks_like_assistant": "talks like the assistant",
                 "repeats_itself": "repeats itself", "empty_or_truncated": "empty or truncated turn",
                 "resolves_in_first_round": "resolves in the first round", "ignores_card": "ignores its card"}

REPEAT_RATIO = 0.9
REPEAT_MIN_WORDS, REPEAT_MIN_CHARS_ZH = 5, 8
CARD_MIN_WORDS, SEEKER_MIN_WORDS, SEEKER_MIN_CHARS_ZH = 3, 40, 100
LIST_MIN_ITEMS = 3

_WORD = re.compile(r"[a-z0-9]+")
_CJK = re.compile(r"[\u3400-\u9fff]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,2}[.)、]|[-*•])\s*\S", re.MULTILINE)
_THANKS = re.compile(r"\bthanks?\b|\bthank you\b|\bappreciate (?:it|your|you)\b|谢谢|感谢|多谢", re.IGNORECASE)
_GOODBYE = re.compile(r"\b(?:good)?bye\b|\bsee you\b|\btake care\b(?! of)|\bhave a (?:nice|good|great) "
                      r"(?:day|night|evening|one)\b|\btalk (?:to you )?later\b|再见|拜拜|下次再聊", re.IGNORECASE)
_RELIEF = re.compile(r"\b(?:i feel|i'm feeling|i am feeling|i already feel|i'm|i am) (?:so |much |a lot |a bit |way |"
                     r"already )*(?:better|relieved|lighter|at peace)\b|\b(?:i'?m|i am) (?:fine|okay|ok|good|all good|better) now\b"
                     r"|\b(?:problem|it|that)(?:'s| is) (?:all )?(?:solved|resolved|sorted)\b"
                     r"|好多了|没事了|问题解决了|心情好(?:多|些)了|轻松多了|释然了", re.IGNORECASE)

STOPWORDS_EN = frozenset("""
a about above after again against all also although always am an and another any anymore are around as at away
back be because been before being between both but by can cannot could did does doing done don down during each
either even ever every few for from further get gets getting got had has have having he her here hers herself him
himself his how however if in into is it its itself just keep keeps kept know knows last lately let like lot made
make makes many may me mentioned might more most much must my myself never new no nor not now of off often old on
once one only or other others our out over own people person problem problems put rather really recently said same
say says see seeker seems she should since so some someone something still such than that the their them
themselves then there these they thing things think this those though through time to too two under unable until
up upon user very want wants was way we week weeks well were what when where whether which while who whom whose
why will with within without would year years yet you your day days month months life feel feels feeling feelings
seeking help support advice cope deal dealing situation issue issues currently able become becomes became tell told
""".split())
STOPWORDS_ZH = frozenset("""自己 感到 觉得 因为 所以 但是 一个 没有 什么 这个 那个 他们 我们 你们 问题 现在 最近 非常 已经 时候
可以 不知 知道 如何 怎么 开始 情况 影响 导致 对于 以及 并且 还有 目前 经常 一直 不是 就是 而且 因此 面临 遇到 感觉 用户 求助
助者 寻求 帮助 建议 生活 事情 自我 无法 不能 需要 想要 希望 一些 很多 这些 那些 如果 虽然 还是 或者 之后 之前 其他 他的 她的
提及 未提 及了 的人 了一 是一 在一 很多 不到 得到 出现 发现 进行 表示 认为 担心 压力 焦虑 情绪 心情 感受""".split())


def _text(turn: Any, key: str, default: Any = None) -> Any:
    return turn.get(key, default) if isinstance(turn, Mapping) else getattr(turn, key, default)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _units(text: str) -> list[str]:
    """What a repeat is measured over: words, or characters where the text is mostly Chinese."""
    cjk = _CJK.findall(text)
    return cjk if len(cjk) >= len(_words(text)) and cjk else _words(text)


def _long_enough(units: list[str]) -> bool:
    return len(units) >= (REPEAT_MIN_CHARS_ZH if units and _CJK.match(units[0]) else REPEAT_MIN_WORDS)


def _near(a: list[str], b: list[str]) -> bool:
    m = difflib.SequenceMatcher(None, a, b, autojunk=False)
    # The cheap upper bounds first: most pairs are nowhere near.
    return m.real_quick_ratio() >= REPEAT_RATIO and m.quick_ratio() >= REPEAT_RATIO and m.ratio() >= REPEAT_RATIO


def _repeats(turns: list[Any]) -> bool:
    seen: list[list[str]] = []
    previous: list[str] | None = None  # the assistant turn right before (the opener included)
    for t in turns:
        units = _units(_text(t, "text") or "")
        if _text(t, "speaker") != "seeker":
            previous = units
            continue
        if _long_enough(units) and (any(_near(units, s) for s in seen) or (previous and _near(units, previous))):
            return True
        seen.append(units)
    return False


def _resolves(text: str) -> bool:
    closes = bool(_THANKS.search(text)) and bool(_GOODBYE.search(text))
    relieved = bool(_RELIEF.search(text)) and affect_hits(text)[0] == 0
    return closes or relieved


def _content(word: str) -> bool:
    """A word a card's problem could be named by: 3+ letters, not a number, a function word or affect."""
    return len(word) >= 3 and not word.isdigit() and word not in STOPWORDS_EN and not is_affect_word(word)


def _stem_match(word: str, keys: set[str], short: tuple[str, ...], prefixes: set[str]) -> bool:
    """A shared 4-letter prefix; a 3-letter word or key matches as a prefix of the other ("job", "jobs")."""
    if word in keys or word.startswith(short):
        return True
    return word[:4] in prefixes if len(word) >= 4 else word in prefixes


def card_content(occupation: str | None, problem: str | None) -> str:
    """What `ignores_card` looks for of a card: its occupation and its problem."""
    return "\n".join(x for x in (occupation, problem) if x)


def _ignores_card(seeker_texts: list[str], card: str | None, language: str | None) -> bool:
    if not card:
        return False
    said = " ".join(seeker_texts)
    if language == "zh" or (language is None and _CJK.search(card)):
        keys = {run[i:i + 2] for run in _CJK_RUN.findall(card) for i in range(len(run) - 1)}
        keys = {k for k in keys if k not in STOPWORDS_ZH and negativity(k) == 0}
        if len(keys) < CARD_MIN_WORDS or len(_CJK.findall(said)) < SEEKER_MIN_CHARS_ZH:
            return False
        return not any(k in said for k in keys)
    keys = {w for w in _words(card) if _content(w)}
    words = [w for w in _words(said) if _content(w)]
    if len(keys) < CARD_MIN_WORDS or len(words) < SEEKER_MIN_WORDS:
        return False
    short = tuple(k for k in keys if len(k) < 4)
    prefixes = {k[:4] for k in keys if len(k) >= 4} | {k[:3] for k in keys}
    return not any(_stem_match(w, keys, short, prefixes) for w in words)


def spoiled_reasons(turns: Iterable[Any], card: str | None = None, language: str | None = None) -> list[str]:
    """The reasons (REASONS order) a dialogue's seeker spoiled it; [] when none. turns: dicts or
    objects with speaker, text and finish_reason (a dialogue row's turns or sim.dialogue Turns);
    card: the card's content (card_content(): occupation and problem; None: `ignores_card` is not
    checked); language: the card's, en or zh."""
    turns = list(turns)
    seeker = [t for t in turns if _text(t, "speaker") == "seeker"]
    texts = [(_text(t, "text") or "").replace("\u2019", "'") for t in seeker]  # curly apostrophes as straight ones
    found = set()
    for text in texts:
        if any(rx.search(text) for rx in OUT_OF_CHARACTER_RE):
            found.add("out_of_character")
        if any(rx.search(text) for rx in ASSISTANT_VOICE_RE) or len(_LIST_ITEM.findall(text)) >= LIST_MIN_ITEMS:
            found.add("talks_like_assistant")
    if _repeats(turns):
        found.add("repeats_itself")
    if any(not (_text(t, "text") or "").strip() or _text(t, "finish_reason") == "length" for t in seeker):
        found.add("empty_or_truncated")
    if any(_resolves(text) for text in texts[:2]):
        found.add("resolves_in_first_round")
    if _ignores_card(texts, card, language):
        found.add("ignores_card")
    return [r for r in REASONS if r in found]


def spoiled_columns(turns: Iterable[Any], status: str | None, card: str | None = None,
                    language: str | None = None) -> tuple[bool | None, list[str] | None]:
    """(spoiled, spoiled_reasons) as a dialogue row stores them: (None, None) unless the dialogue
    completed (status "ok")."""
    if status != "ok":
        return None, None
    reasons = spoiled_reasons(turns, card, language)
    return bool(reasons), reasons
