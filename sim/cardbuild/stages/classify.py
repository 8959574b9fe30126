"""Third-level classification of a card into the Table 9 taxonomy.

Primary: an LLM prompt (this project's wording; the paper gives none) listing the leaves, parsed
STRICTLY: the reply must be one leaf's name (English or Chinese, any case, surrounding quotes
and final punctuation ignored), its id, or its number in the list ("7" / "7. name"). With
`constrained`, the model can only answer a listed name (structured output).
Fallback, clearly marked: when the reply does not parse, `keyword_category` scores the leaves
by keyword hits in the problem (sim/cardbuild/data/category_keywords.yaml); the result carries
method "keyword-fallback" so annotators and stats can tell it apart.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.cards.taxonomy import Category, load_taxonomy

INSTRUCTION = {
    "en": ("You need to classify a help seeker's role card into exactly one category of the list below, "
           "the one that best describes the events behind the seeker's problem. "
           "Answer with the category name only, exactly as written in the list, without other words."),
    "zh": "你需要把求助者的角色卡归入下列类别中的一个，选择最能描述求助者问题背后事件的类别。只输出类别名称，与列表中的写法完全一致，不要输出其他内容。",
}
HEADERS = {"en": ("Categories:", "Role card:"), "zh": ("类别：", "角色卡：")}


@dataclass
class Classification:
    category_3: str | None  # leaf id
    method: str  # llm | keyword-fallback | unclassified
    raw: str = ""


def leaves_for(top: str | None = None) -> list[Category]:
    """The third-level categories, all of them or those under one top category (id or name)."""
    tax = load_taxonomy()
    leaves = tax.leaves()
    if top:
        node = tax.find(top)
        if node is not None:
            leaves = [leaf for leaf in leaves if tax.path(leaf.id)[0] == node.name]
    return leaves


def leaf_label(leaf: Category, language: str) -> str:
    return leaf.name_zh if language == "zh" else leaf.name


def classification_messages(card_text: str, language: str, leaves: list[Category]) -> list[ChatMessage]:
    listing = "\n".join(f"{i}. {leaf_label(leaf, language)}" for i, leaf in enumerate(leaves, 1))
    cats, card = HEADERS[language]
    body = f"{INSTRUCTION[language]}\n{cats}\n{listing}\n{card}\n{card_text}"
    return [ChatMessage(role="system", content="You are a helpful assistant!"), ChatMessage(role="user", content=body)]


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s.strip().strip("'\"“”「」*").strip().rstrip(".。").strip()).lower()


def parse_category_reply(reply: str, leaves: list[Category]) -> str | None:
    """The leaf id the reply names, or None (strict: exact name/id/number only)."""
    text = _norm(reply or "")
    if not text:
        return None
    names = {}
    for leaf in leaves:
        for key in (leaf.id, leaf.name, leaf.name_zh):
            names[_norm(key)] = leaf.id
    if text in names:
        return names[text]
    m = re.fullmatch(r"(\d{1,2})\s*(?:[.、:：)]\s*(.*))?", text)
    if m:
        n = int(m.group(1))
        if 1 <= n <= len(leaves):
            leaf = leaves[n - 1]
            rest = _norm(m.group(2) or "")
            if not rest or names.get(rest) == leaf.id:
                return leaf.id
    return None


@lru_cache(maxsize=1)
def _keywords() -> dict[str, list[str]]:
    text = resources.files("esc_eval.sim.cardbuild").joinpath("data/category_keywords.yaml").read_text(encoding="utf-8")
    return {k: [str(w).lower() for w in v] for k, v in yaml.safe_load(text).items()}


def keyword_category(problem: str, leaves: list[Category] | None = None) -> str | None:
    """FALLBACK: the leaf with most keyword hits in the problem text (None when nothing hits)."""
    leaves = leaves or load_taxonomy().leaves()
    text = (problem or "").lower()
    best, best_hits = None, 0
    for leaf in leaves:
        hits = sum(1 for w in _keywords().get(leaf.id, []) if w in text)
        if hits > best_hits:
            best, best_hits = leaf.id, hits
    return best


def classify_reply(reply: str, problem: str, leaves: list[Category]) -> Classification:
    """Strict parse of the LLM's reply, else the keyword fallback, else unclassified."""
    leaf = parse_category_reply(reply, leaves)
    if leaf:
        return Classification(leaf, "llm", reply)
    leaf = keyword_category(problem, leaves)
    if leaf:
        return Classification(leaf, "keyword-fallback", reply)
    return Classification(None, "unclassified", reply)
