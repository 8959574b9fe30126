"""The documentation site of the checkout (docs/ and mkdocs.yml beside this package's folder), built
by mkdocs into a folder that opens without a server, or served while its pages are edited: what
`esc-eval docs` runs. It lives here, beside the checkout's other files, because the site is the
checkout's, not the installed library's: an editable install runs from the checkout."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

# cluster/documentation.py -> the checkout's root, where mkdocs.yml is.
MKDOCS_YML = Path(__file__).resolve().parents[1] / "mkdocs.yml"
# Where `--serve` listens unless told: mkdocs serve's own defaults (loopback: the preview is for the one editing).
DOCS_HOST = "127.0.0.1"
DOCS_PORT = 8000


def _mkdocs(*args: str) -> list[str]:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        raise ValueError("mkdocs and mkdocs-material are not installed: they come with the dev extra "
                         "(pip install -e '.[dev]', or bash cluster/local/bootstrap.sh esc-eval docs)")
    if not MKDOCS_YML.exists():
        raise FileNotFoundError(f"{MKDOCS_YML}: not found; the site is built from a checkout of the repository "
                                "(installed from it with pip install -e)")
    return [sys.executable, "-m", "mkdocs", *args, "--config-file", str(MKDOCS_YML)]


def docs_site(out: Path, serve: bool = False, host: str = DOCS_HOST, port: int = DOCS_PORT, strict: bool = True) -> int:
    """Build the site into `out` and return mkdocs' exit status (0: built), or, with `serve`, replace
    this process by `mkdocs serve` on host:port (a signal to it is a signal to the server)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    flags = ["--strict"] if strict else []
    if serve:
        cmd = _mkdocs("serve", "--dev-addr", f"{host}:{port}", *flags)
        print(f"serving the documentation at http://{host}:{port}/ (Ctrl-C stops)", flush=True)
        os.execve(cmd[0], cmd, env)
    site = out.expanduser().resolve()
    code = subprocess.call(_mkdocs("build", "--site-dir", str(site), *flags), env=env)
    if code:
        print("error: the documentation site did not build (the lines above say why)", file=sys.stderr)
    else:
        print(f"wrote the documentation site to {site}: open {site / 'index.html'}")
    return code


__all__ = ["MKDOCS_YML", "docs_site"]
