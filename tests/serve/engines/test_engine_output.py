"""The engine's own cause of a failed start (serve/engines/output.py): what child processes print
through the teed fds 1 and 2, and the root cause found in it."""
import os
import subprocess
import sys
import textwrap
import time

import pytest

from esc_eval.serve.engines.output import ChildOutput, cause_of, root_cause

# What vLLM 0.32 printed on this machine for a model folder whose config.json does not match its
# weights (trimmed): the worker's traceback (logged on stdout), then the EngineCore's pointer to it.
VLLM_LINES = """\
(Worker pid=17594) WARNING 11-25 11:37:00 [cpu_worker.py:114] libiomp is not found in LD_PRELOAD.
(Worker pid=17594) ERROR 11-25 11:37:01 [multiproc_executor.py:953] WorkerProc failed to start.
(Worker pid=17594) ERROR 11-25 11:37:01 [multiproc_executor.py:953] Traceback (most recent call last):
(Worker pid=17594) ERROR 11-25 11:37:01 [multiproc_executor.py:953]   File "/v/multiproc_executor.py", line 920, in worker_main
(Worker pid=17594) ERROR 11-25 11:37:01 [multiproc_executor.py:953]     worker = WorkerProc(*args, **kwargs)
(Worker pid=17594) ERROR 11-25 11:37:01 [multiproc_executor.py:953]              ^^^^^^^^^^^^^^^^^^^^^^^^^^^
(Worker pid=17594) ERROR 11-25 11:37:01 [multiproc_executor.py:953] RuntimeError: start (0) + length (1600) exceeds dimension size (1536).
(EngineCore pid=17329) ERROR 11-25 11:37:03 [core.py:1510] EngineCore failed to start.
(EngineCore pid=17329) ERROR 11-25 11:37:03 [core.py:1510] Traceback (most recent call last):
(EngineCore pid=17329) ERROR 11-25 11:37:03 [core.py:1510]   File "/v/core.py", line 1482, in run_engine_core
(EngineCore pid=17329) ERROR 11-25 11:37:03 [core.py:1510] Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.
Process EngineCore:
Traceback (most recent call last):
  File "/usr/lib/python3.11/multiprocessing/process.py", line 314, in _bootstrap
    self.run()
Exception: WorkerProc initialization failed due to an exception in a background process. See stack trace for root cause.
""".splitlines()


def test_the_root_cause_skips_vllms_pointers_to_it():
    assert root_cause(VLLM_LINES) == "RuntimeError: start (0) + length (1600) exceeds dimension size (1536)."


def test_a_chained_or_multi_line_exception_and_no_traceback():
    chained = ["Traceback (most recent call last):", '  File "a.py", line 1', "KeyError: 'x'", "",
               "The above exception was the direct cause of the following exception:", "",
               "Traceback (most recent call last):", '  File "b.py", line 2',
               "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
               "  Value error, max_model_len 200000 is too large [type=value_error]"]
    assert root_cause(chained) == "ValidationError: ModelConfig: max_model_len 200000 is too large"
    assert root_cause(["INFO loading", "WARNING slow"]) is None
    # a progress bar's redraws after the exception are not part of it
    assert root_cause(["Traceback (most recent call last):", '  File "a.py"', "RuntimeError: boom",
                       "\rLoading shards:   0% | 0/1"]) == "RuntimeError: boom"
    assert root_cause(VLLM_LINES[-4:]).startswith("Exception: WorkerProc initialization failed")  # only a pointer


CHILD = textwrap.dedent("""
    import logging, sys
    print("Loading safetensors checkpoint shards:   0% Completed | 0/1", end="\\r", flush=True)
    logging.basicConfig(stream=sys.stdout, format="(Worker pid=1) ERROR 11-25 11:37:01 [x.py:1] %(message)s")
    try:
        raise RuntimeError("Cannot find any model weights with `/models/m`")
    except RuntimeError:
        logging.getLogger("w").exception("WorkerProc failed to start.")
    raise Exception("WorkerProc initialization failed due to an exception in a background process. "
                    "See stack trace for root cause.")
""")


def test_lines_ray_passed_on_keep_their_cause():
    # a Serve replica's engine process, as the driver prints it (log_to_driver): two process prefixes,
    # the first in colour (the H200's node check log)
    pre = "\x1b[36m(ServeReplica:esc-eval-run:LLMServer:esc-role pid=6745)\x1b[0m (EngineCore pid=7306) "
    lines = [pre + "ERROR 11-28 05:39:01 [core.py:1330] " + line for line in (
        "Traceback (most recent call last):", '  File "/tmp/site/vllm/v1/executor/ray_utils.py", line 587',
        "RuntimeError: Conflicting worker_process_setup_hook: the setup hook env var is already set")]
    assert root_cause(lines) == "RuntimeError: Conflicting worker_process_setup_hook: the setup hook env var is already set"


def test_a_child_started_inside_the_capture_is_teed_for_its_whole_life(capfd):
    before = os.fstat(2).st_ino, os.fstat(1).st_ino
    out = ChildOutput()
    with out.capture():
        child = subprocess.Popen([sys.executable, "-c", CHILD])  # inherits the pipes as vLLM's EngineCore does
    assert (os.fstat(2).st_ino, os.fstat(1).st_ino) == before  # this process's streams are back at once
    child.wait(30)
    deadline = time.monotonic() + 10
    while out.root_cause() is None or "Exception: WorkerProc" not in "\n".join(out.tail()):
        assert time.monotonic() < deadline, out.tail()
        time.sleep(0.05)
    assert out.root_cause() == "RuntimeError: Cannot find any model weights with `/models/m`"
    seen = capfd.readouterr()  # still written through to where the streams went
    assert "Cannot find any model weights" in seen.out and "See stack trace for root cause" in seen.err


def test_a_serve_replica_whose_engine_does_not_start_names_the_cause():
    """ray.serve.llm's LLMServer as the replicas run it (serve/app/server.py), its engine a stand-in
    (Ray's engine_cls hook) that starts a child process failing like vLLM's worker, then raises
    vLLM's pointer: the replica's error carries the child's cause."""
    import asyncio

    import pytest
    from ray.serve.llm import LLMConfig

    from esc_eval.serve.chat.interface import EngineStartError
    from esc_eval.serve.app.server import LLMServer

    class VLLMLikeEngine:
        def __init__(self, llm_config):
            pass

        async def start(self):
            await asyncio.to_thread(subprocess.run, [sys.executable, "-c", CHILD])
            raise RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")

    cfg = LLMConfig(model_loading_config={"model_id": "embedded", "model_source": "/models/m"},
                    accelerator_config={"kind": "cpu"})
    server = LLMServer.sync_init(cfg, engine_cls=VLLMLikeEngine)
    with pytest.raises(EngineStartError) as e:
        asyncio.run(server.start())
    assert str(e.value) == ("the vLLM engine for embedded did not start: RuntimeError: Cannot find any model weights "
                            "with `/models/m`")


SERVE_DEPLOY_FAILED = """The deployment failed to start 3 times in a row. This may be due to a problem with its \
constructor or initial health check failing. See controller logs for details. Error:
ray::ServeReplica:esc-eval:LLMServer:embedded.initialize_and_get_metadata() (pid=3121, ip=10.0.0.2, \
actor_id=7f, repr=<ray.serve._private.replica.ServeReplica object at 0x7f>)
  File "/v/ray/serve/_private/replica.py", line 1102, in initialize_and_get_metadata
    await self._replica_impl.initialize(deployment_config, rank)
  File "/v/esc_eval/serve/serve_server.py", line 33, in start
    raise EngineStartError(f"the vLLM engine for {model} did not start: {cause_of(e, output)}",
esc_eval.serve.chat.interface.EngineStartError: the vLLM engine for embedded did not start: RuntimeError: start (0) + \
length (1600) exceeds dimension size (1536).
"""


def test_a_failed_deploy_is_one_line_with_the_replicas_cause():
    from esc_eval.serve.app.deploy import replica_cause

    assert replica_cause(SERVE_DEPLOY_FAILED) == ("the vLLM engine for embedded did not start: RuntimeError: start (0) "
                                                  "+ length (1600) exceeds dimension size (1536).")
    # a replica of another server: the last exception of the traceback Serve quotes, else its first line
    other = SERVE_DEPLOY_FAILED.replace("esc_eval.serve.chat.interface.EngineStartError: the vLLM engine for embedded did not "
                                        "start: ", "")
    assert replica_cause("Error:\nTraceback (most recent call last):\n  File \"x\"\n" + other.splitlines()[-1]) == \
        "RuntimeError: start (0) + length (1600) exceeds dimension size (1536)."
    assert replica_cause("Deployment is taking longer than expected.\nmore") == "Deployment is taking longer than expected."


# What vLLM 0.32 raised on this machine for a folder whose config.json names an architecture it lacks
# (EngineArgs(...).create_model_config(); the list of the 391 architectures it knows trimmed to three).
UNSUPPORTED = """1 validation error for ModelConfig
  Value error, Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: \
dict_keys(['AfmoeForCausalLM', 'ApertusForCausalLM', 'LlamaForCausalLM']) [type=value_error, \
input_value=ArgsKwargs((), {'model': ...nderer_num_workers': 1}), input_type=ArgsKwargs]
    For further information visit https://errors.pydantic.dev/2.14/v/value_error"""
UNSUPPORTED_CAUSE = ("ValidationError: ModelConfig: Model architectures ['FooForCausalLM'] are not supported for now. "
                     "Supported architectures: [3 names]")


def test_a_validation_error_keeps_its_message_not_its_header():
    """"did not start: ValidationError: 1 validation error for ModelConfig" named nothing (issue 35)."""
    import pydantic

    class ValidationError(ValueError):  # what vLLM raised, with its text (pydantic's own class cannot be built from text)
        pass

    assert cause_of(ValidationError(UNSUPPORTED), ChildOutput()) == UNSUPPORTED_CAUSE

    class ModelConfig(pydantic.BaseModel):  # a real pydantic error: a field's and a model-level check's
        max_model_len: int
        dtype: str = "auto"

        @pydantic.model_validator(mode="after")
        def _dtype(self):
            raise ValueError(f"dtype {self.dtype!r} is not supported on this device")

    with pytest.raises(pydantic.ValidationError) as e:
        ModelConfig(max_model_len="abc")
    assert cause_of(e.value, ChildOutput()) == ("ValidationError: ModelConfig: max_model_len: Input should be a valid "
                                                "integer, unable to parse string as an integer")
    with pytest.raises(pydantic.ValidationError) as e:
        ModelConfig(max_model_len=1)
    assert cause_of(e.value, ChildOutput()) == "ValidationError: ModelConfig: dtype 'auto' is not supported on this device"


def test_a_validation_error_in_an_engine_processs_output_keeps_its_message():
    prefix = "(EngineCore pid=12) ERROR 11-25 11:36:17 [core.py:1510] "
    lines = [prefix + line for line in ["EngineCore failed to start.", "Traceback (most recent call last):",
                                        '  File "/v/core.py", line 1482, in run_engine_core',
                                        *("pydantic_core._pydantic_core.ValidationError: " + UNSUPPORTED).splitlines()]]
    lines += ["(EngineCore pid=12) INFO 11-25 11:36:18 [core.py:99] shutting down"]
    assert root_cause(lines) == UNSUPPORTED_CAUSE


def test_the_tail_reaches_back_to_where_the_last_traceback_began():
    out = ChildOutput()
    frames = [f'  File "vllm/x{i}.py", line {i}, in f{i}' for i in range(60)]
    out._keep([b"(EngineCore pid=1) INFO starting", b"(EngineCore pid=1) ERROR Traceback (most recent call last):",
               *[f.encode() for f in frames], b"(EngineCore pid=1) ERROR RuntimeError: start (0) exceeds dimension size"])
    tail = out.tail(40)
    assert "Traceback (most recent call last)" in tail[0] and tail[-1].endswith("exceeds dimension size")
    assert len(tail) == 62  # the traceback whole, not the 40 lines after its head
    longer = ChildOutput()  # 150 frames (vLLM's tracing wraps each): its head, a count, its end; 120 lines
    longer._keep([b"Traceback (most recent call last):", *[f"  frame {i}".encode() for i in range(150)],
                  b"RuntimeError: start (0) exceeds dimension size"])
    tail = longer.tail(40)
    assert len(tail) == 120 and tail[0] == "Traceback (most recent call last):" and tail[2] == "  frame 1"
    assert tail[3] == "... (33 lines left out)" and tail[4] == "  frame 35" and tail[-1].endswith("dimension size")
    out._keep([f"line {i}".encode() for i in range(200)])
    assert out.tail(40) == [f"line {i}" for i in range(160, 200)]  # a traceback long gone: the last 40 lines


def test_the_root_cause_skips_the_ray_executors_teardown_after_a_failed_start():
    # on an H200: the engine's error, then vLLM's Ray executor failing to kill its workers at exit
    lines = ["(EngineCore pid=2644) Traceback (most recent call last):", '(EngineCore pid=2644)   File "gpu_worker.py"',
             "(EngineCore pid=2644) ValueError: No available memory for the cache blocks.",
             "(EngineCore pid=2644) ERROR [ray_executor_v2.py:516] Failed to kill actor rank=0",
             "(EngineCore pid=2644) Traceback (most recent call last):", '(EngineCore pid=2644)   File "worker.py"',
             "(EngineCore pid=2644) ray.exceptions.ActorHandleNotFoundError: ActorHandle objects are not valid "
             "across Ray sessions. The actor handle was created in job 03000000, but the current job is 04000000."]
    assert root_cause(lines) == "ValueError: No available memory for the cache blocks."
    assert root_cause(lines[3:]).startswith("ray.exceptions.ActorHandleNotFoundError")  # nothing else: said as is
