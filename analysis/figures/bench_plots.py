"""Figures of an `esc-eval bench serve` result (its JSON, as a dict): latency against throughput
over the sweep's levels, and time to first token by turn index, one line per arm."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from esc_eval.analysis.figures.plots import NothingToPlot, _save, plt


def _arms(result: dict[str, Any]) -> list[dict[str, Any]]:
    arms = [a for a in result.get("arms") or [] if any(lv.get("completed") for lv in a.get("levels") or [])]
    if not arms:
        raise NothingToPlot("the benchmark finished no request")
    return arms


def latency_throughput_plot(result: dict[str, Any], path: str | Path) -> Path:
    """Mean TTFT and mean end-to-end latency (ms) against output tokens/s, a point per level."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for arm in _arms(result):
        levels = [lv for lv in arm["levels"] if lv.get("completed")]
        x = [lv["output_throughput"] for lv in levels]
        for ax, key in zip(axes, ("mean_ttft_ms", "mean_e2el_ms")):
            ax.plot(x, [lv[key] for lv in levels], marker="o", label=arm["name"])
            for lv, xi in zip(levels, x):
                shape = f"c={lv['max_concurrency']}" if lv.get("request_rate") == "inf" else f"{lv['request_rate']}/s"
                ax.annotate(shape, (xi, lv[key]), textcoords="offset points", xytext=(4, 4), fontsize=7)
    for ax, title in zip(axes, ("time to first token", "end-to-end latency")):
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel("ms (mean)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"bench serve: {result.get('workload')} on {result.get('model_id')}")
    return _save(fig, path)


def ttft_by_turn_plot(result: dict[str, Any], path: str | Path) -> Path:
    """Mean TTFT per turn index (a unit's k-th request), one line per arm and level."""
    fig, ax = plt.subplots(figsize=(6, 4))
    drawn = 0
    for arm in _arms(result):
        for lv in arm["levels"]:
            turns = lv.get("ttft_by_turn") or {}
            if not turns:
                continue
            keys = sorted(turns, key=int)
            shape = f"c={lv['max_concurrency']}" if lv.get("request_rate") == "inf" else f"{lv['request_rate']}/s"
            ax.plot([int(k) for k in keys], [turns[k]["mean_ttft_ms"] for k in keys], marker="o",
                    label=f"{arm['name']} {shape}")
            drawn += 1
    if not drawn:
        plt.close(fig)
        raise NothingToPlot("no request finished")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("turn index (the unit's k-th request)")
    ax.set_ylabel("mean TTFT (ms)")
    ax.set_title(f"TTFT by turn: {result.get('workload')}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def bench_serve_plots(result: dict[str, Any], stem: str | Path) -> list[Path]:
    """Both figures as <stem>_latency_throughput.png and <stem>_ttft_by_turn.png (what has data)."""
    stem = Path(stem)
    out = []
    for name, fn in (("latency_throughput", latency_throughput_plot), ("ttft_by_turn", ttft_by_turn_plot)):
        try:
            out.append(fn(result, stem.with_name(f"{stem.name}_{name}.png")))
        except NothingToPlot:
            continue
    return out
