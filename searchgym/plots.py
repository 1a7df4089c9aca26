"""PNG plots of results people look at."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from searchgym.errors import ConfigError


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


NAMESPACES = ("reward", "loss", "rollout", "eval")


def plot_training_curves(
    metrics: Sequence[Mapping[str, float]], out_dir: str | os.PathLike, *, window: int | None = None
) -> list[Path]:
    """``OUT_DIR/{namespace}.png`` per metric namespace (reward, loss, rollout, eval, then any
    other), a panel per metric: x = step, the raw values light and, on top, the mean of the last
    ``window`` points (default: a tenth of the points, 1 to 50; fewer at the start); a metric ``m``
    logged with ``m_low`` and ``m_high`` (an interval, e.g. ``eval/em``) gets them as a band.
    ``metrics`` are rows ``{"step": s, "ns/name": value, ...}`` as
    `searchgym.agents.train.metrics_log.read_metrics` returns them; non-finite values are left
    out. Returns the paths written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if window is not None and window < 1:
        raise ConfigError(f"window must be a positive number of points, got {window}")
    series: dict[str, dict[str, tuple[list[float], list[float]]]] = {}
    for row in metrics:
        for name, value in row.items():
            if name == "step" or value is None or not math.isfinite(value):
                continue
            namespace, _, metric = name.partition("/")
            xs, ys = series.setdefault(namespace, {}).setdefault(metric or namespace, ([], []))
            xs.append(row["step"])
            ys.append(value)
    order = sorted(series, key=lambda ns: (NAMESPACES.index(ns) if ns in NAMESPACES else len(NAMESPACES), ns))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for namespace in order:
        bands = {m[: -len("_low")] for m in series[namespace] if m.endswith("_low")}
        bands = {m for m in bands if m in series[namespace] and f"{m}_high" in series[namespace]}
        panels = {m: v for m, v in series[namespace].items() if m.removesuffix("_low").removesuffix("_high")
                  not in bands or m in bands}  # fmt: skip
        cols = min(3, len(panels))
        rows = -(-len(panels) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False)
        for ax, (metric, (xs, ys)) in zip(axes.flat, panels.items()):
            w = window or max(1, min(50, len(ys) // 10))
            sums = np.cumsum(np.concatenate([[0.0], ys]))
            starts = np.maximum(np.arange(1, len(ys) + 1) - w, 0)
            smooth = (sums[1:] - sums[starts]) / (np.arange(1, len(ys) + 1) - starts)  # the last w or fewer
            ax.plot(xs, ys, color="C0", alpha=0.3, linewidth=0.8, marker="." if len(xs) < 50 else None)
            ax.plot(xs, smooth, color="C0", linewidth=1.6)
            if metric in bands:  # its 95 % interval, at the points where it was measured
                (lx, low), (_, high) = series[namespace][f"{metric}_low"], series[namespace][f"{metric}_high"]
                ax.fill_between(lx, low, high, color="C0", alpha=0.15, linewidth=0, label="95% interval")
                ax.legend(fontsize=7, frameon=False)
            ax.set_title(f"{namespace}/{metric}" + (f"  (mean of last {w})" if w > 1 else ""), fontsize=9)
            ax.set_xlabel("step", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        for ax in axes.flat[len(panels) :]:
            ax.set_visible(False)
        fig.tight_layout()
        path = out_dir / (re.sub(r"[^\w.-]+", "_", namespace) + ".png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def plot_pareto(
    points: Mapping[str, tuple[float, float]],
    front: Sequence[str],
    picks: Mapping[str, Sequence[float]],
    path: str | os.PathLike,
    *,
    xlabel: str = "mean searches per question (cost)",
    ylabel: str = "EM (accuracy)",
    title: str = "",
) -> Path:
    """Accuracy against cost: ``points`` maps a name to ``(cost, accuracy)`` (a marker each,
    named in the legend; points that coincide share one); ``front`` (names, by increasing cost) is
    drawn as a line; ``picks`` maps a name to the cost weights λ at which it earns the most
    reward, ringed and labelled ``λ=…`` above and to the left, where no point can be (a point
    there would dominate the front)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unknown = sorted((set(front) | set(picks)) - set(points))
    if unknown:
        raise ConfigError(f"front and picks name points that are not given: {unknown}")
    if not points:
        raise ConfigError("no points to plot")
    fig, ax = plt.subplots(figsize=(7.6, 4.4))
    xs = [points[n][0] for n in front]
    ax.plot(xs, [points[n][1] for n in front], color="0.6", linewidth=1.6, zorder=1, label="Pareto front")
    names_at: dict[tuple[float, float], list[str]] = {}
    for name, xy in points.items():
        names_at.setdefault(xy, []).append(name)
    for i, ((cost, accuracy), names) in enumerate(names_at.items()):
        marker = "os^Dvp*hX<>"[i % 11]
        ax.scatter(cost, accuracy, s=40, marker=marker, color=f"C{i % 10}", zorder=2, label=" = ".join(names))
    for name, weights in picks.items():
        cost, accuracy = points[name]
        ax.scatter(cost, accuracy, s=200, facecolors="none", edgecolors="C3", linewidths=1.4, zorder=3)
        label = "λ=" + ", ".join(f"{w:g}" for w in weights)
        ax.annotate(
            label,
            (cost, accuracy),
            textcoords="offset points",
            xytext=(-8, 6),
            ha="right",
            fontsize=7,
            color="C3",
        )
    ax.scatter([], [], s=120, facecolors="none", edgecolors="C3", label="best reward at λ")
    costs = [c for c, _ in points.values()]
    span = max(max(costs) - min(costs), 1.0)
    ax.set_xlim(min(costs) - 0.15 * span, max(costs) + 0.08 * span)
    ax.set_ylim(-0.02, min(1.05, max(a for _, a in points.values()) * 1.15 + 0.05))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
