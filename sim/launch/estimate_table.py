"""A dry run's estimate (dry_run.py) as a table on the terminal: per judge and rubric mode (score) or per
model (simulate), the calls, prompt and completion tokens, and the price online and batch."""
from __future__ import annotations


from rich.table import Table

from esc_eval.sim.console import console

NOTHING_SENT = "nothing sent, nothing written"


def _usd(value) -> str:
    if value is None:
        return "n/a"
    return f"${value:,.2f}" if value == 0 or value >= 0.01 else f"${value:.4f}"


def show_estimate(estimate: dict) -> None:
    """A dry run's estimate (sim/launch/dry_run.py) as a table on stderr: per judge and rubric mode (score)
    or per model (simulate), calls, prompt and completion tokens, and the price online and batch."""
    t = Table(title=f"{estimate['job']} --dry-run: {NOTHING_SENT}", pad_edge=False)
    for c in ("Model", "Mode" if estimate["job"] == "score" else "Stage", "Calls", "Prompt tokens", "Completion tokens",
              "Online", "Batch"):
        t.add_column(c, justify="left" if c in ("Model", "Mode", "Stage") else "right")
    notes = []
    if estimate["job"] == "score":
        for j in estimate["judges"]:
            for mode, m in j["modes"].items():
                mark = f" (this run, {j['transport']})" if mode == j["rubric_mode"] else ""
                t.add_row(j["judge"], mode + mark, f"{m['calls']:,}", f"{m['prompt_tokens']:,}", f"{m['completion_tokens']:,}",
                          _usd(m["cost_usd"]["online"]), _usd(m["cost_usd"]["batch"]))
            notes.append(f"{j['judge']}: tokens {j['tokens']}; price: {j['price']['source']}"
                         + (f", read {j['price']['read_on']}" if j["price"]["read_on"] else ""))
    else:
        for m in estimate["models"]:
            t.add_row(m["model"], m["stage"], f"{m['calls']:,}", f"{m['prompt_tokens']:,}", f"{m['completion_tokens']:,}",
                      _usd(m["cost_usd"]["online"]), _usd(m["cost_usd"]["batch"]))
            notes.append(f"{m['model']}: tokens {m['tokens']}; price: {m['price']['source']}"
                         + (f", read {m['price']['read_on']}" if m["price"]["read_on"] else ""))
        notes.append(estimate["assumed"])
    console.print(t)
    for line in dict.fromkeys(notes):  # a model in two stages is said once
        console.print(f"  {line}")
    console.print(f"  estimate for this run: {_usd(estimate['estimate_usd'])}"
                  + (f"; no price for {', '.join(estimate['unpriced'])}" if estimate["unpriced"] else ""))


__all__ = ["NOTHING_SENT", "show_estimate"]
