"""Every model of a run checked before the first dialogue (sim/jobs/preflight.py): its folder, its config
as vLLM resolves it (architecture, max_model_len), the API backend's own checks; every problem listed,
one line per model, nothing started or written. Before, only the role and the first target started
before the first dialogue: a second target naming an architecture vLLM lacks stopped the run after the
first target's dialogues (12 minutes on the AVX2 EPYC, issue 35), the cause never named."""
from __future__ import annotations

import json
import pickle
import sys

import pytest

from esc_eval.sim.jobs.preflight import PreflightError, model_problem


@pytest.fixture
def unsupported(model_folder):
    """A folder whose config.json names an architecture vLLM lacks (a 7B Llama's shape otherwise)."""
    folder = model_folder("foo", "j7b")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["FooForCausalLM"]}))
    return folder


def _cli(monkeypatch, capsys, *argv: str) -> tuple[int, list[str]]:
    from esc_eval.cli.app import main
    from esc_eval.sim.pool import pool

    monkeypatch.setattr(pool.WorkerPool, "__init__", lambda *a, **k: pytest.fail("a worker pool (engines) was started"))
    monkeypatch.setattr(sys, "argv", ["esc-eval", *argv])
    with pytest.raises(SystemExit) as e:
        main()
    return e.value.code, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


ARCH = ("ValidationError: ModelConfig: Model architectures ['FooForCausalLM'] are not supported for now. Supported "
        "architectures: [")


def test_a_second_target_vllm_cannot_start_stops_the_run_before_any_dialogue(unsupported, monkeypatch, capsys, tmp_path):
    missing = tmp_path / "models" / "j7bb"  # a typo in a folder
    out = tmp_path / "run"
    code, err = _cli(monkeypatch, capsys, "simulate", "--role", "vllm/embedded", "--target", "vllm/embedded",
                     "--target", f"vllm/{unsupported}", "--target", f"vllm/{missing}", "-n", "2", "-o", str(out))
    assert code == 1
    assert len(err) == 2, err  # one line per model that would not start; the good ones say nothing
    assert err[0].startswith(f"error: model vllm/{unsupported} (target): {ARCH}") and err[0].endswith(" names]")
    assert err[1] == f"error: model vllm/{missing} (target): local folder {missing} does not exist"
    assert not out.exists()  # no dialogue row, no manifest


def test_a_judge_vllm_cannot_start_stops_scoring_before_it_reads_or_writes(unsupported, monkeypatch, capsys, tmp_path):
    run = tmp_path / "run"
    code, err = _cli(monkeypatch, capsys, "score", "-i", str(run), "--judge", f"vllm/{unsupported}")
    assert code == 1 and len(err) == 1 and err[0].startswith(f"error: model vllm/{unsupported} (judge): {ARCH}")
    assert not run.exists()


def test_run_simulation_itself_checks_every_model_first(unsupported, tmp_path):
    """What the demo and the benchmarks call: the same check before anything is written."""
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.sim.jobs.simulation import run_simulation
    from esc_eval.sim.pool.config import ExecutionConfig

    cfg = SimulationConfig(cards="sample", limit=1, role=ModelRef(model="fake/seeker"),
                           targets=[ModelRef(model="fake/echo"), ModelRef(model=f"vllm/{unsupported}")],
                           execution=ExecutionConfig(executor="local"))
    with pytest.raises(PreflightError) as e:
        run_simulation(cfg, tmp_path / "run")
    assert e.value.problems[0].startswith(f"model vllm/{unsupported} (target): {ARCH}")
    assert not (tmp_path / "run").exists()
    again = pickle.loads(pickle.dumps(e.value))
    assert type(again) is PreflightError and again.problems == e.value.problems


def test_what_vllm_resolves_without_loading_weights(model_folder, tmp_path):
    folder = model_folder("j7b")  # a 7B Llama's shape; its weights file is never read
    assert model_problem(f"vllm/{folder}", {"max_model_len": 8192}) is None
    too_long = model_problem(f"vllm/{folder}", {"max_model_len": 65536})
    assert too_long.startswith("ValidationError: ModelConfig: User-specified max_model_len (65536) is greater than the "
                               "derived max_model_len (max_position_embeddings=32768")
    assert model_problem(f"vllm/{folder}", {"dtype": "int3"}).startswith("dtype: unknown dtype 'int3'")
    bare = tmp_path / "bare"
    bare.mkdir()
    assert model_problem(f"vllm/{bare}", {}) == f"local folder {bare} has no config.json (not a model folder)"
    assert model_problem("vllm/embedded", {}) is None


def test_a_folder_on_the_clusters_nodes_only_is_theirs_to_check(tmp_path):
    missing = tmp_path / "only-on-the-nodes"
    assert model_problem(f"vllm/{missing}", {}, here=False) is None  # joining a cluster by address
    assert model_problem(f"vllm/{missing}", {}, here=True) == f"local folder {missing} does not exist"


def test_bad_input_keeps_its_exit_code_and_is_listed_with_the_rest(monkeypatch, capsys, tmp_path):
    """An unknown name and an unset API key were bad input (exit 2) before the check; they still are, and
    each is its own line."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, err = _cli(monkeypatch, capsys, "simulate", "--role", "fake/seeker", "--target", "no-such-model",
                     "--target", "openai/gpt-4", "-n", "1", "-o", str(tmp_path / "run"))
    assert code == 2 and len(err) == 2, err
    assert err[0].startswith("error: model no-such-model (target): model 'no-such-model' is not in the registry")
    assert err[1].startswith("error: model openai/gpt-4 (target): ") and "OPENAI_API_KEY" in err[1]
    assert not (tmp_path / "run").exists()


def test_a_typo_in_a_models_name_is_answered_without_importing_vllm(tmp_path):
    """Bad input is answered at once: importing vLLM to resolve the other models' configs takes seconds
    (4.5 s of a 7.7 s `simulate --target no-such-model` on the AVX-512 EPYC), and the typo must be fixed first."""
    import subprocess

    code = ("import sys\nfrom esc_eval.sim.jobs.preflight import PreflightInputError, preflight_problems\n"
            "from esc_eval.serve.plan.planner import ModelUse\n"
            "lines = preflight_problems([ModelUse('vllm/embedded', {}, 'role'), ModelUse('no-such-model', {}, 'target')])\n"
            "print(len(lines), lines[0].split(':')[0], 'vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "model", "no-such-model", "(target)", "False"]


def test_an_output_folder_under_a_file_is_refused_before_the_models_are_checked(monkeypatch, tmp_path):
    """Like a typo, an output folder that cannot be made is answered before vLLM is asked (and nothing
    is created: the check writes nothing)."""
    import esc_eval.sim.launch.placed as placed_mod
    from esc_eval.serve.registry.ref import ModelRef
    from esc_eval.sim.jobs.config import SimulationConfig
    from esc_eval.sim.runs.storage import RunFolderError

    monkeypatch.setattr(placed_mod, "preflight_run", lambda *a, **k: pytest.fail("the models were checked first"))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cfg = SimulationConfig(limit=1, role=ModelRef(model="fake/seeker"), targets=[ModelRef(model="fake/echo")])
    with pytest.raises(RunFolderError, match=f"output folder {blocker / 'run' / 'x'} is not writable: {blocker} is a file"):
        with placed_mod.placed_simulation(cfg, str(blocker / "run" / "x")):
            pass
    readonly = tmp_path / "ro"
    readonly.mkdir()
    monkeypatch.setattr("os.access", lambda path, mode: str(path) != str(readonly))  # as for a user who is not root
    with pytest.raises(RunFolderError, match="permission denied on"):
        with placed_mod.placed_simulation(cfg, str(readonly / "run")):
            pass
    assert list(tmp_path.iterdir()) == [blocker, readonly] and not any(readonly.iterdir())
