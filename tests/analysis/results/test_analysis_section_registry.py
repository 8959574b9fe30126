"""The registry's docstring lists every report section with its order (analysis/results/section_registry.py):
the list is read back and compared with what the report's modules register, so a section added, moved or
renamed without the list fails here."""
import re

import esc_eval.analysis.report.report  # noqa: F401 - imports every module that registers a section
from esc_eval.analysis.results import section_registry
from esc_eval.analysis.results.section_registry import registered_sections


def documented(doc: str) -> list[tuple[str, int]]:
    """The `id order` pairs of the docstring's list (after "as `id order`")."""
    listed = doc.split("as `id order`", 1)[1].split(":", 1)[1]
    return [(name, int(order)) for name, order in re.findall(r"([\w-]+) (\d+)[,.]", listed)]


def test_the_docstring_lists_every_registered_section_with_its_order():
    registered = [(s.id, s.order) for s in registered_sections()]
    assert len(registered) >= 24
    assert documented(section_registry.__doc__) == registered


def test_a_section_missing_from_the_list_is_seen():
    doc = section_registry.__doc__.replace("panels 270, ", "")
    assert doc != section_registry.__doc__ and ("panels", 270) not in documented(doc)
    assert documented(doc) != [(s.id, s.order) for s in registered_sections()]
