"""`esc-eval docs`: the documentation site (mkdocs; docs/ and mkdocs.yml of the checkout), built
into a folder that opens without a server, or served locally while its pages are edited."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from esc_eval.cli.common import local_out

# cli/ops/docs.py -> the checkout's root, where mkdocs.yml is (an editable install runs from it).
MKDOCS_YML = Path(__file__).resolve().parents[2] / "mkdocs.yml"


def _mkdocs(*args: str) -> list[str]:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        raise ValueError("mkdocs and mkdocs-material are not installed: they come with the dev extra "
                         "(pip install -e '.[dev]', or bash cluster/local/bootstrap.sh esc-eval docs)")
    if not MKDOCS_YML.exists():
        raise FileNotFoundError(f"{MKDOCS_YML}: not found; the site is built from a checkout of the repository "
                                "(installed from it with pip install -e)")
    return [sys.executable, "-m", "mkdocs", *args, "--config-file", str(MKDOCS_YML)]


def docs(
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Folder to write the site into (its index.html opens in a browser without a server).")] = Path("site"),
    serve: Annotated[bool, typer.Option("--serve", help="Serve the site on HOST:PORT instead, rebuilt as pages change (mkdocs serve); Ctrl-C stops.")] = False,
    host: Annotated[str, typer.Option("--host", help="Address to serve on (with --serve).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to serve on (with --serve).")] = 8000,
    strict: Annotated[bool, typer.Option("--strict/--no-strict", help="Fail on a broken link, a missing page, a path not in the repository or a command the CLI does not have (as CI does).")] = True,
) -> None:
    """Build the documentation site into a folder, or serve it locally (--serve)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    if serve:
        cmd = _mkdocs("serve", "--dev-addr", f"{host}:{port}", *(["--strict"] if strict else []))
        typer.echo(f"serving the documentation at http://{host}:{port}/ (Ctrl-C stops)")
        sys.stdout.flush()
        os.execve(cmd[0], cmd, env)  # mkdocs serve in this process: a signal to it is a signal to the server
    site = out.expanduser().resolve()
    code = subprocess.call(_mkdocs("build", "--site-dir", str(site), *(["--strict"] if strict else [])), env=env)
    if code:
        typer.echo("error: the documentation site did not build (the lines above say why)", err=True)
        raise typer.Exit(code)
    typer.echo(f"wrote the documentation site to {site}: open {site / 'index.html'}")
