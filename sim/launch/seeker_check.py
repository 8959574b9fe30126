"""The check against people (beyond the paper): does a judge agree with the people who were helped?

ESConv's seekers rated their own conversations (sim/runs/records.py SEEKER_RATING_ITEMS: their emotion
intensity before and after, the supporter's empathy and relevance, 1-5). Given those dialogues (the caller
reads the file: analysis/seekers/esconv.py), this writes them into a run folder as dialogue rows (run id
and models 'people') with the people's own answers as seeker-rating rows (rater 'people'), then, on one
pool, asks a judge to read each dialogue as its seeker and answer the same questions (rater
'<judge>:as-seeker', sim/seekerview) and scores the same dialogues on the seven dimensions (the scoring
job). The folder is resumable like any run (each part asks only what is missing); the agreement itself
is analysis' (analysis/seekerview).
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, ContextManager

from pydantic import Field

from esc_eval.serve.config import ConfigModel
from esc_eval.serve.registry.entry import TokenPrice
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.registry.registry import resolve
from esc_eval.sim.judging.config import JudgeConfig
from esc_eval.sim.pool.config import ExecutionConfig
from esc_eval.sim.runs.records import SEEKER_RATING_ITEMS, dialogue_row, seeker_rating_row
from esc_eval.sim.runs.runfolder import RunFolder, now_utc
from esc_eval.sim.seekerview.job import KIND, PEOPLE, reader_rater, run_ratings

SUPPORTER = f"{PEOPLE} (supporter)"  # the target_model of people's dialogues (analysis/seekers/esconv.py's name too)


class SeekerCheckConfig(ConfigModel):
    """A judge read against the people who were helped: its answers as the seeker, and its scores."""

    judge: ModelRef = Field(default_factory=lambda: ModelRef(model="vllm/embedded"), description="The model that reads each dialogue in the seeker's place and answers ESConv's questions (empathy, relevance, emotion intensity before and after).")
    scorer: JudgeConfig | None = Field(None, description="The seven-dimension judge scoring the same dialogues, its scores set against the people's ratings (default: `judge` with the paper's rubric).")
    score: bool = Field(True, description="Score the dialogues on the seven dimensions too (off: only the judge's answers as the seeker).")
    execution: ExecutionConfig = Field(default_factory=lambda: ExecutionConfig(chunk_size=4), description="Pool shape and retries.")
    prices: dict[str, TokenPrice] = Field(default_factory=dict, description="Per-token prices by model name or spec (manifest `usage`).")

    def scoring_config(self):
        from esc_eval.sim.jobs.config import ScoringConfig

        scorer = self.scorer or JudgeConfig(model=self.judge)
        return ScoringConfig(judge=scorer, execution=self.execution, prices=self.prices)


def people_rows(people: list[dict[str, Any]], done_dialogues: set[str], done_ratings: set[tuple[str, str]]):
    """(dialogue rows, people's rating rows) not yet in the folder. people: dicts with dialogue_id, language,
    turns ({speaker: seeker | assistant, text}) and ratings {item: 1-5 or None}."""
    dialogues, ratings, now = [], [], now_utc()
    for p in people:
        did = p["dialogue_id"]
        keys = {"run_id": PEOPLE, "dialogue_id": did, "card_id": p.get("card_id") or did, "language": p.get("language") or "en",
                "target_model": SUPPORTER, "role_model": PEOPLE, "strategy": PEOPLE}
        if did not in done_dialogues:
            turns = [{"index": i, "speaker": t["speaker"], "text": t["text"] or ""} for i, t in enumerate(p["turns"])]
            dialogues.append(dialogue_row({**keys, "turns": turns, "n_turns": len(turns), "status": "ok",
                                           "termination_reason": "completed", "started_at": now, "finished_at": now}))
        for item in SEEKER_RATING_ITEMS:
            value = (p.get("ratings") or {}).get(item)
            if value is None or value != value or (did, item) in done_ratings:  # NaN: the survey lacks it
                continue
            ratings.append(seeker_rating_row({**keys, "item": item, "rater": PEOPLE, "rating": int(round(value)),
                                              "expected": float(value), "parse_status": "ok", "method": "survey",
                                              "rated_at": now}))
    return dialogues, ratings


def run_seeker_check(cfg: SeekerCheckConfig, people: list[dict[str, Any]], out_dir: str | Path,
                     progress: Callable[..., ContextManager[Any]] | None = None) -> dict[str, Any]:
    """The check into the run folder `out_dir` (see the module docstring); the two jobs' results.
    Every model is checked before anything is written (one line)."""
    from esc_eval.sim.jobs.preflight import preflight_run
    from esc_eval.sim.jobs.scoring import run_scoring
    from esc_eval.sim.pool.pool import WorkerPool

    if not people:
        raise ValueError("no dialogue of people to check the judge against")
    resolve(cfg.judge.model)  # an unknown judge: one line, nothing written
    scoring = cfg.scoring_config() if cfg.score else None
    if scoring is not None:
        preflight_run(scoring=scoring)  # the scorer would start: one line, nothing written
    progress = progress or (lambda *a, **k: contextlib.nullcontext())
    run = RunFolder(str(out_dir), create=True)
    done_d = run.done_dialogue_ids(include_failed=True)
    t = run.read(KIND, columns=["dialogue_id", "item", "rater"])
    done_r = {(d, i) for d, i, r in zip(*(t.column(c).to_pylist() for c in ("dialogue_id", "item", "rater"))) if r == PEOPLE}
    new_dialogues, new_ratings = people_rows(people, done_d, done_r)
    run.write_part("dialogues", new_dialogues)
    run.write_part(KIND, new_ratings)
    run.update_manifest(run_id=PEOPLE, seeker_check={"people": len(people), "judge": cfg.judge.model,
                                                     "config": cfg.model_dump(mode="json")})
    dialogues = [{**d, "status": "ok"} for d in run.iter_rows("dialogues", columns=[
        "run_id", "dialogue_id", "card_id", "language", "target_model", "role_model", "strategy", "turns", "status"])]
    result: dict[str, Any] = {"run_dir": str(run), "people": len(people)}
    with WorkerPool(cfg.execution) as pool:  # the judge's engine serves both jobs where it is the scorer too
        with progress("seeker view", unit="dialogues") as jp:
            result["seeker_ratings"] = run_ratings(cfg.judge, reader_rater(cfg.judge), dialogues, run.location,
                                                   cfg.execution, cfg.prices, pool=pool,
                                                   on_summary=jp.on_summary if jp else None,
                                                   on_start=jp.on_start if jp else None)
        if scoring is not None:
            with progress("score", unit="dialogues") as jp:
                result["scoring"] = run_scoring(scoring, run.location, on_summary=jp.on_summary if jp else None,
                                                on_start=jp.on_start if jp else None, pool=pool)
    return result


def seeker_check_runner(cfg: SeekerCheckConfig, progress: Callable[..., ContextManager[Any]] | None = None):
    """What analysis' seeker check calls to run the models (analysis never reaches them): people -> folder."""
    return lambda people, out_dir: run_seeker_check(cfg, people, out_dir, progress)


def seeker_check_command(humans: str, check: Callable[..., tuple[str, dict[str, Any]]], judge: str | None = None,
                         scorer: str | None = None, score: bool | None = None, config: Path | None = None,
                         limit: int | None = None, n_boot: int = 1000, seed: int = 0, out: str | None = None,
                         verbose: bool = False) -> tuple[str, dict[str, Any]]:
    """`esc-eval analysis seeker-check`: the config (YAML and options, checked at the door), then `check`
    (analysis.seekerview.section seeker_check_of_people: the file read, the people handed to this module's
    runner, the tables) into the run folder `out` (default runs/seeker-check-<UTC time>). Its Markdown and files."""
    from esc_eval.serve.config import load_config
    from esc_eval.sim.driver.environment import pass_driver_env
    from esc_eval.sim.driver.progress import job_progress

    cfg = load_config(config, SeekerCheckConfig, {"judge.model": judge, "scorer.model.model": scorer, "score": score})
    pass_driver_env(cfg.execution, verbose)
    out = out or str(Path("runs") / f"seeker-check-{now_utc().strftime('%Y%m%d-%H%M%S')}")
    return check(humans, out, limit=limit, n_boot=n_boot, seed=seed, run=seeker_check_runner(cfg, job_progress))
