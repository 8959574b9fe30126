#!/usr/bin/env bash
# The GPU install, resolved for Linux x86-64 from package metadata only (nothing is installed, no
# GPU needed): pyproject's dependencies plus the `gpu` extra (CUDA vLLM) under its torch and
# transformers pins. Dockerfile.cuda installs exactly this set (requirements-gpu.txt).
#   bash cluster/local/bootstrap.sh bash cluster/docker/resolve-gpu.sh          # CI: still resolves, to the same set
#   bash cluster/local/bootstrap.sh bash cluster/docker/resolve-gpu.sh --write  # after changing a pin
# uv prefers the versions already in the lock, so a new release of an unpinned dependency does not
# change the check's answer; a pin that no longer resolves (or a yanked version) does.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
lock=cluster/docker/requirements-gpu.txt
fresh="$(mktemp)"
trap 'rm -f "$fresh"' EXIT
[ -f "$lock" ] && cp "$lock" "$fresh"
uv pip compile pyproject.toml --extra gpu --python-platform x86_64-manylinux_2_28 --python-version 3.11 \
  --custom-compile-command "bash cluster/docker/resolve-gpu.sh --write" --quiet -o "$fresh"
if [ "${1:-}" = "--write" ]; then
  cp "$fresh" "$lock"
  echo "wrote $lock ($(grep -c '==' "$lock") packages)"
elif ! diff -u "$lock" "$fresh"; then
  echo "error: the gpu extra no longer resolves to $lock; regenerate it with: bash cluster/docker/resolve-gpu.sh --write" >&2
  exit 1
else
  echo "gpu extra resolves to $lock ($(grep -c '==' "$lock") packages) for x86_64-manylinux_2_28, Python 3.11"
fi
