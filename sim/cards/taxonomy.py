"""The 3-tier taxonomy of role-card problems (the paper's Table 9: 3 + 9 + 35 categories; its text says 37), as data."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
import yaml

from esc_eval.sim.prompt_files import data_file


@dataclass(frozen=True)
class Category:
    id: str
    name: str
    name_zh: str
    level: int
    parent: str | None = None  # id of the parent
    high: int | None = None  # the paper's count of high-quality cards (leaves only)
    middle: int | None = None
    children: tuple["Category", ...] = field(default=(), repr=False)


class Taxonomy:
    def __init__(self, tops: list[Category]):
        self.tops = tops
        self._by_key: dict[str, Category] = {}
        self._parent: dict[str, Category] = {}
        for node in self.walk():
            for key in {node.id, node.name.lower(), node.name_zh}:
                self._by_key.setdefault(key, node)
            for child in node.children:
                self._parent[child.id] = node

    def walk(self):
        stack = list(reversed(self.tops))
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def level(self, n: int) -> list[Category]:
        return [c for c in self.walk() if c.level == n]

    def leaves(self) -> list[Category]:
        return self.level(3)

    def find(self, name: str) -> Category | None:
        """Look a category up by id, English name (any case) or Chinese name."""
        if not name:
            return None
        key = name.strip()
        return self._by_key.get(key) or self._by_key.get(key.lower())

    def path(self, name: str) -> tuple[str, str | None, str | None]:
        """(category_1, category_2, category_3) English names for a category at any level."""
        node = self.find(name)
        if node is None:
            raise KeyError(f"unknown category {name!r}")
        names = [node.name]
        while node.id in self._parent:
            node = self._parent[node.id]
            names.insert(0, node.name)
        names += [None] * (3 - len(names))
        return names[0], names[1], names[2]


def _build(raw: dict, level: int, parent: str | None) -> Category:
    kids = tuple(_build(c, level + 1, raw["id"]) for c in raw.get("children", []) or [])
    return Category(
        id=raw["id"], name=raw["name"], name_zh=raw.get("name_zh", raw["name"]), level=level,
        parent=parent, high=raw.get("high"), middle=raw.get("middle"), children=kids,
    )


@lru_cache(maxsize=1)
def load_taxonomy() -> Taxonomy:
    text = data_file("taxonomy.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    return Taxonomy([_build(c, 1, None) for c in data["categories"]])
