"""`simulate --dry-run`'s count (the price before the run, dry_run.py): what a simulation would send,
built as the run builds it, nothing sent and nothing written.

Every dialogue its full rounds (a seeker that ends early, or a reply cut back to a sentence, costs
less: neither is known before the run), each reply at its model's max_tokens (an upper bound), the
prompts as the dialogue sends them (the role's system prompt, its schedule of disclosures, the
opener, the target's system prompt, the replies so far), through the dialogue's own setup and views
(sim/dialogue/dialogue.py), so the count follows the run.

A course of sessions (`sessions` > 1, sim/courses/course.py) counts each of its sessions, and the
calls between two sessions: the role model's update (none where the card gives its own), the
target's notes under memory "summary" (the notes carried in its later system prompts), and under
memory "transcripts" the earlier sessions in full in the target's system prompt (all of them: a
target whose context cannot hold them keeps fewer, and costs less). The seeker's own view
(`seeker_ratings`, sim/seekerview) counts its questions of every dialogue, each answer at its cap.
"""
from __future__ import annotations

from typing import Any, Callable

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.sim.dialogue.dialogue import DialogueSetup, Turn, role_view, target_view
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.launch.dry_run import NOTHING_WRITTEN, counter_for, price_info, priced, run_total

Filler = Callable[[int], str]
STAGES = ("role", "target", "seeker_rating")  # as the manifest's usage names them (sim/runs/usage.py)


def dry_dialogue(setup: DialogueSetup, target_system: str | None, fill: Filler, role_cap: int,
                 t_cap: int) -> tuple[list[list[ChatMessage]], list[list[ChatMessage]], list[Turn]]:
    """One dialogue's calls as run_dialogue makes them, every reply `fill`ed to its cap: (the role
    model's conversations, the target's, the turns)."""
    turns = [Turn(index=0, speaker="assistant", text=setup.opener)]
    role_convs, t_convs = [], []
    for k in range(1, setup.rounds + 1):  # the seeker speaks, then the target
        role_msgs = role_view(turns, setup.role_system_prompt)
        if setup.role_prompt_from:  # the disclosure scheduled for this round
            role_msgs[0] = ChatMessage(role="system", content=setup.role_prompt_at(k))
        role_convs.append(role_msgs)
        turns.append(Turn(index=len(turns), speaker="seeker", text=fill(role_cap)))
        t_convs.append(target_view(turns, target_system))
        turns.append(Turn(index=len(turns), speaker="assistant", text=fill(t_cap)))
    return role_convs, t_convs, turns


def course_calls(cfg: SimulationConfig, card, strategy: str, target_system: str | None, fill: Filler, role_cap: int,
                 t_cap: int) -> tuple[dict[str, list[tuple[list[ChatMessage], int]]], list[list[Turn]]]:
    """One card's course (its one dialogue when `sessions` is 1), each call with its cap, by stage; and
    each session's turns (the dialogues the seeker rates)."""
    from esc_eval.sim.courses.course import CourseSetup, Session
    from esc_eval.sim.courses.texts import (memory_from_notes, memory_from_transcripts, summary_messages,
                                            update_messages, with_memory)
    from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt
    from esc_eval.sim.emerging.schedule import card_prompts

    calls: dict[str, list[tuple[list[ChatMessage], int]]] = {"role": [], "target": []}
    if cfg.sessions == 1:  # the single-session dialogue, set up as the simulation job sets it up
        prompt = roleplay_system_prompt(card.text, card.language, strategy, seeker_stop=cfg.seeker_stop)
        setups = [DialogueSetup(prompt, opener(card.language, strategy), rounds=cfg.rounds,
                                role_prompt_from=card_prompts(card, prompt))]
        r, t, turns = dry_dialogue(setups[0], target_system, fill, role_cap, t_cap)
        calls["role"] += [(c, role_cap) for c in r]
        calls["target"] += [(c, t_cap) for c in t]
        return calls, [turns]
    course = CourseSetup(card_text=card.text, language=card.language, sessions=cfg.sessions, strategy=strategy,
                         memory=cfg.memory, card_updates=tuple(card.session_updates or ()), rounds=cfg.rounds)
    done: list[tuple[Session, list[Turn]]] = []
    updates: list[str] = []
    notes: str | None = None
    for k in range(1, cfg.sessions + 1):
        s = Session(index=k)
        if k > 1:  # between sessions (course.py _between): the update, then the target's memory
            last = done[-1][1]
            own = card.session_updates or ()
            if len(own) >= k - 1 and str(own[k - 2]).strip():
                updates.append(str(own[k - 2]).strip())
            else:
                calls["role"].append((update_messages(card.text, updates, last, k, card.language), role_cap))
                updates.append(fill(role_cap))
            if cfg.memory == "summary":
                calls["target"].append((summary_messages(notes, last, k - 1, card.language), t_cap))
                notes = fill(t_cap)
                s.memory_text = memory_from_notes(notes, card.language)
            elif cfg.memory == "transcripts":
                s.memory_text = memory_from_transcripts([(d.index, ts) for d, ts in done], card.language)
        r, t, turns = dry_dialogue(course.dialogue(s, updates), with_memory(target_system, s.memory_text), fill,
                                   role_cap, t_cap)
        calls["role"] += [(c, role_cap) for c in r]
        calls["target"] += [(c, t_cap) for c in t]
        done.append((s, turns))
    return calls, [ts for _, ts in done]


def rating_calls(cfg: SimulationConfig, card, strategy: str, dialogues: list[list[Turn]]) -> list[tuple[list[ChatMessage], int]]:
    """The seeker's own view of each dialogue (simulation.py rate_dialogues): each question, its answer at its cap."""
    from esc_eval.sim.dialogue.prompts import roleplay_system_prompt
    from esc_eval.sim.runs.records import SEEKER_RATING_ITEMS
    from esc_eval.sim.seekerview.prompts import seeker_messages
    from esc_eval.sim.seekerview.rating import rating_params, rating_plan

    cap = rating_params(rating_plan(cfg.role)).max_tokens
    system = roleplay_system_prompt(card.text, card.language, strategy, seeker_stop=cfg.seeker_stop)
    return [(seeker_messages(system, [{"speaker": t.speaker, "text": t.text} for t in turns], card.language, q), cap)
            for turns in dialogues for q in SEEKER_RATING_ITEMS]


def simulate_estimate(cfg: SimulationConfig) -> dict[str, Any]:
    """What running `cfg` would send and cost (see the module docstring); nothing sent or written."""
    from esc_eval.sim.dialogue.generation import effective_params
    from esc_eval.sim.dialogue.targets import configured_system_prompt, target_name, target_system
    from esc_eval.sim.jobs.simulation_items import checked_inputs

    cards = checked_inputs(cfg, None)
    role_cap = effective_params(cfg.role, cfg.profile).max_tokens
    role_spec, role_counter = counter_for(cfg.role)
    fill = _filler(role_counter)
    per_seed = len(cfg.seeds)
    tallies: dict[tuple[str, str], dict[str, Any]] = {}

    def tally(stage: str, name: str, ref, spec, counter) -> dict[str, Any]:
        return tallies.setdefault((stage, name), {"ref": ref, "spec": spec, "counter": counter, "calls": 0,
                                                  "prompt_tokens": 0, "completion_tokens": 0})

    def add(tal: dict[str, Any], convs: list[tuple[list[ChatMessage], int]]) -> None:
        tal["calls"] += per_seed * len(convs)
        tal["prompt_tokens"] += per_seed * sum(tal["counter"].prompts([c for c, _ in convs]))
        tal["completion_tokens"] += per_seed * sum(cap for _, cap in convs)

    dialogues = 0
    for t in cfg.targets:
        t_spec, t_counter = counter_for(t)
        t_cap = effective_params(t, cfg.profile).max_tokens
        role_t = tally("role", cfg.role.model, cfg.role, role_spec, role_counter)
        tgt_t = tally("target", target_name(t), t, t_spec, t_counter)
        for strategy in cfg.seeker_strategies:
            for card in cards:
                dialogues += per_seed * cfg.sessions
                system = target_system(configured_system_prompt(t), card.language) or None
                calls, sessions = course_calls(cfg, card, strategy, system, fill, role_cap, t_cap)
                add(role_t, calls["role"])
                add(tgt_t, calls["target"])
                if cfg.seeker_ratings:  # the rater is named as the role model's target name (seekerview/job.py)
                    add(tally("seeker_rating", cfg.role.target_name, cfg.role, role_spec, role_counter),
                        rating_calls(cfg, card, strategy, sessions))
    rows = []
    for (stage, name), tal in tallies.items():
        info = price_info(tal["ref"], cfg.prices)
        counts = {k: tal[k] for k in ("calls", "prompt_tokens", "completion_tokens")}
        costs = priced(counts, info)
        rows.append({"stage": stage, "model": name, "spec": tal["spec"], "tokens": tal["counter"].how, **counts,
                     "price": info, "cost_usd": costs, "this_run_usd": costs["online"]})
    course = (f"; a course of {cfg.sessions} sessions per card: each session counted, and between two sessions the "
              f"role model's update (none where the card gives one)"
              + {"summary": " and the target's notes (carried in its later system prompts)",
                 "transcripts": ", the earlier sessions in full in the target's system prompt (all of them: a target "
                                "whose context holds fewer costs less)"}.get(cfg.memory, "")
              if cfg.sessions > 1 else "")
    rated = "; the seeker's own view: each question of every dialogue, its answer at its cap" if cfg.seeker_ratings else ""
    return {"job": "simulate", "dialogues": dialogues, "sessions": cfg.sessions, "memory": cfg.memory, "models": rows,
            "assumed": "every dialogue its full rounds, every reply at its model's max_tokens (an upper bound: a seeker "
                       "that ends early or a reply that stops early costs less, neither known before the run)"
                       + course + rated + "; one call per dialogue is a judge's mode (score --dry-run); a batch API "
                       "fits a dialogue poorly (each turn waits on the last: one batch per turn)",
            **run_total(rows), "written": NOTHING_WRITTEN}


def _filler(counter) -> Filler:
    """A reply of exactly n tokens of the model (its tokenizer's one-token word repeated), or n x 4 bytes."""
    if not counter.exact:
        return lambda n: "word " * n
    return lambda n: " a" * n if counter.text(" a" * 8) == 8 else "a " * n


__all__ = ["course_calls", "dry_dialogue", "rating_calls", "simulate_estimate"]
