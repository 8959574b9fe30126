"""The documentation site: it builds with --strict (as CI builds it), and a broken link, a path that
is not in the repository or a command the CLI does not have fails the build."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "docs" / "hooks"))


def test_the_site_builds_strictly_through_esc_eval_docs(tmp_path):
    from typer.testing import CliRunner

    from esc_eval.cli.app import app
    from docgen_cli import command_names

    site = tmp_path / "site"
    res = CliRunner().invoke(app, ["docs", "--out", str(site)])
    assert res.exit_code == 0, res.output
    assert f"open {site / 'index.html'}" in res.output
    index = (site / "index.html").read_text()
    assert 'id="two-commands"' in index and 'href="guides/first-run.html"' in index  # README.md, its links rewritten
    cli_page = (site / "reference" / "cli.html").read_text()
    for name in command_names(app):  # every command of `esc-eval --help`'s tree, each with its own section
        anchor = name.removeprefix("esc-eval ").replace(" ", "-")
        assert f'id="{anchor}"' in cli_page, name
    assert 'id="simulationconfig"' in (site / "reference" / "config.html").read_text()
    assert "dialogue_id" in (site / "reference" / "run-folder-schema.html").read_text()


def _build(docs_dir: Path, site: Path) -> None:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    build(load_config(str(REPO / "mkdocs.yml"), docs_dir=str(docs_dir), site_dir=str(site), strict=True))


BROKEN = [
    ("See [the guide](guides/no-such-page.md).", "no-such-page.md"),
    ("See [trust](guides/trust.md#no-such-anchor).", "no-such-anchor"),
    ("The rows are in `sim/runs/no_such_module.py`.", "sim/runs/no_such_module.py"),
    ("Run `esc-eval simulate --no-such-option 3`.", "--no-such-option"),
]


def test_each_kind_of_broken_page_fails_the_strict_build(tmp_path, caplog):
    """A broken link, anchor, path and command line, each on a page of one build (a build per kind took
    10 s each): the strict build aborts and names every one of them."""
    from mkdocs.exceptions import Abort

    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs, ignore=shutil.ignore_patterns("hooks", "__pycache__"))
    page = docs / "paper-notes.md"
    page.write_text(page.read_text() + "\n" + "\n\n".join(bad for bad, _ in BROKEN) + "\n")
    with pytest.raises(Abort):
        _build(docs, tmp_path / "site")
    assert [why for _, why in BROKEN if why not in caplog.text] == []
