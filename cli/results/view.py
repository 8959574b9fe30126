"""`esc-eval view RUN [RUN ...]`: browse every dialogue of run folders in a local web page."""
from __future__ import annotations

from typing import Annotated

import typer


def view(
    run_dirs: Annotated[list[str], typer.Argument(help="Run folders or storage URIs to browse (their dialogues/ and scores/ parts).")],
    port: Annotated[int, typer.Option("--port", "-p", help="Port to listen on (0 = any free port).")] = 8765,
    host: Annotated[str, typer.Option("--host", help="Address to bind; the default keeps the viewer local.")] = "127.0.0.1",
) -> None:
    """A local web page over the runs: filter, full-text search, each dialogue's scores and raw judge answers, side by side."""
    from esc_eval.analysis.web.viewer_server import serve_viewer

    serve_viewer(run_dirs, host, port)
