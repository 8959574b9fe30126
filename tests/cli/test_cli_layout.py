"""The package layout: one import namespace, a statically composed CLI, the layer contract."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import click
import typer.main

REPO = Path(__file__).resolve().parents[2]


def test_one_import_namespace_from_any_folder(tmp_path):
    code = ("import importlib\n"
            "for m in ('esc_eval.serve', 'esc_eval.sim', 'esc_eval.train', 'esc_eval.analysis', 'esc_eval.cli', "
            "'esc_eval.cluster', 'esc_eval.sim.bench', 'esc_eval.sim.cardbuild', 'esc_eval.sim.cards', "
            "'esc_eval.sim.dialogue', 'esc_eval.sim.judging', 'esc_eval.sim.runs', 'esc_eval.sim.pool', "
            "'esc_eval.sim.jobs'):\n"
            "    importlib.import_module(m)\n"
            "for bare in ('serve', 'sim', 'train', 'analysis', 'cluster', 'cli'):\n"
            "    try:\n"
            "        importlib.import_module(bare)\n"
            "    except ImportError:\n"
            "        continue\n"
            "    raise SystemExit(f'a generic top-level module {bare!r} is importable')\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_every_python_folder_is_a_mapped_package():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {str(p.parent.relative_to(REPO)) for p in REPO.glob("*/**/__init__.py")
               if not any(part.startswith(".") or part == "tests" for part in p.relative_to(REPO).parts)}
    folders |= {p.parent.name for p in REPO.glob("*/__init__.py")}
    mapped = set(cfg["package-dir"].values())
    assert folders == mapped, f"unmapped: {folders - mapped}; stale: {mapped - folders}"
    assert set(cfg["packages"]) == set(cfg["package-dir"])


def _commands(group, prefix: str = "") -> list[str]:
    ctx = type(group).context_class(group) if hasattr(group, "context_class") else click.Context(group)
    out = []
    for name in group.list_commands(ctx):
        out.append(prefix + name)
        cmd = group.get_command(ctx, name)
        if hasattr(cmd, "list_commands"):  # a group (typer vendors its own click)
            out += _commands(cmd, prefix + name + " ")
    return out


def test_cli_composes_every_group_statically_and_once():
    from esc_eval.cli.app import app

    names = _commands(typer.main.get_command(app))
    assert len(names) == len(set(names))
    expected = {"demo", "simulate", "score", "report", "leaderboard", "cards validate", "cards build", "cards stats",
                "cards export", "serve up", "serve status", "serve down", "serve write-config", "train role",
                "train rank", "bench sim", "bench score", "bench serve", "analysis compare",
                "analysis judge-accuracy", "analysis annotate-export", "analysis annotate-agreement",
                "analysis roleplay-fidelity", "analysis calibration", "bench trust", "annotate serve", "annotate study", "annotate export", "annotate import"}
    assert expected <= set(names), expected - set(names)


def test_serve_write_config_writes_a_serve_deploy_file(tmp_path):
    import yaml
    from typer.testing import CliRunner

    from esc_eval.cli.app import app

    out = tmp_path / "serve.yaml"
    res = CliRunner().invoke(app, ["serve", "write-config", "--model", "embedded", "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load(out.read_text())
    assert doc["applications"][0]["import_path"] == "ray.serve.llm:build_openai_app"


def test_layer_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout or "broken" not in proc.stdout.split("Contracts:")[-1].split("\n")[0]
