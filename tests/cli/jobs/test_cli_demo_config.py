"""The demo's defaults: one engine per core, the CPU's dtype, the dialogue-first judge, 8 cards,
two targets that differ (the release's prompt and a curt one) under distinct names."""
from __future__ import annotations

from esc_eval.sim.jobs.demo import DEMO_CARDS, TERSE_PROMPT, TERSE_TARGET, demo_config
from esc_eval.sim.dialogue.targets import target_name
from esc_eval.sim.runs.records import dialogue_id


def test_demo_uses_one_engine_on_every_core_and_the_shared_prefix_judge(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    cfg = demo_config()
    sim, score = cfg.simulation, cfg.scoring
    assert DEMO_CARDS == 4 and sim.limit == 4 and sim.cards == "sample"
    for ex in (sim.execution, score.execution):
        assert ex.workers == 1 and ex.cpu_bind == "all" and ex.dtype == "auto" and ex.num_cpus_per_worker == 2.0
        # every dialogue in flight at once: 4 cards x 2 targets in one chunk, room for all of them
        assert ex.chunk_size == 8 and ex.concurrency >= 8
    assert score.judge.prompt_order == "dialogue_first" and score.judge.method == "logprob"
    assert sim.role.params.max_tokens == 40 and sim.targets[0].params.max_tokens == 48  # 2:45 on 2 AVX2 cores


def test_demo_on_one_core_keeps_vllms_binding(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    ex = demo_config(3).simulation.execution
    assert ex.workers == 1 and ex.cpu_bind == "auto" and ex.chunk_size == 6


def test_demo_has_two_targets_that_differ_with_their_own_dialogue_ids():
    helpful, terse = demo_config().simulation.targets
    # the first is the release's setup, named as before: an existing runs/demo keeps its ids
    assert target_name(helpful) == "vllm/embedded" and helpful.system_prompt is None and helpful.name is None
    assert target_name(terse) == TERSE_TARGET and terse.system_prompt == TERSE_PROMPT and terse.model == helpful.model
    assert terse.params.max_tokens < helpful.params.max_tokens
    ids = {dialogue_id("en-001", target_name(t), "vllm/embedded", "official", 0) for t in (helpful, terse)}
    assert len(ids) == 2


def test_demo_on_a_gpu_node_runs_one_engine_on_one_gpu_in_bf16(fake_gpus, monkeypatch):
    """A GPU node (the shared decision says cuda): one worker holding one GPU, its engine on CUDA in
    bfloat16; two zero-GPU workers would each start an engine on GPU 0 (Ray leaves them every GPU)."""
    from esc_eval.serve.engines.args import detect_device, engine_kwargs

    fake_gpus(("NVIDIA H100 80GB HBM3", 81559))
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    cfg = demo_config()
    for ex in (cfg.simulation.execution, cfg.scoring.execution):
        assert (ex.workers, ex.num_gpus_per_worker, ex.dtype) == (1, 1.0, "auto")
        assert ex.chunk_size == 8 and ex.concurrency >= 8  # every dialogue of the one worker in flight
    device = detect_device()  # what the worker's engine starts on
    assert device.gpu and device.name == "NVIDIA H100 80GB HBM3"
    assert engine_kwargs({}, device)["dtype"] == "bfloat16"


def test_demo_on_a_gpu_node_whose_torch_is_a_cpu_build_stays_on_the_cpu(fake_gpus, monkeypatch):
    fake_gpus(("NVIDIA H100 80GB HBM3", 81559), torch_cuda=None)  # the demo stops on it (preflight) before starting
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    ex = demo_config().simulation.execution
    assert ex.num_gpus_per_worker == 0 and (ex.workers, ex.cpu_bind) == (1, "all")
