"""bench decode: the prompts it builds, its option checks, and (slow) one small run on the real engine."""
import json

import pytest
from typer.testing import CliRunner

from esc_eval.sim.bench.loops.decode import prompt_ids


def test_prompts_have_the_context_length_and_share_no_first_token():
    prompts = prompt_ids(list(range(5000, 5300)), streams=40, context=700)  # the source repeats to fill them
    assert len(prompts) == 40 and {len(p) for p in prompts} == {700}
    assert len({p[0] for p in prompts}) == 40
    assert len({tuple(p[1:]) for p in prompts}) == 40


def test_prompts_refuse_what_they_cannot_build():
    with pytest.raises(ValueError, match="no tokens"):
        prompt_ids([], 2, 8)
    with pytest.raises(ValueError, match="context >= 2"):
        prompt_ids([1, 2], 2, 1)


@pytest.mark.parametrize("contexts", ["64,abc", "1", ""])
def test_cli_refuses_bad_contexts(contexts):
    from esc_eval.cli.app import app

    res = CliRunner().invoke(app, ["bench", "decode", "--contexts", contexts])
    assert res.exit_code == 2 and "--contexts" in res.output


@pytest.mark.slow
def test_bench_decode_on_the_embedded_model(tmp_path, monkeypatch):
    import os

    from esc_eval.sim.bench.loops.decode import bench_decode

    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "3")  # this process's own, other than the bench's 1 GiB

    result = bench_decode(contexts=(48, 16), streams=2, new_tokens=4, compiled=False, kv_cache_gb=1, target=20.0)
    assert [r["context_tokens"] for r in result["contexts"]] == [16, 48]  # sorted
    for row in result["contexts"]:
        assert row["generated_tokens"] == 2 * 4  # ignore_eos: every stream decodes to the cap
        assert row["decode_tokens_per_s"] > 0 and row["reference_tokens_per_s"] > 0 and row["prefill_tokens_per_s"] > 0
        assert row["ratio_one_engine"] == pytest.approx(row["decode_tokens_per_s"] / row["reference_tokens_per_s"], rel=0.02)
    best = max(r["ratio_one_engine"] for r in result["contexts"])
    assert result["speedup_bound"] == pytest.approx((os.cpu_count() or 1) * best, rel=0.01)
    assert result["target_reachable"] == (result["speedup_bound"] >= 20.0)
    assert result["machine"]["dtype"] == result["engine"]["dtype"] == result["reference"]["dtype"]
    from esc_eval.serve.devices.cpu import kv_block_size

    assert result["engine"]["kv_block_size"] == (kv_block_size() or "vLLM's default")
    assert os.environ.get("VLLM_CPU_KVCACHE_SPACE") == "3"  # the bench's settings do not leak
    json.dumps(result)
