"""Every verdict, flag and interval an analysis prints has a check against planted truth, declared
next to the analysis (as report sections are registered: analysis/results/section_registry.py):
`register_check(VerdictCheck(...))` at the end of the analysis's module, or, for a report section or
command that prints no verdict, flag or interval, `declare_no_verdict(covers, reason)`. A test holds
every registered report section and every analysis command to one or the other, so an analysis added
without a check fails it.

A check reads one replicate of planted runs (`PlantedRuns`: the run folders the real jobs wrote from
planted models, and the truth planted in them: sim/bench/planted/) and says what the analysis printed
against that truth (`Outcome`): whether it raised its flag or verdict, whether its interval holds the
truth. The validity bench (analysis/validity/) runs it over seeds and sizes, with no effect planted
(its false-positive rate) and with the effect planted (its power), and its intervals' coverage.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

NULL, PLANTED = "null", "planted"  # the two variants of every scenario: no effect, the effect at its stated size
# Who the duo scenario's judges and targets are (sim/bench/planted/scenarios.py duo, which analysis may not
# import; tests/analysis/validity holds the two to the same names): the judge the single-judge checks read,
# the panel of three, and the targets' families (J1 is of B's).
DUO_JUDGE, DUO_PANEL, DUO_FAMILIES = "J2", ("J1", "J2", "J3"), {"A": "a", "B": "b"}


@dataclass(frozen=True)
class PlantedRuns:
    """One replicate of one scenario at one size.

    paths: run folders by what they hold, as the runner names them ("runs": dialogues, scores and
    pairwise verdicts; "rounds": the by-round folders; "humans": people's scores files; "people": the
    people's own dialogues, ESConv format). truth: what was planted (sim/bench/planted/truth.py names
    its keys); effects: each planted effect in words, by key."""

    scenario: str
    variant: str
    size: int  # cards per target
    seed: int
    paths: Mapping[str, tuple[str, ...]]
    truth: Mapping[str, Any] = field(default_factory=dict)
    effects: Mapping[str, str] = field(default_factory=dict)
    n_boot: int = 1000  # the bootstrap resamples the checks ask the analyses for (their default: 1000)
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_runner(cls, data: Mapping[str, Any], n_boot: int = 1000) -> "PlantedRuns":
        """From the runner's plain mapping (the runner lives in sim, which cannot import this module)."""
        return cls(str(data["scenario"]), str(data["variant"]), int(data["size"]), int(data["seed"]),
                   {k: tuple(map(str, v)) for k, v in data["paths"].items()}, dict(data.get("truth") or {}),
                   dict(data.get("effects") or {}), int(n_boot))

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """make() the first time a check of this replicate asks for `key` (the rows loaded, an analysis
        several checks read), the same object after."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def path(self, kind: str) -> list[str]:
        if kind not in self.paths:
            raise KeyError(f"planted runs of {self.scenario!r} hold no {kind!r} (they hold {', '.join(self.paths)})")
        return list(self.paths[kind])


@dataclass(frozen=True)
class Outcome:
    """What an analysis printed on one replicate, against the truth: flag = it claimed the effect
    (None: it printed no verdict here, e.g. withheld); covered = its interval holds the truth (None:
    no interval); items = (flagged, of) for a flag raised per item (a dialogue's spoiled flag),
    counted instead of one flag per replicate; intervals = (holding, of) likewise for intervals."""

    flag: bool | None = None
    covered: bool | None = None
    items: tuple[int, int] | None = None
    intervals: tuple[int, int] | None = None  # (holding the truth, printed): several intervals per replicate
    located: bool | None = None  # its estimate within the check's `locate` tolerance of the planted truth


Measure = Callable[[PlantedRuns], Outcome]


@dataclass(frozen=True)
class VerdictCheck:
    """The check of one analysis's verdict, flag or interval.

    covers: what prints it, "section:<report section id>" and "command:<esc-eval words>" (e.g.
    "command:analysis rounds"); scenario: the planted scenario it reads (sim/bench/planted/scenarios.py);
    effect: the key of the scenario's planted effect it is about (its words come with the runs);
    flag / interval: what the flag claims and what the interval is of ("" = it prints none);
    level: the flag's nominal false-positive rate; confidence: the interval's nominal coverage;
    unit: what its size counts; locate: where the analysis also says where the effect is, what counts
    as finding it there (the bench's "located" rate, over the planted replicates)."""

    id: str
    title: str
    analysis: str
    covers: tuple[str, ...]
    scenario: str
    effect: str
    measure: Measure
    flag: str = ""
    interval: str = ""
    level: float = 0.05
    confidence: float = 0.95
    unit: str = "cards per target"
    locate: str = ""  # what "located" means where the check also places the effect (e.g. "its round within +-1")

    def __post_init__(self) -> None:
        if not (self.flag or self.interval):
            raise ValueError(f"check {self.id!r}: says neither what its flag claims nor what its interval is of")
        bad = [c for c in self.covers if not c.startswith(("section:", "command:"))]
        if bad or not self.covers:
            raise ValueError(f"check {self.id!r}: covers {bad or 'nothing'}; name 'section:<id>' or 'command:<words>'")


@dataclass(frozen=True)
class NoVerdict:
    """A report section or command with no check of its own, and why: it prints no verdict, flag or
    interval (prints_verdicts=True says it prints some that no planted check covers yet: the validity
    table lists it as unchecked)."""

    covers: tuple[str, ...]
    reason: str
    prints_verdicts: bool = False


_CHECKS: dict[str, VerdictCheck] = {}
_NONE: dict[str, NoVerdict] = {}


def register_check(check: VerdictCheck) -> None:
    """Add (or replace: an analysis's new verdict takes its old one's id) a check."""
    _CHECKS[check.id] = check


def declare_no_verdict(covers: tuple[str, ...] | list[str], reason: str, *, prints_verdicts: bool = False) -> None:
    """Say, with the reason, that these sections or commands print no verdict, flag or interval; or
    (prints_verdicts=True) that they print some no planted check covers yet, and why."""
    if not reason.strip():
        raise ValueError(f"declare_no_verdict({covers}): give the reason")
    for c in covers:
        if not c.startswith(("section:", "command:")):
            raise ValueError(f"declare_no_verdict: {c!r} is not 'section:<id>' or 'command:<words>'")
        _NONE[c] = NoVerdict(tuple(covers), reason, prints_verdicts)


def registered_checks() -> list[VerdictCheck]:
    return sorted(_CHECKS.values(), key=lambda c: c.id)


def get_check(check_id: str) -> VerdictCheck:
    if check_id not in _CHECKS:
        raise KeyError(f"no check {check_id!r}; registered: {', '.join(sorted(_CHECKS))}")
    return _CHECKS[check_id]


def no_verdicts() -> dict[str, NoVerdict]:
    return dict(_NONE)


def unchecked(covers: list[str]) -> list[str]:
    """Of `covers` ("section:<id>", "command:<words>"), those neither a check nor a declaration covers."""
    checked = {c for check in _CHECKS.values() for c in check.covers}
    return [c for c in covers if c not in checked and c not in _NONE]


# --- what several checks compute alike ---------------------------------------------------------------
def within(lo: float, hi: float, truth: float) -> bool | None:
    """Whether [lo, hi] holds the truth; None where the analysis printed no interval (NaN bounds)."""
    if lo is None or hi is None or lo != lo or hi != hi:
        return None
    return bool(lo - 1e-9 <= truth <= hi + 1e-9)


def true_ranks(means: Mapping[str, float], tol: float = 1e-9) -> dict[str, float]:
    """Rank 1 = the highest true mean; tied means share their average rank (what a rank-set must hold)."""
    out = {}
    for name, m in means.items():
        above = sum(1 for x in means.values() if x > m + tol)
        tied = sum(1 for x in means.values() if abs(x - m) <= tol)
        out[name] = above + (tied + 1) / 2
    return out


def held(flags: list[bool | None]) -> tuple[int, int] | None:
    """(intervals holding their truth, intervals printed) of one replicate, or None when none was."""
    known = [f for f in flags if f is not None]
    return (sum(known), len(known)) if known else None
