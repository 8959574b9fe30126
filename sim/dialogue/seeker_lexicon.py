"""What a simulated seeker's words are checked against: the patterns of a seeker who steps out of
its role (reveals an AI, breaks the role-play, talks like the assistant) and a small bilingual
affect lexicon with its negativity score. The simulation job's spoiled flags (spoiled.py) and
analysis's role-play fidelity checks (analysis/seekers/roleplay.py) share them, so a flag stored
with a run and one computed later from the same turns agree.
"""
from __future__ import annotations

import re

# A seeker that says it is an AI, or speaks about the role-play itself: out of character.
AI_IDENTITY_EN = [
    r"\bas an? (?:ai|artificial intelligence|language model|assistant|chatbot)\b",
    r"\b(?:i am|i'm) (?:an? )?(?:ai|artificial intelligence|language model|virtual assistant|chatbot)\b",
    r"\blarge language model\b|\blanguage model\b",
]
AI_IDENTITY_ZH = [
    r"作为(?:一个|一名)?(?:ai|人工智能|语言模型|ai助手|助手)",
    r"我是(?:一个|一名)?(?:ai|人工智能|语言模型|ai助手|智能助手|聊天机器人)",
    r"语言模型",
]
ROLE_BREAK = [
    r"\b(?:my|the|this) (?:character|role) card\b",
    r"\b(?:i am|i'm) (?:role[- ]?playing|playing (?:a|the|this) (?:role|character))\b",
    r"\b(?:in|for|during) (?:this|the|our) role[- ]?play\b",
    r"\b(?:break|breaking|broke|stay|staying|stayed) (?:in )?character\b",  # not "out of character": people say it
    r"角色卡|角色扮演|扮演(?:这个|的)?角色",
]
# A seeker that offers help in the supporter's voice: talks like the assistant.
HELPER_EN = [
    r"\bhow (?:can|may) i (?:help|assist) you\b",
    r"\bhow can i be of (?:help|assistance)\b",
    r"\bis there anything (?:else )?i can (?:help|do for you)\b",
    r"\bi'?m here to (?:help|assist|listen to you)\b",
    r"\bfeel free to (?:ask|reach out)\b",
]
HELPER_ZH = [
    r"有什么(?:我)?可以帮(?:助|到)?(?:你|您)",
    r"(?:我)?能为(?:你|您)(?:做些?什么|提供什么帮助)",
    r"很高兴(?:能)?为(?:你|您)(?:提供)?(?:帮助|服务)",
]
# Advice in the supporter's voice (beyond the character-break lexicon): only the spoiled flags use these.
ADVICE = [
    r"\bhere are (?:some|a few) (?:tips|suggestions|strategies|ways|steps|things you can)\b",
    r"\bi hope (?:this|that|these|my (?:advice|suggestions)) (?:helps?|tips help|suggestions help)\b",
    r"\bdon'?t hesitate to (?:reach out|ask|contact)\b",
    r"\bi(?:'d| would)? (?:suggest|recommend) (?:that )?you\b",
    r"\b(?:it'?s|it is) (?:important|essential|crucial) (?:to (?:remember|take care|prioritize|seek|reach out|"
    r"acknowledge|practice)|that you)\b",
    r"\byou (?:should|could|might|may want to) (?:consider )?(?:seeking|seek|talking to|talk to|reaching out to|"
    r"reach out to|speaking (?:to|with)|speak (?:to|with)) (?:a )?(?:professional|therapist|counsel+or|mental health)",
    r"\byou(?:'re| are) not alone\b",
    r"以下是一些(?:建议|方法|技巧)",
    r"希望(?:这些|我的|以上)?(?:建议|回答|方法)?(?:对你|对您|能)(?:有所)?帮助",
    r"(?:你|您)可以尝试以下",
]
# The character-break lexicon of the role-play fidelity checks, in its historical order (the
# first pattern a turn matches is the one reported), the role breaks last.
BREAK_PATTERNS = [*AI_IDENTITY_EN, *HELPER_EN, *AI_IDENTITY_ZH, *HELPER_ZH, *ROLE_BREAK]
BREAK_RE = [re.compile(p, re.IGNORECASE) for p in BREAK_PATTERNS]
OUT_OF_CHARACTER_RE = [re.compile(p, re.IGNORECASE) for p in (*AI_IDENTITY_EN, *AI_IDENTITY_ZH, *ROLE_BREAK)]
ASSISTANT_VOICE_RE = [re.compile(p, re.IGNORECASE) for p in (*HELPER_EN, *HELPER_ZH, *ADVICE)]

# Small bilingual affect lexicon. English entries ending in * are prefixes. Thanks are left out:
# seekers thank out of politeness from round 1 on, which says little about their mood.
NEGATIVE_EN = """sad sadness depress* anxi* worr* stress* upset hurt* lonely alone afraid scared fear* angry anger
frustrat* hopeless helpless overwhelm* tired exhaust* cry crying cried struggl* pain* miserable guilt* ashamed
shame confus* lost panic* terrible awful hate desperate nervous unhappy worse worst troubl* conflicted
heartbroken broken devastat* disappoint* regret* suffer* burden* pressure insecure bother* down""".split()
POSITIVE_EN = """better happy happier glad relieved relief hopeful calm* grateful great good fine confident
excited optimistic appreciat* motivated peaceful encourag* positive lighter improv* reassur* okay""".split()
NEGATIVE_ZH = """难过 伤心 焦虑 担心 压力 痛苦 孤独 害怕 恐惧 生气 愤怒 沮丧 绝望 无助 崩溃 疲惫 累 哭 烦 困扰 无奈 失望
后悔 委屈 郁闷 抑郁 紧张 不安 迷茫 纠结 自责 内疚 不开心 不高兴 难受""".split()
POSITIVE_ZH = """开心 高兴 好多了 放松 轻松 希望 安心 平静 释然 有信心 乐观 舒服 温暖 好受 期待 鼓励""".split()
NEGATORS_EN = {"not", "no", "never", "isn't", "wasn't", "don't", "doesn't", "didn't", "can't", "cannot", "won't",
               "hardly", "nothing"}
# Chinese positives preceded by these are negative ("不开心" is listed itself; this catches "不太开心").
NEGATORS_ZH = ("不", "没", "不太", "没有", "并不")


def _split_lexicon(lexicon: list[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Exact words and prefixes (entries ending in *): one set lookup and one startswith per word."""
    return (frozenset(e for e in lexicon if not e.endswith("*")), tuple(e[:-1] for e in lexicon if e.endswith("*")))


_NEGATIVE_EN, _POSITIVE_EN = _split_lexicon(NEGATIVE_EN), _split_lexicon(POSITIVE_EN)


def _en_match(word: str, lexicon: tuple[frozenset[str], tuple[str, ...]]) -> bool:
    exact, prefixes = lexicon
    return word in exact or word.startswith(prefixes)


def is_affect_word(word: str) -> bool:
    """Whether an English word (lower case) is in the affect lexicon, either side."""
    return _en_match(word, _NEGATIVE_EN) or _en_match(word, _POSITIVE_EN)


def negativity(text: str) -> float:
    """(negative - positive) / (negative + positive) hits in one turn, in [-1, 1]; 0 with no hit.
    English: word tokens, a negator right before a word flips it; Chinese: substring hits."""
    neg, pos = affect_hits(text)
    return 0.0 if neg + pos == 0 else (neg - pos) / (neg + pos)


def affect_hits(text: str) -> tuple[int, int]:
    """(negative, positive) lexicon hits in one turn (see negativity)."""
    neg = pos = 0
    words = re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower())
    for i, w in enumerate(words):
        flip = i > 0 and words[i - 1] in NEGATORS_EN
        if _en_match(w, _NEGATIVE_EN):
            pos, neg = (pos + 1, neg) if flip else (pos, neg + 1)
        elif _en_match(w, _POSITIVE_EN):
            pos, neg = (pos, neg + 1) if flip else (pos + 1, neg)
    rest = text
    for term in sorted(NEGATIVE_ZH, key=len, reverse=True):  # longest first: 不开心 before 开心
        neg += rest.count(term)
        rest = rest.replace(term, " ")
    for term in POSITIVE_ZH:
        for m in re.finditer(re.escape(term), rest):
            before = rest[max(0, m.start() - 2):m.start()]
            if any(before.endswith(n) for n in NEGATORS_ZH):
                neg += 1
            else:
                pos += 1
    return neg, pos
