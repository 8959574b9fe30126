"""`esc-eval docs`: the documentation site (mkdocs; docs/ and mkdocs.yml of the checkout), built
into a folder that opens without a server, or served locally while its pages are edited."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from esc_eval.cli.common import local_out
from esc_eval.cluster.documentation import DOCS_HOST, DOCS_PORT, docs_site


def docs(
    out: Annotated[Path, typer.Option("--out", "-o", callback=local_out, help="Folder to write the site into (its index.html opens in a browser without a server).")] = Path("site"),
    serve: Annotated[bool, typer.Option("--serve", help="Serve the site on HOST:PORT instead, rebuilt as pages change (mkdocs serve); Ctrl-C stops.")] = False,
    host: Annotated[str, typer.Option("--host", help="Address to serve on (with --serve).")] = DOCS_HOST,
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port to serve on (with --serve).")] = DOCS_PORT,
    strict: Annotated[bool, typer.Option("--strict/--no-strict", help="Fail on a broken link, a missing page, a path not in the repository or a command the CLI does not have (as CI does).")] = True,
) -> None:
    """Build the documentation site into a folder, or serve it locally (--serve)."""
    raise typer.Exit(docs_site(out, serve, host, port, strict))
