"""sim.cardbuild.stages: the steps a source item goes through, each as its prompt and the parser of
its reply: extraction (Figures 6/7) into card fields normalised to the paper's vocabularies
(fields.py), the Figure 8 filter, near-duplicate removal (dedup.py, no LLM), the Table 9
classification, and the crisis-risk label (beyond the paper)."""
from esc_eval.sim.cardbuild.stages.extraction import extraction_messages, source_dialogue_text
from esc_eval.sim.cardbuild.stages.fields import CardFields, CardFieldsError, age_band, normalize_age, normalize_gender, parse_card_fields
from esc_eval.sim.cardbuild.stages.filtering import FilterVerdict, filter_choices, filter_messages, parse_filter_reply, render_card
from esc_eval.sim.cardbuild.stages.dedup import Duplicate, find_near_duplicates, jaccard, shingles
from esc_eval.sim.cardbuild.stages.classify import (
    Classification, classification_messages, classify_reply, keyword_category, leaves_for, parse_category_reply,
)
from esc_eval.sim.cardbuild.stages.risk import RiskLabel, parse_risk_reply, risk_choices, risk_messages

__all__ = [
    "CardFields", "CardFieldsError", "Classification", "Duplicate", "FilterVerdict", "RiskLabel", "age_band",
    "classification_messages", "classify_reply", "extraction_messages", "filter_choices", "filter_messages",
    "find_near_duplicates", "jaccard", "keyword_category", "leaves_for", "normalize_age", "normalize_gender",
    "parse_card_fields", "parse_category_reply", "parse_filter_reply", "parse_risk_reply", "render_card",
    "risk_choices", "risk_messages", "shingles", "source_dialogue_text",
]
