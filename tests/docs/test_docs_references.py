"""The references are generated from the code: a renamed option, a changed field description or a
new column shows up in them, and the checks of hand-written pages follow the CLI as it is."""
from __future__ import annotations

import importlib.util
import typing
import sys
from pathlib import Path

import pytest
import typer

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "docs" / "hooks"))

import docgen_checks  # noqa: E402
import docgen_cli  # noqa: E402
import docgen_config  # noqa: E402
import docgen_layout  # noqa: E402
import docgen_schema  # noqa: E402
from docgen_text import cell  # noqa: E402


def _section(page: str, heading: str) -> str:
    """The text of one command's section of the CLI reference."""
    start = page.index(heading)
    nxt = [i for i in (page.find("\n## ", start + 1), page.find("\n### ", start + 1)) if i != -1]
    return page[start:min(nxt)] if nxt else page[start:]


def _small_app(option: str) -> typer.Typer:
    app = typer.Typer()

    @app.command()
    def run(count: int = typer.Option(3, option, "-n", help="How many dialogues to run.")) -> None:
        """Run some dialogues."""

    @app.command()
    def other() -> None:
        """Something else."""

    return app


def test_a_renamed_option_of_a_small_app_shows_up_renamed():
    before = docgen_cli.render_cli(_small_app("--old-name"), prog="tool")
    after = docgen_cli.render_cli(_small_app("--new-name"), prog="tool")
    assert "`--old-name`" in before and "`--new-name`" not in before
    assert "`--new-name`" in after and "`--old-name`" not in after
    run = _section(after, "## tool run")
    assert "How many dialogues to run." in run and "`3`" in run and "`-n`" in run
    assert "Run some dialogues." in run


def test_a_renamed_option_of_the_real_cli_shows_up_renamed(monkeypatch):
    from esc_eval.cli.results import report as report_cli
    from esc_eval.cli.app import app

    hints = typing.get_type_hints(report_cli.report, include_extras=True)
    info = next(m for m in hints["n_boot"].__metadata__ if hasattr(m, "param_decls"))  # the typer.Option
    assert "--n-boot" in docgen_cli.render_cli(app).split("## esc-eval report {")[1].split("\n## ")[0]
    # rename it as an edit of cli/results/report.py would (typer keeps an Annotated option's name as its `default`)
    if isinstance(info.default, str) and info.default.startswith("-"):
        monkeypatch.setattr(info, "default", "--bootstrap-resamples")
    else:
        monkeypatch.setattr(info, "param_decls", ("--bootstrap-resamples",))
    section = _section(docgen_cli.render_cli(app), "## esc-eval report {")
    assert "`--bootstrap-resamples`" in section
    assert "--n-boot" not in section
    # ... and a hand-written page that still shows the old name fails the docs' check
    problems = docgen_checks.CommandTree(app).problems("esc-eval report runs/a --n-boot 100")
    assert problems == ["esc-eval report: unknown option --n-boot"]


def test_every_command_and_option_of_the_cli_is_in_the_reference():
    from esc_eval.cli.app import app

    page = docgen_cli.render_cli(app)
    root = docgen_cli.command_of(app)
    for path, cmd, _ in docgen_cli.walk(root, "esc-eval"):
        section = _section(page, f"## {path} {{") if " " not in path else _section(page, f" {path} {{")
        for param in cmd.params:
            if getattr(param, "hidden", False):
                continue
            names = [param.name.upper()] if docgen_cli._is_argument(param) else param.opts
            for name in names:
                assert f"`{name}`" in section, (path, name)
            if getattr(param, "help", None):
                assert cell(param.help) in section, (path, param.name)


def test_the_reference_shows_one_name_per_command():
    """Renamed commands are in the reference under their new names only (the old ones are hidden aliases)."""
    from esc_eval.cli.app import app

    page = docgen_cli.render_cli(app)
    for new in ("esc-eval analysis compare-models {", "esc-eval annotate sheets {", "esc-eval annotate agreement {"):
        assert page.count(new) == 1, new
    for old in ("esc-eval analysis compare {", "esc-eval analysis annotate-export", "esc-eval analysis annotate-agreement"):
        assert old not in page, old


def test_the_command_checks_follow_the_cli():
    from esc_eval.cli.app import app

    tree = docgen_checks.CommandTree(app)
    assert tree.problems("esc-eval bench serve --base-url URL -m M [-w dialogues|judge] [-c 1,4]") == []
    assert tree.problems("esc-eval --debug cards validate|stats a.json") == []
    assert tree.problems("esc-eval bench nothing") == ["unknown command: esc-eval bench nothing"]
    assert tree.problems("esc-eval view runs/a --colour red") == ["esc-eval view: unknown option --colour"]
    assert tree.problems("esc-eval demo   # then --anything in a comment") == []


def test_paths_that_are_not_in_the_repository_are_found():
    text = ("`sim/runs/records.py`, `serve/<app>`, `tests/sim/<sub-package>/`, `sim/data/prompts/*.yaml`, "
            "`test_cli_layout.py`, `sim/runs/gone.py`, `test_gone.py`, https://example.org/docs/x.md")
    assert docgen_checks.missing_paths(text, REPO) == ["sim/runs/gone.py", "test_gone.py"]


def test_every_config_field_and_its_description_is_in_the_reference(monkeypatch):
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.sim.pool.config import ExecutionConfig

    page = docgen_config.render_config()
    assert cell(SimulationConfig.model_fields["rounds"].description) in page
    roots = [docgen_config.load(f.model) for f in docgen_config.CONFIG_FILES]
    models = docgen_config.walk_models(roots)
    for name in ("ExecutionConfig", "JudgeConfig", "ModelRef", "PlacementConfig", "ModelEntry", "ServeConfig",
                 "RoleJobConfig", "RankJobConfig", "StudyConfig", "PipelineConfig", "ScoringConfig"):
        assert name in {m.__name__ for m in models}, name
    for model in models:
        assert f"### {model.__name__} {{" in page, model
        for field_name, field in model.model_fields.items():
            assert f"`{field.alias or field_name}`" in page, (model, field_name)
            assert cell(field.description or "") in page, (model, field_name)
    # a changed description is what the next build shows
    monkeypatch.setattr(ExecutionConfig.model_fields["workers"], "description", "Worker actors, described anew.")
    assert "Worker actors, described anew." in docgen_config.render_config()


def test_defaults_are_written_as_yaml():
    page = docgen_config.render_config()
    assert "| `rounds` | integer (≥ 1, ≤ 50) | `5` |" in page
    assert "| `targets` | list of [ModelRef](#modelref) | `[{model: vllm/embedded}]` |" in page


def test_the_schema_page_lists_every_column_of_the_run_folder():
    from esc_eval.sim.runs.records import DIALOGUE_SCHEMA, SCORE_SCHEMA, TURN_TYPE

    page = docgen_schema.render_schema()
    for title, schema in (("## Dialogue rows", DIALOGUE_SCHEMA), ("## Score rows", SCORE_SCHEMA)):
        section = page.split(title)[1].split("\n## ")[0]
        for field in schema:
            assert f"| `{field.name}` | " in section, (title, field.name)
    turn = page.split("## Turn")[1]
    for i in range(TURN_TYPE.num_fields):
        assert f"| `{TURN_TYPE.field(i).name}` | " in turn
    assert "| `turns` | list of [Turn](#turn) | yes |" in page
    assert "| `status` | `string` | yes | ok \\| failed |" in page  # the comment in records.py
    assert docgen_schema.stale_notes() == []


def _records_like(tmp_path: Path, columns: str):
    path = tmp_path / "records_like.py"
    path.write_text("import pyarrow as pa\n\nDIALOGUE_SCHEMA = pa.schema(\n    [\n" + columns + "    ]\n)\n"
                    "DIALOGUE_REQUIRED = ('run_id',)\n")
    spec = importlib.util.spec_from_file_location("records_like", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_new_column_shows_up_and_a_removed_one_leaves_no_stale_note(tmp_path):
    module = _records_like(tmp_path, '        ("run_id", pa.string()),\n'
                                     '        ("mood", pa.float32()),  # how the seeker felt at the end\n')
    page = docgen_schema.render_schema(module)
    assert "| `mood` | `float` |  | how the seeker felt at the end |" in page
    assert "| `run_id` | `string` | yes |" in page
    stale = docgen_schema.stale_notes(module)
    assert "DIALOGUE_SCHEMA.dialogue_id" in stale and "DIALOGUE_SCHEMA.run_id" not in stale


def test_the_layout_names_every_package_and_contract():
    import tomllib

    page = docgen_layout.render_layout(REPO)
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]
    for package in cfg["setuptools"]["packages"]:
        assert f" {package} {{" in page, package
    for contract in cfg["importlinter"]["contracts"]:
        assert contract["name"].split(":")[0] in page


def test_esc_eval_docs_says_in_one_line_when_mkdocs_is_missing(monkeypatch):
    from esc_eval.cluster import documentation as site

    monkeypatch.setattr(site.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match=r"^mkdocs and mkdocs-material are not installed: .*dev extra"):
        site.docs_site(Path("unused"))
