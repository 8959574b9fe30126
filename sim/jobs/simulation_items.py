"""A simulation before it runs: the cards it selects, its work items (cards x targets x strategies x
seeds, expanded lazily), and what its dialogues ask of the models: the first call of each (checked
against the models' limits before anything starts) and the tokens a dialogue holds on each engine
(what the workers' items in flight and the Serve replicas are sized by, pool/capacity.py).

A dialogue's demand on an engine: it has one call in flight, on the role's or the target's engine.
A call holds its context (that engine's system prompt, the opener for the role, the answers so far)
plus its own answer at its max_tokens cap. Tokens per sequence = the mean of that over the engine's
calls in one dialogue (dialogues at every stage are in flight together), at most max_model_len.
Counting every dialogue in flight against each engine leaves headroom for the late rounds' longer
calls (really a dialogue holds one sequence on one engine at a time).
"""
from __future__ import annotations

import math
import os
from typing import Any, Iterator

from esc_eval.serve.chat.interface import ChatMessage
from esc_eval.serve.registry.ref import ModelRef
from esc_eval.serve.plan.planner import placement_from_env, ref_key
from esc_eval.sim.cards.card import RoleCard, card_file_path, load_cards
from esc_eval.sim.dialogue.generation import effective_params, samples
from esc_eval.sim.dialogue.prompts import opener, roleplay_system_prompt
from esc_eval.sim.dialogue.targets import configured_system_prompt, target_name, target_system
from esc_eval.sim.emerging.schedule import check_disclosure_rounds
from esc_eval.sim.jobs.config import SimulationConfig
from esc_eval.sim.driver.calls import PlannedModel
from esc_eval.sim.pool.capacity import Demand, estimate_tokens
from esc_eval.sim.runs.records import course_id, dialogue_id, session_dialogue_id
from esc_eval.sim.runs.storage import LocalStorage, is_uri


def select_cards(cfg: SimulationConfig) -> list[RoleCard]:
    cards = load_cards(card_file_path(cfg.cards))
    if cfg.languages:
        cards = [c for c in cards if c.language in cfg.languages]
    if cfg.card_ids:
        wanted = set(cfg.card_ids)
        cards = [c for c in cards if c.id in wanted]
    if cfg.limit:
        cards = cards[: cfg.limit]
    return cards


def checked_inputs(cfg: SimulationConfig, run_dir: str | os.PathLike[str] | None) -> list[RoleCard]:
    """The run's cards, after the input a user mistypes is checked, each failing in one line (ValueError)
    before the models are (asking vLLM about them imports it, seconds): the seeds, the card file and
    selection, and a local output folder that cannot be made (found by looking: nothing is created; a
    store's own check writes, so it runs before the first row)."""
    check_seeds(cfg)
    cards = select_cards(cfg)
    if not cards:
        raise ValueError(f"no role cards selected from {cfg.cards!r} (check languages / card_ids / limit)")
    check_disclosure_rounds(cards, cfg.rounds, cfg.sessions)  # risk disclosed at a round and session the run reaches
    if run_dir is not None and not is_uri(str(run_dir)):
        LocalStorage(run_dir).refuse_unwritable()
    return cards


def targets_side_by_side(cfg: SimulationConfig) -> bool:
    """Whether the run's plan put its vLLM targets in Serve deployments that are all up at once
    (ESC_EVAL_PLACEMENT in the execution's environment), rather than in the workers' engines."""
    mapping = placement_from_env(cfg.execution.env)
    placed = [mapping.get(ref_key(t.model, t.options), {}) for t in cfg.targets]
    return any("serve" in p for p in placed) and not any("engine" in p for p in placed)


def iter_items(cfg: SimulationConfig, cards: list[RoleCard], skip: set[str]) -> Iterator[dict[str, Any]]:
    """Work items, generated lazily (memory stays flat for any product size): a dialogue each, or with
    `sessions` > 1 a course each (its sessions depend on each other: one item runs them in order, and a
    course is done when every session has its row); target by target, so a
    worker holding one target engine at a time (sim/pool/participants.py TargetEngines) switches once each,
    or the targets in turn for each card when they are Serve deployments side by side (every target's
    replicas busy at once)."""
    def item(t_index: int, target: ModelRef, seed: int, strategy: str, card: RoleCard) -> dict[str, Any] | None:
        name = target_name(target)
        if cfg.sessions > 1:  # a course: one item, its sessions in order (sim/jobs/simulation_courses.py)
            ids = [session_dialogue_id(card.id, name, cfg.role.model, strategy, seed, k) for k in range(1, cfg.sessions + 1)]
            if all(i in skip for i in ids):
                return None
            return {"dialogue_id": ids[0], "course_id": course_id(card.id, name, cfg.role.model, strategy, seed),
                    "session_ids": ids, "card": card.model_dump(), "target_index": t_index, "strategy": strategy,
                    "seed": seed}
        did = dialogue_id(card.id, name, cfg.role.model, strategy, seed)
        return None if did in skip else {"dialogue_id": did, "card": card.model_dump(), "target_index": t_index,
                                         "strategy": strategy, "seed": seed}

    targets = list(enumerate(cfg.targets))
    if targets_side_by_side(cfg):
        order = ((t, seed, strategy, card) for seed in cfg.seeds for strategy in cfg.seeker_strategies for card in cards
                 for t in targets)
    else:
        order = ((t, seed, strategy, card) for t in targets for seed in cfg.seeds for strategy in cfg.seeker_strategies
                 for card in cards)
    for (t_index, target), seed, strategy, card in order:
        it = item(t_index, target, seed, strategy, card)
        if it is not None:
            yield it


def count_items(cfg: SimulationConfig, cards: list[RoleCard]) -> int:
    return len(cfg.seeds) * len(cfg.seeker_strategies) * len(cfg.targets) * len(cards)


def check_seeds(cfg: SimulationConfig) -> None:
    """More than one seed under greedy decoding would give identical dialogues: refuse."""
    if len(cfg.seeds) < 2:
        return
    if not any(samples(effective_params(ref, cfg.profile)) for ref in [cfg.role, *cfg.targets]):
        raise ValueError(
            f"seeds: {len(cfg.seeds)} seeds under greedy decoding (profile {cfg.profile!r}, temperature 0 for the role "
            f"and every target) would repeat the same dialogues; give one seed, or sample (profile 'release' with "
            f"sampling models, or params.temperature > 0)")


def planned_models(cfg: SimulationConfig, cards: list[RoleCard]) -> list[PlannedModel]:
    """The role and targets as their calls go out, with their first call's messages (the first card)
    to check a tokens-per-minute limit against."""
    card = cards[0]
    strategy = cfg.seeker_strategies[0]
    role_first = [ChatMessage(role="system", content=roleplay_system_prompt(card.text, card.language, strategy,
                                                                            seeker_stop=cfg.seeker_stop)),
                  ChatMessage(role="user", content=opener(card.language, strategy))]
    out = [PlannedModel(cfg.role, effective_params(cfg.role, cfg.profile), role_first)]
    for t in cfg.targets:
        system = target_system(configured_system_prompt(t), card.language)
        # the target's first call: its system prompt and the seeker's first line (about the card's length)
        first = ([ChatMessage(role="system", content=system)] if system else []) + [ChatMessage(role="user", content=card.text)]
        out.append(PlannedModel(t, effective_params(t, cfg.profile), first))
    return out


def dialogue_demand(cfg: SimulationConfig, cards: list[RoleCard]) -> tuple[Demand, list[Demand]]:
    """What a dialogue holds on the role's and on each target's engine (sim/pool/capacity.py): the role's
    system prompt averaged over the cards, the opener, the targets' system prompts, the max_tokens caps."""
    strategy, sample = cfg.seeker_strategies[0], cards[:200]
    role_system = sum(estimate_tokens(roleplay_system_prompt(c.text, c.language, strategy, seeker_stop=cfg.seeker_stop))
                      for c in sample) // len(sample)
    systems = []
    for t in cfg.targets:
        systems.append(estimate_tokens(target_system(configured_system_prompt(t), sample[0].language)))
    # a course whose target keeps the earlier transcripts holds them in its calls: counted as that many rounds more
    rounds = cfg.rounds * (cfg.sessions if cfg.memory == "transcripts" else 1)
    return dialogue_demands(cfg.role.model, [t.model for t in cfg.targets], role_system=role_system,
                            opener=estimate_tokens(opener(sample[0].language, strategy)), rounds=rounds,
                            role_cap=effective_params(cfg.role, cfg.profile).max_tokens, target_systems=systems,
                            target_caps=[effective_params(t, cfg.profile).max_tokens for t in cfg.targets])


def expected_seq_tokens(cfg: SimulationConfig) -> dict[str, int]:
    """Each configured model's expected sequence length (tokens a call holds, as dialogue_demand
    counts it), by the plan's ref key: what a Serve replica of it is sized by (pool/capacity.py)."""
    cards = select_cards(cfg)
    if not cards:
        return {}
    role, targets = dialogue_demand(cfg, cards)
    out = {ref_key(t.model, t.options): d.tokens_per_seq for t, d in zip(cfg.targets, targets)}
    key = ref_key(cfg.role.model, cfg.role.options)
    out[key] = max(out.get(key, 0), role.tokens_per_seq)
    return out


def dialogue_demands(role: str, targets: list[str], *, role_system: int, opener: int, rounds: int, role_cap: int,
                     target_systems: list[int], target_caps: list[int]) -> tuple[Demand, list[Demand]]:
    """The role's and each target's demand per dialogue (tokens as estimated by the caller). The role
    speaks first after the opener: call j (1-based) is the role's when j is odd, the target's when even."""
    role_means, target_demands = [], []
    for name, t_system, t_cap in zip(targets, target_systems, target_caps):
        answers, role_calls, target_calls = 0, [], []
        for j in range(1, 2 * rounds + 1):
            answers += role_cap if j % 2 else t_cap
            (role_calls if j % 2 else target_calls).append((role_system + opener if j % 2 else t_system) + answers)
        role_means.append(sum(role_calls) / len(role_calls))
        target_demands.append(Demand(name, 1, math.ceil(sum(target_calls) / len(target_calls))))
    return Demand(role, 1, math.ceil(max(role_means, default=role_system + opener + role_cap))), target_demands


def calls_per_item(cfg: SimulationConfig) -> int:
    """Model calls of one item: two a round (the opener is none); a course's sessions, and between two of
    them the role's update and, with memory 'summary', the target's notes (at most: a card's own updates
    need no call)."""
    between = 1 + (cfg.memory == "summary")
    return 2 * cfg.rounds * cfg.sessions + between * (cfg.sessions - 1)
