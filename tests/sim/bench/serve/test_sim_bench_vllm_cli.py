"""vLLM's own client started as the cross-check starts it (sim/bench/serve/vllm_cli.py) finds vLLM's CPU
platform, so it loads the kernels of the CPU it runs on. On an AVX2-only EPYC the old launcher's
client died with SIGILL: vLLM fell back to its generic platform, whose import_kernels loads vllm._C
(the AVX512-BF16 build). This machine has AVX-512, so the child is told torch found none (what torch
reports on that EPYC) and must then load vllm._C_AVX2, never vllm._C."""
from __future__ import annotations

import json
import subprocess

import pytest

pytest.importorskip("vllm")

# Runs before the launcher in the child: an AVX2-only CPU as torch reports it, and at exit which vLLM
# kernels the process holds (modules and the shared objects mapped) and which platform vLLM chose.
AVX2_ONLY_PROBE = """\
import atexit, json, sys
import torch
torch.cpu._is_avx512_supported = lambda: False
torch.cpu._is_avx512_bf16_supported = lambda: False

def _report():
    import vllm.platforms as p
    maps = {line.split()[-1].rsplit("/", 1)[-1] for line in open("/proc/self/maps") if "/vllm/_C" in line}
    plat = p._current_platform
    sys.__stderr__.write("PROBE " + json.dumps({
        "platform": type(plat).__name__ if plat is not None else None,
        "modules": sorted(m for m in sys.modules if m.startswith("vllm._C")), "shared_objects": sorted(maps)}) + "\\n")

atexit.register(_report)
"""


# A process importing vLLM's CLI: 31 s alone on the AVX2 EPYC, 56 s beside a slow test's engine (over the
# 60 s budget of a fast test scaled to the machine): slow, and beside (light; on the other worker).
@pytest.mark.slow
@pytest.mark.beside
@pytest.mark.light  # no engine, no Ray: starts while the heavy tests run (tests/slow_apart.py)
def test_vllm_client_on_an_avx2_cpu_loads_the_avx2_kernels_not_vllm_C():
    from esc_eval.sim.bench.serve.vllm_cli import vllm_cli

    cmd = vllm_cli(["bench", "serve", "--help"])
    cmd[2] = AVX2_ONLY_PROBE + cmd[2]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-3000:]
    probe = json.loads(next(line for line in run.stderr.splitlines() if line.startswith("PROBE "))[6:])
    # the old launcher: UnspecifiedPlatform, vllm._C (AVX512-BF16) loaded -> SIGILL on AVX2
    assert probe["platform"] in ("CpuPlatform", "ZenCpuPlatform"), probe
    assert "vllm._C" not in probe["modules"] and "_C.abi3.so" not in probe["shared_objects"], probe
    assert "_C_AVX2.abi3.so" in probe["shared_objects"], probe
    assert "usage: vllm bench serve" in run.stdout  # vLLM's own bench serve parser answered
