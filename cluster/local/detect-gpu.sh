# Sourced by bootstrap.sh (and by tests/cluster/local/test_bootstrap_detect.py): which build this machine
# gets, chosen before anything is installed. GPUs are found the way serve/devices/gpus.py finds them,
# the first source that answers wins:
#   1. the NVML library (libnvidia-ml.so.1, called through ctypes: pynvml is not installed yet);
#   2. nvidia-smi with gpus.py's query;
#   3. the driver's folders under /proc/driver/nvidia/gpus.
# CUDA_VISIBLE_DEVICES as CUDA reads it: unset = every GPU; set but empty, or a first entry that names
# no GPU (e.g. -1), = none. ESC_EVAL_EXTRA (cpu or gpu) wins over what is found.
# Test hooks: ESC_EVAL_NVML_LIB (the library's name), ESC_EVAL_NVIDIA_PROC (the /proc folder).
#
#   esc_eval_choose_build    -> ESC_EVAL_BUILD=cpu|gpu and ESC_EVAL_BUILD_WHY="<one line>"

# "<count>|<first GPU's name>" from NVML; nothing when the library is missing or has no driver.
_esc_eval_gpus_nvml() {
  local py="${PYTHON:-python3}"
  command -v "$py" >/dev/null 2>&1 || py=python3
  "$py" - "${ESC_EVAL_NVML_LIB:-libnvidia-ml.so.1}" 2>/dev/null <<'EOF' || true
import ctypes, sys
try:
    nvml = ctypes.CDLL(sys.argv[1])
    if nvml.nvmlInit_v2() != 0:
        raise SystemExit
    count, name, handle = ctypes.c_uint(0), ctypes.create_string_buffer(96), ctypes.c_void_p()
    if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0 and count.value:
        nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle))
        nvml.nvmlDeviceGetName(handle, name, 96)
        print(f"{count.value}|{name.value.decode(errors='replace')}")
    nvml.nvmlShutdown()
except OSError:
    pass
EOF
}

# "<count>|<first GPU's name>" from nvidia-smi (gpus.py's query); nothing when it is absent or fails.
_esc_eval_gpus_smi() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  local out
  out="$(nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader,nounits 2>/dev/null)" || return 0
  out="$(printf '%s\n' "$out" | grep -E '^[0-9]+,' || true)"
  [ -n "$out" ] || return 0
  printf '%s|%s\n' "$(printf '%s\n' "$out" | wc -l | tr -d ' ')" "$(printf '%s\n' "$out" | head -n1 | cut -d, -f3 | sed 's/^ *//;s/ *$//')"
}

# "<count>|<first GPU's model>" from the driver's /proc folders; nothing without them.
_esc_eval_gpus_driver() {
  local proc="${ESC_EVAL_NVIDIA_PROC:-/proc/driver/nvidia/gpus}" n=0 name="" d
  [ -d "$proc" ] || return 0
  for d in "$proc"/*/; do
    [ -d "$d" ] || continue
    n=$((n + 1))
    [ -n "$name" ] || name="$(sed -n 's/^Model:[[:space:]]*//p' "$d/information" 2>/dev/null | head -n1)"
  done
  [ "$n" -gt 0 ] && printf '%s|%s\n' "$n" "${name:-NVIDIA GPU}"
  return 0
}

# GPUs CUDA_VISIBLE_DEVICES leaves of <count> found: entries in order, up to the first naming none.
_esc_eval_visible() {
  local count="$1" kept=0 entry
  [ "${CUDA_VISIBLE_DEVICES+set}" = set ] || { echo "$count"; return; }
  local IFS=,
  for entry in $CUDA_VISIBLE_DEVICES; do
    entry="$(printf '%s' "$entry" | tr -d ' ')"
    case "$entry" in
      GPU-*|MIG-*) ;;  # a UUID: taken as naming one of them (gpus.py checks it against the list)
      ''|*[!0-9]*) break ;;  # empty, -1, anything else: CUDA stops here
      *) [ "$entry" -lt "$count" ] || break ;;
    esac
    kept=$((kept + 1))
  done
  [ "$kept" -le "$count" ] || kept="$count"
  echo "$kept"
}

esc_eval_choose_build() {
  local found="" source="" f count name visible
  ESC_EVAL_GPUS_HIDDEN=0  # 1: GPUs are there, CUDA_VISIBLE_DEVICES hides them all
  for source in NVML nvidia-smi /proc/driver/nvidia/gpus; do
    case "$source" in
      NVML) found="$(_esc_eval_gpus_nvml)" ;;
      nvidia-smi) found="$(_esc_eval_gpus_smi)" ;;
      *) found="$(_esc_eval_gpus_driver)" ;;
    esac
    [ -z "$found" ] || break
  done
  if [ -n "${ESC_EVAL_EXTRA:-}" ]; then
    ESC_EVAL_BUILD="$ESC_EVAL_EXTRA"
    if [ -n "$found" ]; then f="${found%%|*} x ${found#*|} found by $source"; else f="no GPU found"; fi
    ESC_EVAL_BUILD_WHY="ESC_EVAL_EXTRA=$ESC_EVAL_EXTRA set ($f)"
    return 0
  fi
  if [ -z "$found" ]; then
    ESC_EVAL_BUILD=cpu
    ESC_EVAL_BUILD_WHY="no NVIDIA GPU found (NVML, nvidia-smi, /proc/driver/nvidia/gpus); ESC_EVAL_EXTRA=gpu forces the GPU build"
    return 0
  fi
  count="${found%%|*}" name="${found#*|}"
  visible="$(_esc_eval_visible "$count")"
  if [ "$visible" -eq 0 ]; then
    ESC_EVAL_BUILD=cpu ESC_EVAL_GPUS_HIDDEN=1
    ESC_EVAL_BUILD_WHY="CUDA_VISIBLE_DEVICES='${CUDA_VISIBLE_DEVICES}' hides the $count GPU(s) $source found ($name); unset it, or ESC_EVAL_EXTRA=gpu, for the GPU build"
  else
    ESC_EVAL_BUILD=gpu
    ESC_EVAL_BUILD_WHY="$visible x $name found by $source${CUDA_VISIBLE_DEVICES+ (CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES')}; ESC_EVAL_EXTRA=cpu forces the CPU build"
  fi
}
