"""Every model of a run checked before its first dialogue, in seconds, with nothing started or written.

Only the role model and the first target used to start before the first dialogue: a later target that
could not start (a typo in a folder, an architecture vLLM lacks) stopped a 14-target run after the
earlier targets' dialogues, hours in. Now each model the run will use (the role, every target, the judge
when scoring follows) is
- resolved through the registry (an unknown name, a missing LoRA adapter folder);
- a vLLM model: its folder here with a config.json and weights (when its engines run on this machine),
  then its config resolved by vLLM with the engine arguments it would start with
  (serve/engines/preflight.py: architecture, max_model_len, dtype; no weights read);
- an API model: its backend's own preflight (a key, a provider: serve/chat/interface.py backend_preflight);
and all problems are raised together (PreflightError: one line per model, naming it). Bad input (an
unknown name, an unset key) is answered without asking vLLM: its import takes seconds.
The jobs call `preflight_run` at their start (sim/launch/placed.py before the plan, run_simulation and
run_scoring before anything is written); vLLM is not asked twice about a model in one process.
`model_uses` says which models a simulation and a scoring config name and what each is used for.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from esc_eval.serve.chat.interface import backend_preflight, is_api_spec
from esc_eval.serve.engines.preflight import vllm_config_problem
from esc_eval.serve.plan.planner import ModelUse
from esc_eval.serve.registry.registry import resolve
from esc_eval.serve.registry.size import PATH_PREFIXES, folder_problem
from esc_eval.sim.jobs.config import ScoringConfig, SimulationConfig


class PreflightError(RuntimeError):
    """Models of a run that would not start: one line per model in `problems` (and the message); the
    command exits 1, as when an engine does not start."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))

    def __reduce__(self):  # pickles with its problems (it may cross a Ray actor boundary)
        return (type(self), (self.problems,))


class PreflightInputError(PreflightError, ValueError):
    """Only bad input (an unknown model name, an API key unset, a missing adapter): exit 2, as before."""


def _weights_path(rest: str) -> tuple[str, bool]:
    """(the path or hub id vLLM loads, whether it is a local folder) for `vllm/<rest>`."""
    if rest == "embedded":
        from esc_eval.serve.engines.embedded import embedded_model_path

        return str(embedded_model_path()), True
    return rest, rest.startswith(PATH_PREFIXES) or os.path.isabs(rest)


class BadInput(str):
    """A problem of the config's input (an unknown name, an unset key), not of a model that would not start."""


def _input_problem(model: str, options: dict[str, Any], *, here: bool) -> tuple[str | None, tuple[str, dict] | None]:
    """(why `model` would not start as far as the registry, its backend and its folder tell, or None;
    the (path, options) to ask vLLM about when that is still open)."""
    try:
        spec, implied = resolve(model)
    except ValueError as e:  # an unknown name, a registry error, a missing adapter folder
        return BadInput(e), None
    options = {**implied, **options}
    backend, _, rest = spec.partition("/")
    if is_api_spec(spec):
        try:
            backend_preflight(spec, **options)
        except ValueError as e:
            return BadInput(e), None
        return None, None
    if backend != "vllm":
        return None, None  # fake/ and serve/ models: nothing to start here
    path, local = _weights_path(rest)
    if local:
        if not here and not Path(path).expanduser().exists():
            return None, None  # a folder on the cluster's nodes only: their engines find it (or say so) at start
        problem = folder_problem(path)
        if problem:
            return problem, None
        path = str(Path(path).expanduser())
    return None, (path, options)


def model_problem(model: str, options: dict[str, Any], *, here: bool = True) -> str | None:
    """Why `model` (a registry name or spec, with the config's options) would not start, or None (a
    BadInput for what was bad input before this check existed). `here`: its engines run on this
    machine (its local folders must be here)."""
    problem, ask = _input_problem(model, options, here=here)
    return vllm_config_problem(*ask) if ask else problem


def preflight_problems(uses: Iterable[ModelUse], *, here: bool = True) -> list[str]:
    """One line per model that would not start: "model <name> (<uses>): <why>"."""
    seen: dict[tuple[str, str], list[str]] = {}
    first: dict[tuple[str, str], ModelUse] = {}
    for u in uses:
        key = (u.model, repr(sorted(u.options.items())))
        seen.setdefault(key, [])
        if u.use not in seen[key]:
            seen[key].append(u.use)
        first.setdefault(key, u)
    found = {key: _input_problem(u.model, dict(u.options), here=here) for key, u in first.items()}
    # Bad input (an unknown name, an unset key) is answered at once, without asking vLLM: its import takes
    # seconds. Otherwise every problem is listed, the folders' and vLLM's together.
    if not any(isinstance(problem, BadInput) for problem, _ in found.values()):
        found = {key: (vllm_config_problem(*ask) if ask else problem, None) for key, (problem, ask) in found.items()}
    out = []
    for key, (problem, _) in found.items():
        if problem:
            u = first[key]
            line = f"model {u.model} ({', '.join(seen[key])}): {problem}"
            out.append(BadInput(line) if isinstance(problem, BadInput) else line)
    return out


def preflight(uses: Iterable[ModelUse], *, here: bool = True) -> None:
    """Raise PreflightError listing every model of `uses` that would not start (see the module doc)."""
    problems = preflight_problems(uses, here=here)
    if problems:
        bad_input = all(isinstance(p, BadInput) for p in problems)
        raise (PreflightInputError if bad_input else PreflightError)([str(p) for p in problems])


def model_uses(sim: SimulationConfig | None = None, scoring: ScoringConfig | None = None) -> list[ModelUse]:
    """The models a simulation and/or scoring config names, with what each is used for."""
    out: list[ModelUse] = []
    if sim is not None:
        out.append(ModelUse(sim.role.model, dict(sim.role.options), "role"))
        out += [ModelUse(t.model, dict(t.options), "target") for t in sim.targets]
    if scoring is not None:
        for judge in scoring.judges:  # one judge, or each of a panel's
            out.append(ModelUse(judge.model.model, dict(judge.model.options), "judge", "scoring"))
    return out


def preflight_run(sim: SimulationConfig | None = None, scoring: ScoringConfig | None = None) -> None:
    """Every model of a simulation and/or the scoring that follows it checked (PreflightError)."""
    from esc_eval.serve.devices.accelerator import check_accelerator
    from esc_eval.sim.driver.placement import remote_cluster, self_hosted

    execution = (sim or scoring).execution if (sim or scoring) is not None else None
    uses = model_uses(sim, scoring)
    here = execution is None or not remote_cluster(execution)
    if here and self_hosted(uses):
        check_accelerator()  # AcceleratorMismatch first: on such a machine vLLM's answers follow from it
    preflight(uses, here=here)


__all__ = ["PreflightError", "PreflightInputError", "model_problem", "model_uses", "preflight", "preflight_problems", "preflight_run"]
