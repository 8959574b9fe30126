"""When the seeker discloses what: a card's risk emergence (sim/cards/emergence.py) as the role model's
system prompt by round, the input `run_dialogue` takes (DialogueSetup.role_prompt_from), and the check
that a run reaches every disclosure of its cards.

At a disclosure's round the role model's prompt is the strategy's prompt, the earlier disclosures as
said (`before`) and this one to say now (`now`); from the next round on, every disclosure so far as
said (sim/data/prompts/emergence.yaml `disclosure`). A disclosure of an earlier session (a course of
sessions) is said, as told in an earlier conversation (`earlier_session`), from the start of a later one.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from esc_eval.sim.cards.card import RoleCard
from esc_eval.sim.cards.emergence import Disclosure, RiskEmergence
from esc_eval.sim.prompt_files import load_prompt_file

PROMPTS = "emergence"  # sim/data/prompts/emergence.yaml


def _lang(language: str) -> str:
    return "zh" if language == "zh" else "en"


def _compose(base: str, said: Sequence[Disclosure], now: Disclosure | None, language: str, session: int = 1) -> str:
    frames = load_prompt_file(PROMPTS)["disclosure"]
    lang = _lang(language)
    lines = [frames["before" if d.session == session else "earlier_session"][lang].replace("{says}", d.says)
             for d in said]
    if now is not None:
        lines.append(frames["now"][lang].replace("{says}", now.says))
    return "\n".join([base.rstrip(), *lines])


def disclosure_prompts(base_prompt: str, emergence: RiskEmergence | None, language: str,
                       session: int = 1) -> dict[int, str]:
    """Round -> the role model's system prompt from that round on, in `session` (see the module
    docstring); {} without a risk emergence: the base prompt throughout."""
    if emergence is None:
        return {}
    said = [d for d in emergence.disclosures if d.session < session]
    out: dict[int, str] = {1: _compose(base_prompt, said, None, language, session)} if said else {}
    for d in emergence.in_session(session):
        out[d.round] = _compose(base_prompt, said, d, language, session)
        said.append(d)
        # the next disclosure's round replaces it
        out[d.round + 1] = _compose(base_prompt, said, None, language, session)
    return out


def card_prompts(card: RoleCard, base_prompt: str, session: int = 1) -> dict[int, str]:
    """disclosure_prompts of a card (its emergence, its language)."""
    return disclosure_prompts(base_prompt, card.risk_emergence, card.language, session)


def check_disclosure_rounds(cards: Iterable[RoleCard], rounds: int, sessions: int = 1) -> None:
    """ValueError in one line when a card discloses in a round (or session) the run never reaches: its
    scenario would end before its risk emerges."""
    late = [(c.id, d) for c in cards if c.risk_emergence is not None for d in c.risk_emergence.disclosures
            if d.round > rounds or d.session > sessions]
    if not late:
        return
    card_id, d = max(late, key=lambda x: (x[1].session, x[1].round))
    n = len({cid for cid, _ in late})
    if d.session > sessions:
        raise ValueError(f"card {card_id!r} discloses in session {d.session}, but the run has {sessions} session(s) "
                         f"({n} card(s) like it): give --sessions {d.session} or more (a course of sessions), or choose "
                         f"other cards (card_ids)")
    raise ValueError(f"card {card_id!r} discloses at round {d.round}, but the run has {rounds} round(s) ({n} card(s) "
                     f"disclose after round {rounds}): give --rounds {d.round} or more, or choose cards (card_ids)")


def row_disclosures(card: RoleCard) -> list[dict[str, Any]] | None:
    """The dialogue row's `risk_disclosures` (round, session, level, c_ssrs); None for a card without."""
    if card.risk_emergence is None:
        return None
    return [{"round": d.round, "session": d.session, "level": d.level, "c_ssrs": d.c_ssrs}
            for d in card.risk_emergence.disclosures]


__all__ = ["card_prompts", "check_disclosure_rounds", "disclosure_prompts", "row_disclosures"]
