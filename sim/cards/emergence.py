"""Risk that emerges mid-conversation (beyond the paper): a card whose seeker starts without a crisis and
discloses one at a set round, as data the simulation schedules (sim/emerging/schedule.py) and the
analysis reads back from the dialogue row (analysis/safety/emerging.py).

A card's `risk_emergence` says what kind of risk emerges and what it follows, and lists its
disclosures in order: at round r (the seeker's r-th turn; of session s, where a card is run as a
course of sessions) the seeker tells the assistant `says`, after which the risk is at `level`
(sim/cards/risk.py). The kinds, and the sources their scenarios follow:

  ideation        passive, then active suicidal ideation: the C-SSRS ideation items (Posner et al., 2011):
                  1 wish to be dead, 2 non-specific active thoughts, 3 thoughts with a method, 4 some intent,
                  5 a specific plan with intent; the scenarios name no method, ever
  delusion        a delusional belief brought into the conversation, then distress within it ("Lost in
                  Delusion", arXiv 2606.00975: safety interventions suppressed up to 4.5x once distress
                  comes framed by a delusion)
  boundaries      the seeker pushes the supporter's boundaries (secrecy about danger, no referrals, the only
                  support, a diagnosis), then discloses risk (TherapyProbe, arXiv 2602.22775: relational
                  failures over a conversation, e.g. validation spirals)
  harm_to_others  anger that turns into thoughts or intent of hurting a named person (MHSafeEval, arXiv
                  2604.17730: safety judged over the interaction, for the user and for others)
"""
from __future__ import annotations

from typing import Any, Literal, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from esc_eval.sim.cards.risk import RISK_LEVELS, RiskLevel, normalize_risk_level

EmergenceKind = Literal["ideation", "delusion", "boundaries", "harm_to_others"]
EMERGENCE_KINDS: tuple[str, ...] = ("ideation", "delusion", "boundaries", "harm_to_others")
KIND_TITLES = {"ideation": "Passive then active ideation", "delusion": "A delusional belief brought in",
               "boundaries": "Pushing the supporter's boundaries", "harm_to_others": "Harm to others"}
# What a scenario follows: key -> the source, as the docs and the report cite it.
SOURCES = {
    "c-ssrs": "Columbia-Suicide Severity Rating Scale, ideation items 1-5 (Posner et al., Am J Psychiatry 2011)",
    "lost-in-delusion": "Lost in Delusion: Examining LLM Safety Under User Delusions and Distress (arXiv 2606.00975)",
    "therapyprobe": "TherapyProbe: relational safety failures of mental-health chatbots (arXiv 2602.22775)",
    "mhsafeeval": "MHSafeEval: role-aware interaction-level evaluation of mental-health safety (arXiv 2604.17730)",
}


class Disclosure(BaseModel):
    """One thing the seeker discloses, and when."""

    model_config = ConfigDict(extra="forbid")
    round: int = Field(ge=1, le=50, description="The seeker's turn (round, from 1) in which it is said.")
    session: int = Field(1, ge=1, description="The session it is said in, where the card is run as a course of "
                         "sessions (1: the first, and the only one of a single-session run).")
    level: RiskLevel = Field(description="The crisis-risk level once it is said (sim/cards/risk.py): "
                             + ", ".join(RISK_LEVELS) + ".")
    c_ssrs: int | None = Field(None, ge=1, le=5, description="The C-SSRS ideation item it matches (1 wish to be dead "
                               "... 5 a specific plan with intent), for suicidal ideation; none otherwise.")
    says: str = Field(description="What the seeker now tells the assistant, as the role model is told it (never a "
                      "method of harm).")

    @field_validator("level", mode="before")
    @classmethod
    def _level(cls, v: object) -> str:
        return normalize_risk_level(str(v))

    @field_validator("says")
    @classmethod
    def _says(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("a disclosure says nothing")
        return v.strip()


class RiskEmergence(BaseModel):
    """What risk emerges in a card's conversation, when, and what the scenario follows."""

    model_config = ConfigDict(extra="forbid")
    kind: EmergenceKind = Field(description="ideation | delusion | boundaries | harm_to_others (module docstring).")
    follows: list[str] = Field(description="The sources the scenario follows: " + ", ".join(SOURCES) + ".")
    disclosures: list[Disclosure] = Field(description="In the order they are said; each in a later round (or session).")

    @field_validator("follows")
    @classmethod
    def _follows(cls, v: list[str]) -> list[str]:
        unknown = [s for s in v if s not in SOURCES]
        if unknown or not v:
            raise ValueError(f"follows {unknown or 'nothing'}; known sources: {', '.join(SOURCES)}")
        return v

    @model_validator(mode="after")
    def _ordered(self) -> "RiskEmergence":
        when = [(d.session, d.round) for d in self.disclosures]
        if not when:
            raise ValueError("a risk emergence with no disclosure")
        if any(b <= a for a, b in zip(when, when[1:])):
            raise ValueError(f"disclosures out of order (session, round): {when}; each comes in a later round")
        return self

    @property
    def onset(self) -> Disclosure:
        """The first disclosure: from its round on, the assistant has been told of the risk."""
        return self.disclosures[0]

    def level(self) -> str:
        """The most serious level the conversation reaches (RISK_LEVELS order; harm to others ranks with a plan)."""
        return max((d.level for d in self.disclosures), key=RISK_LEVELS.index)

    def in_session(self, session: int = 1) -> list[Disclosure]:
        return [d for d in self.disclosures if d.session == session]


def onset_round(disclosures: Sequence[Mapping[str, Any]] | None, session: int = 1) -> int | None:
    """The round of the first disclosure in `session` of a dialogue row's `risk_disclosures` (round,
    session, level, c_ssrs), None when there is none in it."""
    rounds = [int(d["round"]) for d in disclosures or () if int(d.get("session") or 1) == session]
    return min(rounds) if rounds else None


__all__ = ["onset_round", "Disclosure", "EMERGENCE_KINDS", "EmergenceKind", "KIND_TITLES", "RiskEmergence", "SOURCES"]
