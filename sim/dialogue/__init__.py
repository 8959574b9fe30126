"""dialogue: Figure 2's middle: ESC-Role plays the seeker of a card against the model under test.
One dialogue as a pure async function of its inputs (dialogue.py), the role-play prompts and
strategies (prompts.py), the official line format of a transcript (transcript.py), what each
participant is called with (generation.py: registry defaults, profiles) and the target's name and
system prompt (targets.py); the seeker's stop signal (seeker_stop.py) and how a dialogue ended (ending.py); the dialogues the simulated seeker spoiled, a pure function of the
turns and the card (spoiled.py), with the seeker lexicons it shares with analysis
(seeker_lexicon.py). The simulation job that runs many of them is sim/jobs/simulation.py.

Layer: the domain, beside cards/; imports serve (the chat-model seam, the registry) and
sim/prompt_files.py only: nothing of cards, judging, runs, pool or jobs."""
from esc_eval.sim.dialogue.dialogue import DialogueSetup, Participant, Turn, role_view, run_dialogue, target_view
from esc_eval.sim.dialogue.ending import AT_CAP, COMPLETED, CONTEXT_FULL, SEEKER_ENDED, dialogue_ending, end_reason
from esc_eval.sim.dialogue.seeker_stop import END_REASONS, find_end, seeker_end, stop_instruction
from esc_eval.sim.dialogue.generation import PROFILES, effective_adapter, effective_params, samples
from esc_eval.sim.dialogue.seeker_lexicon import BREAK_PATTERNS, negativity
from esc_eval.sim.dialogue.spoiled import REASON_TITLES, REASONS, card_content, spoiled_columns, spoiled_reasons
from esc_eval.sim.dialogue.prompts import (check_strategy, opener, preset_controls, resolve_strategy,
                                           roleplay_system_prompt, strategies, strategy_kind, strategy_kinds,
                                           target_system_prompt, worst_case_strategies)
from esc_eval.sim.dialogue.seeker_controls import (SeekerControlError, control_text, controls, expand_strategies,
                                                   join_strategy, parse_sweep, split_strategy, strategy_levels)
from esc_eval.sim.dialogue.targets import configured_system_prompt, registry_system_prompt, target_name, target_system
from esc_eval.sim.dialogue.transcript import (ASSISTANT_PREFIX, SEEKER_PREFIX, official_lines, parse_official_line,
                                              turns_as_lines)

__all__ = [
    "AT_CAP", "COMPLETED", "CONTEXT_FULL", "END_REASONS", "SEEKER_ENDED", "dialogue_ending", "end_reason", "find_end", "seeker_end",
    "stop_instruction",
    "ASSISTANT_PREFIX", "BREAK_PATTERNS", "REASONS", "REASON_TITLES", "card_content", "negativity", "spoiled_columns",
    "spoiled_reasons", "DialogueSetup", "configured_system_prompt", "PROFILES", "Participant", "SEEKER_PREFIX", "Turn", "effective_adapter",
    "effective_params", "official_lines", "opener", "parse_official_line", "registry_system_prompt", "role_view",
    "roleplay_system_prompt", "run_dialogue", "samples", "strategies", "strategy_kinds", "target_name",
    "target_system", "target_system_prompt", "target_view", "turns_as_lines", "worst_case_strategies",
    "SeekerControlError", "check_strategy", "control_text", "controls", "expand_strategies", "join_strategy",
    "parse_sweep", "preset_controls", "resolve_strategy", "split_strategy", "strategy_kind", "strategy_levels",
]
