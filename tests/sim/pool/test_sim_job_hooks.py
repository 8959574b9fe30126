"""The seams are declared (sim/pool/job.py, serve/chat/interface.py Backend): a job or a backend that
defines a public method the seam does not declare (a misspelt hook, which nobody would call) fails here."""
import importlib

from esc_eval.serve.chat.interface import BACKENDS, Backend
from esc_eval.sim.pool.job import Job

JOB_MODULES = ["esc_eval.sim.jobs.simulation", "esc_eval.sim.jobs.scoring", "esc_eval.sim.jobs.distress",
               "esc_eval.sim.bench.engine_probe", "esc_eval.sim.bench.loops.simulation"]


def _subclasses(base: type) -> set[type]:
    out, todo = set(), [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in out:
                out.add(sub)
                todo.append(sub)
    return out


def _undeclared(cls: type, base: type) -> list[str]:
    declared = {n for n in dir(base) if not n.startswith("_")}
    return sorted(n for n, v in vars(cls).items()
                  if not n.startswith("_") and callable(getattr(cls, n)) and n not in declared)


def test_every_job_defines_only_the_hooks_job_declares():
    for name in JOB_MODULES:
        importlib.import_module(name)
    jobs = {c for c in _subclasses(Job) if c.__module__.startswith("esc_eval.")}
    assert {c.__name__ for c in jobs} >= {"SimulationJob", "ScoringJob", "DistressJob", "EngineProbe"}
    for cls in jobs:
        assert _undeclared(cls, Job) == [], f"{cls.__module__}.{cls.__name__}: not hooks of sim.pool.job.Job"


def test_every_backend_defines_only_the_hooks_backend_declares():
    for where in BACKENDS.values():
        importlib.import_module(where.partition(":")[0])
    backends = {c for c in _subclasses(Backend) if c.__module__.startswith("esc_eval.")}
    assert len(backends) >= 5
    for cls in backends:
        assert _undeclared(cls, Backend) == [], f"{cls.__module__}.{cls.__name__}: not hooks of Backend"


def test_a_misspelt_hook_is_caught():
    class Sloppy(Job):
        kind = "scores"

        async def setup(self, models):
            pass

        async def run(self, item):
            return [], {}

        def after_flsh(self, items):  # a hook nobody would call
            pass

    assert _undeclared(Sloppy, Job) == ["after_flsh"]
