"""uv's flags for this machine's pip settings, for cluster/local/bootstrap.sh.

uv reads no pip.conf and no PIP_* variables, so a machine whose pip is pointed at an index mirror,
a folder of local wheels or a constraint file (as our CI machines are) would resolve elsewhere under
uv than under pip. This prints the same settings as uv options, shell-quoted:
    python uv_flags.py        ->  --find-links /opt/wheels --extra-index-url file:///... --constraint ...
    python uv_flags.py cert   ->  pip's CA bundle (for SSL_CERT_FILE), or nothing
Read from `pip config list` (files and PIP_* alike): pip's own reading of its settings, not ours.
"""
from __future__ import annotations

import shlex
import subprocess
import sys

OPTIONS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
           "constraint": "--constraint"}


def pip_settings() -> list[tuple[str, str]]:
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    settings = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        settings.append((key.rsplit(".", 1)[-1], value.strip().strip("'\"")))
    return settings


def uv_flags(settings: list[tuple[str, str]]) -> list[str]:
    pairs: list[tuple[str, str]] = []
    for name, value in settings:
        for item in value.split() if name in OPTIONS else []:
            if (OPTIONS[name], item) not in pairs:  # a setting given in a file and in PIP_* once
                pairs.append((OPTIONS[name], item))
    return [part for pair in pairs for part in pair]


if __name__ == "__main__":
    settings = pip_settings()
    if sys.argv[1:] == ["cert"]:
        print(next((value for name, value in settings if name == "cert"), ""))
    else:
        print(shlex.join(uv_flags(settings)))
