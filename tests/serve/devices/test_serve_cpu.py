"""ISA-aware dtype: CPU flags from (faked) /proc/cpuinfo, best_dtype, the dtype option and the
one-line error when an engine refuses a dtype."""
from __future__ import annotations

import pytest

from esc_eval.serve.devices import cpu
from esc_eval.serve.devices.cpu import DtypeError, best_dtype, check_dtype_option, cpu_info, resolve_dtype

EPYC_AVX2 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c avx2 bmi2
"""
XEON_AMX = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw avx512vl avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8
"""
AVX512_NO_BF16 = """model name\t: Intel(R) Xeon(R) Gold 6148
flags\t\t: avx avx2 avx512f avx512bw avx512vl avx512_vnni
"""
ARM_BF16 = """processor\t: 0
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics sve bf16
"""


@pytest.mark.parametrize("text, isa, native, dtype", [
    (EPYC_AVX2, "avx2", False, "float32"),
    (XEON_AMX, "amx", True, "bfloat16"),
    (AVX512_NO_BF16, "avx512", False, "float32"),
    (ARM_BF16, "sve", False, "float32"),  # ARM bf16 is not in BF16_FLAGS: stay on the safe side
])
def test_flags_decide_the_dtype(text, isa, native, dtype):
    info = cpu_info(text, torch_capability="AVX2", cores=2)
    assert info.isa == isa and info.native_bf16 is native and best_dtype(info) == dtype
    assert info.cores == 2


@pytest.mark.parametrize("text, block", [(EPYC_AVX2, 32), (AVX512_NO_BF16, 32), (XEON_AMX, None)])
def test_kv_block_size_is_small_without_amx(text, block):
    from esc_eval.serve.devices.cpu import kv_block_size

    assert kv_block_size(cpu_info(text, cores=2)) == block  # None: vLLM's own default (128 on CPU)


def test_avx512_bf16_alone_is_enough():
    info = cpu_info("model name: X\nflags: avx2 avx512f avx512_bf16\n", cores=4)
    assert info.native_bf16 and best_dtype(info) == "bfloat16" and info.isa == "avx512_bf16"


def test_model_name_and_reported_flags():
    info = cpu_info(XEON_AMX, torch_capability="AVX512", cores=8)
    assert info.model.startswith("Intel(R) Xeon(R) Platinum 8481C")
    assert {"avx512f", "avx512_bf16", "amx_bf16"} <= set(info.flags) and "fpu" not in info.flags
    d = info.as_dict()
    assert d["isa"] == "amx" and d["native_bf16"] is True and d["torch_capability"] == "AVX512"
    assert "8 cores" in info.describe() and "torch AVX512" in info.describe()


def test_this_machine_is_described():
    info = cpu_info()
    assert info.cores >= 1 and info.model
    assert best_dtype(info) in ("float32", "bfloat16")
    summary = cpu.runtime_summary("float32")
    assert summary["dtype"] == "float32" and summary["best_dtype"] == best_dtype(info)
    assert summary["cores"] == info.cores and summary["isa"] == info.isa


@pytest.mark.parametrize("value, expected", [(None, "auto"), ("auto", "auto"), ("bf16", "bfloat16"),
                                             ("FP32", "float32"), ("float16", "float16")])
def test_dtype_option_values(value, expected):
    assert check_dtype_option(value) == expected


def test_unknown_dtype_is_one_line():
    with pytest.raises(DtypeError) as e:
        check_dtype_option("int4", where="execution.dtype")
    msg = str(e.value)
    assert "\n" not in msg and "execution.dtype" in msg and "'int4'" in msg and "float32" in msg


def test_resolve_dtype_order(monkeypatch):
    avx2 = cpu_info(EPYC_AVX2, cores=2)
    amx = cpu_info(XEON_AMX, cores=2)
    monkeypatch.delenv(cpu.DTYPE_ENV, raising=False)
    assert resolve_dtype("auto", info=avx2) == "float32"
    assert resolve_dtype(None, info=amx) == "bfloat16"
    assert resolve_dtype("auto", gpu=True, info=avx2) == "bfloat16"
    assert resolve_dtype("bfloat16", info=avx2) == "bfloat16"  # explicit wins (slow, but allowed)
    monkeypatch.setenv(cpu.DTYPE_ENV, "bfloat16")  # what ExecutionConfig.dtype sets in workers
    assert resolve_dtype("auto", info=avx2) == "bfloat16"
    assert resolve_dtype("float32", info=amx) == "float32"  # an engine option still wins over the env
    monkeypatch.setenv(cpu.DTYPE_ENV, "nonsense")
    with pytest.raises(DtypeError, match=cpu.DTYPE_ENV):
        resolve_dtype("auto", info=avx2)


def test_refused_message_names_option_and_capability():
    info = cpu_info(EPYC_AVX2, torch_capability="AVX2", cores=2)
    msg = cpu.refused_dtype_message("bfloat16", RuntimeError("bfloat16 is not supported\nmore detail"), info)
    assert "\n" not in msg
    assert "dtype" in msg and "bfloat16" in msg and "AMD EPYC" in msg and "avx2" in msg and "torch AVX2" in msg
    assert "float32" in msg and "bfloat16 is not supported" in msg and "more detail" not in msg


def _host(engine_kwargs):
    from esc_eval.serve.backends.vllm_engine import _EngineHost

    return _EngineHost("/models/fake", {}, engine_kwargs)


def test_engine_gets_the_resolved_dtype(monkeypatch, fake_vllm):
    seen: dict = {}
    fake_vllm(None, seen)
    monkeypatch.delenv(cpu.DTYPE_ENV, raising=False)
    host = _host({})
    try:
        host._start_sync()
        assert seen["dtype"] == best_dtype() == host.dtype
        monkeypatch.setenv(cpu.DTYPE_ENV, "bfloat16")
        host._start_sync()
        assert seen["dtype"] == "bfloat16"
    finally:
        host.shutdown()


def test_engine_refusing_a_dtype_gives_one_line(monkeypatch, fake_vllm):
    from esc_eval.serve.chat.interface import EngineStartError

    seen: dict = {}
    fake_vllm(ValueError("torch.bfloat16 is not supported for the current CPU\n(traceback)"), seen)
    host = _host({"dtype": "bfloat16"})
    try:
        with pytest.raises(EngineStartError) as e:
            host._start_sync()
    finally:
        host.shutdown()
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("the vLLM engine for /models/fake did not start: dtype")
    assert "= bfloat16" in msg and cpu_info().describe() in msg


def test_engine_other_failures_name_their_cause_in_one_line(monkeypatch, fake_vllm):
    from esc_eval.serve.chat.interface import EngineStartError, RunStopError

    fake_vllm(RuntimeError("out of memory for KV cache\nmore detail"), {})
    host = _host({})
    try:
        with pytest.raises(EngineStartError, match=r"^the vLLM engine for /models/fake did not start: "
                                                   r"RuntimeError: out of memory for KV cache$") as e:
            host._start_sync()
    finally:
        host.shutdown()
    assert isinstance(e.value, RunStopError)  # a failure of the run, not of an item


def test_engine_unknown_dtype_option(monkeypatch, fake_vllm):
    from esc_eval.serve.chat.interface import EngineStartError

    fake_vllm(None, {})
    host = _host({"dtype": "int3"})
    try:
        with pytest.raises(EngineStartError, match="did not start: .*unknown dtype 'int3'"):
            host._start_sync()
    finally:
        host.shutdown()



@pytest.mark.slow
def test_real_engine_loads_the_cpus_best_dtype(embedded_model, monkeypatch):
    monkeypatch.delenv(cpu.DTYPE_ENV, raising=False)
    assert embedded_model.host.dtype == best_dtype()
    assert str(embedded_model.host.engine.vllm_config.model_config.dtype) == f"torch.{best_dtype()}"


@pytest.mark.slow
def test_real_engine_gets_the_cpus_kv_block_size(embedded_model):
    from esc_eval.serve.devices.cpu import kv_block_size

    want = kv_block_size()
    assert embedded_model.host.block_size == want
    if want is not None:  # vLLM took it (its CPU default would be 128)
        assert embedded_model.host.engine.vllm_config.cache_config.block_size == want
