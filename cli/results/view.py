"""`esc-eval view RUN [RUN ...]`: browse every dialogue of run folders in a local web page."""
from __future__ import annotations

import signal
import time
from typing import Annotated

import typer


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def view(
    run_dirs: Annotated[list[str], typer.Argument(help="Run folders or storage URIs to browse (their dialogues/ and scores/ parts).")],
    port: Annotated[int, typer.Option("--port", "-p", help="Port to listen on (0 = any free port).")] = 8765,
    host: Annotated[str, typer.Option("--host", help="Address to bind; the default keeps the viewer local.")] = "127.0.0.1",
) -> None:
    """A local web page over the runs: filter, full-text search, each dialogue's scores and raw judge answers, side by side."""
    from esc_eval.analysis.web.viewer import ResultsViewer
    from esc_eval.analysis.web.viewer_server import make_server
    from esc_eval.sim.driver.progress import console

    t0 = time.perf_counter()
    viewer = ResultsViewer(run_dirs)
    server = make_server(viewer, host, port)
    bound_host, bound_port = server.server_address[:2]
    console.print(f"{len(viewer.index)} dialogues from {len(run_dirs)} run(s) indexed in "
                  f"{time.perf_counter() - t0:.2f} s; serving http://{bound_host}:{bound_port}/ (Ctrl-C stops)")
    serve_until_stopped(server)


def serve_until_stopped(server) -> None:
    """Serve until Ctrl-C or a plain kill, which stop it cleanly even when started with SIGINT
    ignored (a background job)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
