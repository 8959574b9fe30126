"""analysis.report: the HTML and Markdown report of one or more runs (`report.py`: `write_report`,
`report.html.jinja`) and the paper's sections in it (`sections.py`: summary, leaderboard,
categories, seeds, distributions, comparisons, health, throughput, fidelity, cards, samples).

Layer: above compare, trust, seekers and the rooms below them; only bench imports it. jinja2 and
matplotlib load on first use of `write_report`."""


def __getattr__(name: str):
    if name == "write_report":
        from esc_eval.analysis.report.report import write_report

        return write_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["write_report"]
