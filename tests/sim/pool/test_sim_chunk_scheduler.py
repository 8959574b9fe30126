"""The pool's Ray loop (sim/pool/on_ray.py ChunkScheduler) step by step, without Ray: a stand-in for
the ray module and the workers' actor handles, each call answered by hand. The whole loop on a real
Ray cluster, worker deaths included: test_sim_ray_faults.py, test_sim_batch.py."""
from __future__ import annotations

import itertools

import pytest
from ray.exceptions import ActorDiedError, RayActorError, RayTaskError

from esc_eval.serve.chat.interface import RunStopError
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.pool.on_ray import MAX_CHUNK_RESENDS, ChunkScheduler, WorkersLostError
from esc_eval.sim.pool.stats import LIVE, SETUP, PoolStats


class Ref:
    """An object ref: answered with a value or an error once `done`."""
    ids = itertools.count()

    def __init__(self, method: str, args: tuple, value=None, error: BaseException | None = None, done=True):
        self.id, self.method, self.args = next(self.ids), method, args
        self.value, self.error, self.done = value, error, done

    def __repr__(self) -> str:
        return f"Ref({self.method}#{self.id})"


class Method:
    def __init__(self, handle: "Handle", name: str):
        self.handle, self.name = handle, name

    def remote(self, *args) -> Ref:
        answer = self.handle.answers.get(self.name, {})
        ref = Ref(self.name, args, value=answer.get("value"), error=answer.get("error"), done=answer.get("done", True))
        self.handle.calls.append(ref)
        return ref


class Handle:
    """A worker's actor handle: every `x.remote(...)` recorded; `answers[name]` says how it answers."""

    def __init__(self, index: int, concurrency: int = 4):
        self.index, self.calls = index, []
        self.answers: dict[str, dict] = {
            "start_job": {"value": "direct"},
            "setup": {"value": {"where": f"node:{index}", "concurrency": {"value": concurrency, "reason": "test"}}},
            "run_chunk": {"value": []},
        }

    def __getattr__(self, name: str) -> Method:
        if name.startswith("__") and name != "__ray_ready__":
            raise AttributeError(name)
        return Method(self, name)

    def sent(self, name: str) -> list[Ref]:
        return [r for r in self.calls if r.method == name]


class FakeRay:
    def get(self, ref, timeout=None):
        if isinstance(ref, list):
            return [self.get(r) for r in ref]
        if ref.error is not None:
            raise ref.error
        return ref.value

    def put(self, value):
        return ("stored", value)

    def wait(self, refs, num_returns=1, timeout=None):
        ready = [r for r in refs if r.done][:num_returns]
        return ready, [r for r in refs if r not in ready]


def scheduler(n_workers=2, chunk_size=2, concurrency=2, **ex) -> tuple[ChunkScheduler, list[Handle], list]:
    workers = [Handle(i, concurrency) for i in range(n_workers)]
    notes: list = []
    execution = ExecutionConfig(chunk_size=chunk_size, worker_start_timeout_s=5.0, **ex)
    job = type("J", (), {"kind": "dialogues"})()
    sent: list = []
    s = ChunkScheduler(workers, "job-1", job, execution, notes.append, PoolStats(), lambda c, w: sent.append((c, w)),
                       ray_api=FakeRay())
    s.sent_log = sent
    return s, workers, notes


def items(n: int) -> list[dict]:
    return [{"key": str(i)} for i in range(n)]


def test_start_labels_the_workers_and_caps_what_each_holds():
    s, workers, notes = scheduler(concurrency=3, chunk_size=2)
    labels: list[str] = []
    s.start(items(4), "run", labels)
    assert labels == ["node:0 (direct)", "node:1 (direct)"]
    assert notes == [SETUP]
    assert s.caps == [5, 5]  # its concurrency plus one chunk queued behind
    assert s.spec == ("stored", (s.job, "run", s.execution))


def test_a_worker_that_does_not_set_up_in_time_fails_the_start():
    s, workers, _ = scheduler()
    workers[1].answers["setup"]["done"] = False
    with pytest.raises(TimeoutError, match="1 of 2 workers did not set up"):
        s.start(items(4), "run", [])


def test_fill_sends_chunks_to_the_least_loaded_worker_up_to_its_cap():
    s, workers, _ = scheduler(chunk_size=2, concurrency=2)  # cap 4 items: two chunks a worker
    s.start(items(10), "run", [])
    s.fill()
    assert [len(w.sent("run_chunk")) for w in workers] == [2, 2]
    assert s.load == [4, 4]
    assert [w for _, w in s.sent_log] == [0, 1, 0, 1]
    assert not s.exhausted  # two items still wait for room


def test_a_finished_chunk_is_noted_and_frees_room_for_the_next():
    s, workers, notes = scheduler(chunk_size=2, concurrency=2)
    s.start(items(10), "run", [])
    s.fill()
    ref = workers[0].sent("run_chunk")[0]
    ref.value = [{"key": "0"}, {"key": "1"}]
    s.chunk_done(ref)
    assert notes[-2:] == [{"key": "0"}, {"key": "1"}]
    assert s.load == [2, 4]
    s.fill()
    assert len(workers[0].sent("run_chunk")) == 3 and s.load == [4, 4]  # the last two items


def test_a_lost_worker_is_probed_and_its_chunk_resent_first_to_another():
    s, workers, _ = scheduler(chunk_size=2, concurrency=2)
    s.start(items(6), "run", [])
    s.fill()
    ref = workers[0].sent("run_chunk")[0]
    ref.error = RayActorError()
    s.chunk_done(ref)
    assert s.lost == {0} and len(workers[0].sent("__ray_ready__")) == 1
    assert s.resend == [(ref.args[1], 1)]
    s.chunk_done(workers[1].sent("run_chunk")[0])  # room on worker 1 for the re-sent chunk
    s.fill()
    resent = workers[1].sent("run_chunk")[-1]
    assert resent.args[1] == ref.args[1] and resent.args[3] is True  # flagged as a re-send
    assert len(workers[0].sent("run_chunk")) == 2  # nothing new for the lost worker


def test_a_chunk_that_loses_its_worker_too_often_fails_the_run():
    s, workers, _ = scheduler()
    s.start(items(2), "run", [])
    s.resend.append((items(2), MAX_CHUNK_RESENDS))
    s.fill()
    ref = workers[0].sent("run_chunk")[0]
    ref.error = RayActorError()
    with pytest.raises(WorkersLostError, match=f"lost its worker {MAX_CHUNK_RESENDS + 1} times"):
        s.chunk_done(ref)


def test_a_probe_brings_a_restarted_worker_back_or_marks_it_dead():
    s, workers, _ = scheduler()
    s.start(items(2), "run", [])
    s.lose(0, RayActorError())
    s.lose(1, RayActorError())
    s.lose(1, RayActorError())  # lost once: probed once
    back, gone = (next(r for r, w in s.probes.items() if w == i) for i in (0, 1))
    gone.error = ActorDiedError()
    s.probe_answered(back)
    s.probe_answered(gone)
    assert s.lost == {1} and s.dead == {1} and not s.probes


def test_a_probe_of_a_worker_not_yet_restarted_asks_again():
    s, workers, _ = scheduler()
    s.start(items(2), "run", [])
    s.lose(0, RayActorError())
    probe = next(iter(s.probes))
    probe.error = RayActorError()
    s.probe_answered(probe)
    assert list(s.probes.values()) == [0] and next(iter(s.probes)) is not probe
    assert len(workers[0].sent("__ray_ready__")) == 2


def test_every_worker_dead_with_work_left_fails_the_run():
    s, workers, _ = scheduler()
    s.start(items(2), "run", [])
    s.lost, s.dead = {0, 1}, {0, 1}
    with pytest.raises(WorkersLostError, match="all 2 workers were lost"):
        s.check_all_lost()


def test_every_worker_lost_waits_for_one_to_come_back():
    s, workers, _ = scheduler()
    s.start(items(2), "run", [])
    s.lost = {0, 1}
    s.check_all_lost()
    assert s.all_lost_since is not None
    s.lost = {1}
    s.check_all_lost()
    assert s.all_lost_since is None


def test_a_stopped_run_tells_every_live_worker_and_sends_nothing_new():
    s, workers, _ = scheduler(chunk_size=2, concurrency=2)
    s.start(items(20), "run", [])
    s.fill()
    s.lose(1, RayActorError())
    ref = workers[0].sent("run_chunk")[0]
    stop = RunStopError("engine died")
    ref.error = RayTaskError("run_chunk", "tb", stop)
    s.chunk_done(ref)
    assert s.stopping is stop
    assert [r.args for r in workers[0].sent("stop_job")] == [("job-1", "engine died")]
    assert not workers[1].sent("stop_job")  # lost: nothing to stop
    before = len(workers[0].sent("run_chunk"))
    s.fill()
    assert len(workers[0].sent("run_chunk")) == before


def test_a_task_error_other_than_a_stop_fails_the_run():
    s, workers, _ = scheduler()
    s.start(items(2), "run", [])
    s.fill()
    ref = workers[0].sent("run_chunk")[0]
    ref.error = RayTaskError("run_chunk", "tb", ValueError("bad item"))
    with pytest.raises(RayTaskError):
        s.chunk_done(ref)


def test_live_progress_is_polled_per_worker_and_summed(monkeypatch):
    monkeypatch.setattr("esc_eval.sim.pool.on_ray.LIVE_PROGRESS_S", 0.0)
    s, workers, notes = scheduler()
    s.start(items(2), "run", [])
    for w in workers:
        w.answers["progress"] = {"value": {"calls": 3, "completion_tokens": 10, "prompt_tokens": 1}}
    s.poll_live()  # asks every worker
    assert [len(w.sent("progress")) for w in workers] == [1, 1]
    s.poll_live()  # their answers summed
    assert (s.stats.live_calls, s.stats.live_tokens) == (6, 20) and notes[-1] == LIVE


def test_run_sends_every_item_and_every_worker_flushes_at_the_end():
    s, workers, notes = scheduler(chunk_size=2, concurrency=2)

    # Each chunk answers with one summary per item it carried.
    def answering(handle):
        method = Method(handle, "run_chunk")

        class Answering:
            def remote(self, *args):
                ref = method.remote(*args)
                ref.value = [{"key": it["key"]} for it in args[1]]
                return ref
        return Answering()

    for w in workers:
        w.__dict__["run_chunk"] = answering(w)
    lost = s.run(items(9), "run", [])
    assert lost == set()
    assert sorted(n["key"] for n in notes if "key" in n) == sorted(str(i) for i in range(9))
    assert [len(w.sent("finish_job")) for w in workers] == [1, 1]


def test_run_raises_the_stop_after_the_workers_flushed():
    s, workers, _ = scheduler()
    stop = RunStopError("budget spent")
    for w in workers:
        w.answers["run_chunk"] = {"error": RayTaskError("run_chunk", "tb", stop)}
    with pytest.raises(RunStopError, match="budget spent"):
        s.run(items(4), "run", [])
    assert [len(w.sent("finish_job")) for w in workers] == [1, 1]


def test_a_worker_lost_while_it_sets_up_is_probed_and_the_others_go_on():
    # seen in CI: the one worker's engine start was killed (memory) and Ray restarted the actor
    s, workers, notes = scheduler(chunk_size=2, concurrency=3)
    workers[0].answers["setup"]["error"] = RayActorError()
    labels: list[str] = []
    s.start(items(4), "run", labels)
    assert labels == ["lost in setup (direct)", "node:1 (direct)"] and notes == [SETUP]
    assert s.lost == {0} and len(workers[0].sent("__ray_ready__")) == 1
    assert s.caps == [5, 5] and len(s.stats.workers) == 1  # the others' concurrency until it is back
    s.fill()
    assert not workers[0].sent("run_chunk") and len(workers[1].sent("run_chunk")) == 2
    probe = workers[0].sent("__ray_ready__")[0]
    s.probe_answered(probe)  # restarted: its first chunk carries the job's spec, so it sets up again
    assert s.lost == set()


def test_a_lone_worker_lost_in_setup_is_waited_for_and_a_setup_error_still_fails_the_start():
    s, workers, _ = scheduler(n_workers=1, chunk_size=2, concurrency=2)
    workers[0].answers["setup"]["error"] = RayActorError()
    s.start(items(2), "run", [])
    s.check_all_lost()  # within the start timeout: waits, does not raise
    assert s.lost == {0} and s.all_lost_since is not None
    s2, workers2, _ = scheduler(n_workers=2)
    workers2[1].answers["setup"]["error"] = RayTaskError("setup", "tb", ValueError("no such model"))
    with pytest.raises(RayTaskError):
        s2.start(items(2), "run", [])
