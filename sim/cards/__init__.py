"""cards: the role cards of Figure 2's first box: the card model and its files (ours and the official
JSON, the shipped sets), the 3-tier problem taxonomy (Table 9) and the crisis-risk levels (beyond the
paper), with risk that emerges at a set round (emergence.py). Building cards from source datasets is sim/cardbuild/.

Layer: the domain's bottom, beside dialogue/; imports serve's config base and sim/prompt_files.py
(the shipped data) only: nothing of dialogue, judging, runs, pool or jobs."""
from esc_eval.sim.cards.card import (CardError, RoleCard, card_file_path, card_to_official, emerging_risk_cards,
                                     load_cards, parse_card_text, safety_cards, sample_cards, shipped_cards_path, validate_card_files,
                                     validate_cards, write_cards)
from esc_eval.sim.cards.emergence import EMERGENCE_KINDS, KIND_TITLES, SOURCES, Disclosure, RiskEmergence
from esc_eval.sim.cards.risk import RISK_LEVELS, RISK_TITLES, normalize_risk_level
from esc_eval.sim.cards.taxonomy import Category, Taxonomy, load_taxonomy

__all__ = [
    "CardError", "Category", "Disclosure", "EMERGENCE_KINDS", "KIND_TITLES", "RiskEmergence", "SOURCES",
    "emerging_risk_cards", "RISK_LEVELS", "RISK_TITLES", "RoleCard", "Taxonomy", "card_file_path", "card_to_official",
    "load_cards", "load_taxonomy", "normalize_risk_level", "parse_card_text", "safety_cards", "sample_cards",
    "shipped_cards_path", "validate_card_files", "validate_cards", "write_cards",
]
