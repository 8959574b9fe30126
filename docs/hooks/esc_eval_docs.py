"""mkdocs hooks of the esc-eval site (mkdocs.yml `hooks:`).

- The front page is README.md, its links into docs/ made relative to the site (one text, no copy).
- A page's `<!-- generated: NAME -->` line is replaced, at build time, by a reference generated from
  the code: `cli` (the typer app), `config` (the pydantic config models), `schema` (the run folder's
  pyarrow schemas), `layout` (the packages, their docstrings and the import contracts).
- Hand-written text is checked: a repository path that does not exist, or an `esc-eval` command
  line naming a command or option the CLI does not have, is a warning (an error with --strict).
"""
from __future__ import annotations

import logging
import re
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docgen_checks  # noqa: E402
import docgen_cli  # noqa: E402
import docgen_config  # noqa: E402
import docgen_layout  # noqa: E402
import docgen_schema  # noqa: E402

log = logging.getLogger("mkdocs.hooks.esc_eval")
MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->[ \t]*$", re.M)
ROOT: Path = Path(__file__).resolve().parents[2]


def _app() -> Any:
    from esc_eval.cli.app import app

    return app


@lru_cache(maxsize=None)
def _tree() -> docgen_checks.CommandTree:
    return docgen_checks.CommandTree(_app())


def _schema() -> str:
    stale = docgen_schema.stale_notes()
    for name in stale:
        log.warning("docs/hooks/docgen_schema.py: a note names %s, which the run folder's schemas do not have", name)
    return docgen_schema.render_schema()


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": lambda: docgen_cli.render_cli(_app()),
    "config": docgen_config.render_config,
    "schema": _schema,
    "layout": lambda: docgen_layout.render_layout(ROOT),
}


def readme_as_index(text: str) -> str:
    """README.md as the site's front page: links into docs/ made relative to the site."""
    return re.sub(r"\]\((?:\./)?docs/", "](", text)


def check(markdown: str, where: str) -> list[str]:
    """The problems of one page's hand-written Markdown."""
    problems = [f"{where}: names {p}, which is not in the repository"
                for p in docgen_checks.missing_paths(markdown, ROOT)]
    tree = _tree()
    for line in docgen_checks.code_texts(markdown):
        problems += [f"{where}: {p} (in `{' '.join(line.split())[:100]}`)" for p in tree.problems(line)]
    return problems


def on_config(config: Any) -> Any:
    global ROOT
    ROOT = Path(config.config_file_path).resolve().parent
    _tree.cache_clear()
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    readme = ROOT / "README.md"
    if files.get_file_from_path("index.md") is None and readme.exists():
        files.append(File.generated(config, "index.md", content=readme_as_index(readme.read_text(encoding="utf-8"))))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    where = "README.md" if page.file.src_uri == "index.md" else f"docs/{page.file.src_uri}"
    for problem in check(MARKER.sub("", markdown), where):
        log.warning(problem)

    def generate(m: re.Match) -> str:
        name = m.group(1)
        if name not in GENERATORS:
            log.warning("%s: unknown generated section %r (known: %s)", where, name, ", ".join(GENERATORS))
            return ""
        return GENERATORS[name]()

    return MARKER.sub(generate, markdown)
