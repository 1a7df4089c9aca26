"""PNG plots of results people look at."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def plot_metric_by_group(
    results: Mapping[str, Mapping[str, Mapping[str, float]]],
    path: str | os.PathLike,
    *,
    metric: str = "em",
    group_label: str = "hops",
    title: str = "",
) -> Path:
    """Grouped bars: one group per key of ``results[agent]``, one bar per agent.

    ``results`` maps agent → group → metrics (as `searchgym.agents.summarize` returns them).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agents = list(results)
    groups = sorted({g for per_agent in results.values() for g in per_agent}, key=str)
    width = 0.8 / max(len(agents), 1)
    fig, ax = plt.subplots(figsize=(1.6 + 1.2 * len(groups), 3.6))
    for i, agent in enumerate(agents):
        xs = [j + (i - (len(agents) - 1) / 2) * width for j in range(len(groups))]
        ys = [results[agent].get(g, {}).get(metric, 0.0) for g in groups]
        bars = ax.bar(xs, ys, width, label=agent)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks(range(len(groups)), [str(g) for g in groups])
    ax.set_xlabel(group_label)
    ax.set_ylabel(metric.upper())
    ax.set_ylim(0, 1.1)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
