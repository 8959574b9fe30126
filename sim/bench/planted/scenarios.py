"""The planted scenarios: which planted models (serve/backends/planted.py) meet on which cards, which
real jobs run on them, and what is planted, with no effect ("null") and with each effect at the size a
lab meets ("planted"). One scenario serves several checks (analysis/checks): each reads the effect it
is about (`effects`, by key, in words) and its truth (truth.py).

  duo       targets A and B, the paper's strategy; a panel of three judges scores them (J2 is the
            judge the single-judge checks read; J2 has a context limit, so long dialogues are windowed
            as vLLM's context would window them); people score a quarter of the dialogues; a pairwise
            judge compares them. planted: B a quarter point below A; J1 (family b) gives its own
            family a quarter point; J2 gives a quarter point per 100 words and is overconfident (T =
            0.5); J3 is twice as noisy as the others; the pairwise judge picks the first shown 60% of
            the time.
  rounds    target A alone, each reply scored in its context (`score --by-reply`). planted: its
            replies a quarter point worse from round 4 on.
  settings  A and B with the paper's seeker and a hard one (resistance=strong). null: the hard seeker
            costs both a quarter point (B a quarter point below A throughout); planted: it costs A
            half a point and B nothing, so their order flips under it.
  people    people's own seeker turns (ESConv) replayed as the seeker: null = people are the
            simulator; planted: each turn 12 words longer, and half the dialogues spoiled (the seeker
            says it is an AI in round 2).
  drawn     no run at all: the checks of this scenario draw their planted data themselves, directly from
            the seed and size (as the analyses' own simulations do: emerging risk's outcomes, courses'
            session scores, embeddings, seekers' ratings), and say so in their descriptions; the
            runner hands them only the replicate, the size and the effects in words.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from esc_eval.serve.registry.ref import ModelRef
from esc_eval.sim.judging.config import JudgeConfig

NULL, PLANTED = "null", "planted"
VARIANTS = (NULL, PLANTED)
GAP = 0.25  # a quarter point on the 0-4 scale
BASE = 2.5
HARD_CONTROL = "official+resistance=strong"
LONGER_WORDS = 12
SPOIL_RATE = 0.5
PEOPLE_SHARE = 0.25  # of the duo's dialogues, scored by people
J2_CONTEXT = 1000  # estimated tokens: about a third of the duo's dialogues do not fit J2 whole


@lru_cache(maxsize=4)
def people_offset(q: float = BASE) -> float:
    """The offset that puts a default planted judge's expected label at q on people's expected score
    (the argmax of its stated distribution and people's rounding clip differently): a judge on
    people's scale where nothing is planted."""
    from scipy.optimize import brentq

    from esc_eval.serve.backends import planted_math as pm
    from esc_eval.serve.backends.planted import PlantedModel

    j = PlantedModel("judge")
    people = pm.expected_person(q, j.card_sd, j.people_sd)
    spread, sd = pm.stated_spread(j.card_sd, j.sigma, j.people_sd), pm.center_sd(j.card_sd, j.sigma)
    return float(brentq(lambda o: float(pm.expected_label(q + o, sd, spread)) - people, -0.5, 0.5, xtol=1e-9))


@dataclass
class Plan:
    """One variant of one scenario: the simulation's models and strategies, the jobs on its dialogues
    and what is planted (`params`: each model's options, for truth.py; `effects`: in words)."""

    scenario: str
    variant: str
    role: dict[str, Any]
    targets: dict[str, dict[str, Any]]  # name -> planted/target options
    strategies: list[str] = field(default_factory=lambda: ["official"])
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)  # scoring: name -> planted/judge options (2+: a panel)
    families: dict[str, str] = field(default_factory=dict)  # panel judge -> family
    pairwise: dict[str, Any] | None = None  # the pairwise judge's options
    by_round: dict[str, Any] | None = None  # the by-round judge's options (reply: True = score --by-reply)
    people: bool = False  # people score a share of the dialogues
    replay: bool = False  # the seeker replays people's turns
    effects: dict[str, str] = field(default_factory=dict)

    def role_ref(self, seed: int, replay: str | None = None) -> ModelRef:
        options = {**self.role, "seed": seed, **({"replay": replay} if replay else {})}
        return ModelRef(model="planted/seeker", options=options)

    def target_refs(self, seed: int) -> list[ModelRef]:
        return [ModelRef(model="planted/target", name=name, options={**o, "seed": seed}) for name, o in self.targets.items()]

    def judge_config(self, name: str, options: dict[str, Any], seed: int) -> JudgeConfig:
        """The judge `name` with its planted options (`reply`: a per-reply judge, as `score --by-reply` runs it)."""
        return JudgeConfig(model=ModelRef(model="planted/judge", options={**options, "stream": name, "seed": seed}),
                           name=name, reads="reply" if options.get("reply") else "dialogue")


def _target(q: float, family: str, **more: Any) -> dict[str, Any]:
    return {"q": q, "family": family, "words": "40-160", **more}


def duo(variant: str) -> Plan:
    planted = variant == PLANTED
    return Plan(
        "duo", variant, role={},
        targets={"A": _target(BASE, "a"), "B": _target(BASE - (GAP if planted else 0.0), "b")},
        judges={"J1": {"family": "b", "own": GAP if planted else 0.0, "offset": people_offset()},
                "J2": {"beta": GAP if planted else 0.0, "T": 0.5 if planted else 1.0, "context": J2_CONTEXT,
                       "offset": people_offset()},
                "J3": {"sigma": 0.8 if planted else 0.4, "offset": people_offset()}},
        families={"J1": "b", "J2": "c", "J3": "d"},
        pairwise={"first": 0.6 if planted else 0.5},
        people=True,
        effects={"quality_gap": "B a quarter point below A (0-4 scale)",
                 "length": "the judge gives a quarter point per 100 words",
                 "overconfident": "the judge's P(0..4) sharpened by T = 0.5 (overconfident)",
                 "self_preference": "judge J1 gives its own family (B) a quarter point",
                 "outlier": "judge J3 twice as noisy as J1 and J2 (sd 0.8 against 0.4)",
                 "position": "the judge picks the first-shown dialogue 60% of the time"})


def rounds(variant: str) -> Plan:
    planted = variant == PLANTED
    drop = {"drop": -GAP, "from_round": 4} if planted else {}
    return Plan("rounds", variant, role={}, targets={"A": _target(BASE, "a", **drop)}, by_round={"reply": True},
                effects={"round_drop": "replies a quarter point worse from round 4 on"})


def settings(variant: str, hard_text: str) -> Plan:
    planted = variant == PLANTED
    return Plan(
        "settings", variant, role={"hard": hard_text}, strategies=["official", HARD_CONTROL],
        targets={"A": _target(BASE, "a", hard=-2 * GAP if planted else -GAP),
                 "B": _target(BASE - GAP, "b", hard=0.0 if planted else -GAP)},
        judges={"J": {}},
        effects={"setting_flip": "the hard seeker costs A half a point and B nothing (A a quarter point above B "
                                 "with the paper's seeker, a quarter point below with the hard one)"})


def people(variant: str) -> Plan:
    planted = variant == PLANTED
    role = {"longer": LONGER_WORDS, "spoil": "out_of_character", "spoil_rate": SPOIL_RATE} if planted else {}
    return Plan("people", variant, role=role, targets={"A": _target(BASE, "a")}, replay=True,
                effects={"longer": f"every seeker turn {LONGER_WORDS} words longer than the person's",
                         "spoiled": f"the seeker says it is an AI (round 2) in {SPOIL_RATE:.0%} of the dialogues"})


def drawn(variant: str) -> Plan:
    return Plan("drawn", variant, role={}, targets={},
                effects={"session_drop": "a quarter point (x25: 6.25) lost from a course's first session to its last",
                         "delusion_gap": "delusion scenarios answered appropriately 30 points less often (50% against "
                                         "80%)",
                         "embedding_shift": "the simulated seekers' embeddings shifted by 0.3 sd along one direction",
                         "seeker_agreement": "a rater correlated with people's own ratings at Spearman 0.4"})


def plan(scenario: str, variant: str) -> Plan:
    """The Plan of `scenario` ("duo", "rounds", "settings", "people", "drawn") in `variant` ("null", "planted")."""
    from esc_eval.sim.prompt_files import load_prompt_file

    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    if scenario == "settings":
        return settings(variant, load_prompt_file("seeker_controls")["lead"]["en"])
    makers = {"duo": duo, "rounds": rounds, "people": people, "drawn": drawn}
    if scenario not in makers:
        raise ValueError(f"unknown planted scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    return makers[scenario](variant)


SCENARIOS = ("duo", "rounds", "settings", "people", "drawn")
