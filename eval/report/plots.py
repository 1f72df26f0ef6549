"""PNG plots of a report (matplotlib, Agg backend): reliability, step thirds, category, skill, evidence.

Legibility rules every figure follows: each panel has its own legend (agents are told apart by
colour and marker, never by text placed next to points, which overlaps when points coincide);
coincident points stay visible (hollow markers of decreasing size, dodged error bars); axes of
scores and skills fit the data (matplotlib's data limits with a margin), bars start at 0, and
probability axes span [0, 1] (with a small margin, so that markers on 0 and 1 are not clipped). Each `figure_*` function returns the figure (or None when the
analysis has nothing to draw) so tests can inspect it; `draw_plots` writes them as PNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from forecast_env.store import atomic_path

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
DPI = 90


def _ok(x: Any) -> bool:
    return x is not None and isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _style(agents: Sequence[str]) -> dict[str, dict[str, Any]]:
    """One colour and marker per agent, the same in every figure of a report."""
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {a: {"color": colours[i % len(colours)], "marker": MARKERS[i % len(MARKERS)]}
            for i, a in enumerate(sorted(agents))}


def _save(fig: Figure, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def _all_agents(res: Mapping[str, Any]) -> list[str]:
    return sorted({r["agent"] for r in res.get("agents") or []}
                  | set((res.get("calibration") or {}).keys())
                  | {r["agent"] for r in (res.get("skill") or {}).get("table") or []})


def figure_reliability(res: Mapping[str, Any]) -> Figure | None:
    """Reliability diagrams: binary P(first option) and multi-option one-vs-rest pairs, every agent."""
    cal = res.get("calibration") or {}
    if not cal:
        return None
    style = _style(_all_agents(res))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    for ax, kind in zip(axes, ("binary", "multi")):
        ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--", label="perfect calibration")
        drawn = 0
        for agent, parts in cal.items():
            bins = [b for b in parts[kind]["bins"] if b["n"]]
            if bins:
                ax.plot([b["mean_forecast"] for b in bins], [b["observed"] for b in bins], lw=1,
                        marker=style[agent]["marker"], color=style[agent]["color"], mfc="none",
                        ms=9 - 1.2 * drawn, label=agent)
                drawn += 1
        if not drawn:
            ax.text(0.5, 0.5, f"no {kind} events", ha="center", va="center", color="grey", transform=ax.transAxes)
        ax.set(title=f"{kind} ({'P(first option)' if kind == 'binary' else 'one-vs-rest'})",
               xlabel="mean forecast", ylabel="observed frequency", xlim=(-0.03, 1.03), ylim=(-0.03, 1.03))
        ax.legend(fontsize=7, loc="upper left")
    return fig


def _dodged(n: int, width: float = 0.5) -> list[float]:
    return [0.0] if n == 1 else [-width / 2 + width * i / (n - 1) for i in range(n)]


def figure_thirds(res: Mapping[str, Any]) -> Figure | None:
    """Brier by relative step third with intervals, agents dodged so their bars never overlap."""
    thirds = [r for r in res.get("step_thirds") or [] if _ok(r["brier"]["value"])]
    if not thirds:
        return None
    agents = sorted({r["agent"] for r in thirds})
    style = _style(_all_agents(res))
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for off, agent in zip(_dodged(len(agents)), agents):
        rs = [r for r in thirds if r["agent"] == agent]
        order = {"early": 0, "middle": 1, "late": 2}
        x = [order[r["third"].split()[0]] + off for r in rs]
        y = [r["brier"]["value"] for r in rs]
        err = [[v - r["brier"]["lo"] for v, r in zip(y, rs)], [r["brier"]["hi"] - v for v, r in zip(y, rs)]]
        ax.errorbar(x, y, yerr=err, capsize=3, lw=1, label=agent, **style.get(agent, {"marker": "o"}))
    ax.set_xticks([0, 1, 2], ["early [0, 1/3)", "middle [1/3, 2/3)", "late [2/3, 1]"])
    ax.set_xlim(-0.5, 2.5)
    ax.set(ylabel="Brier (lower is better)", title="Brier by relative step position")
    ax.legend(fontsize=7, loc="best")
    return fig


def figure_category(res: Mapping[str, Any]) -> Figure | None:
    """Brier by category, one bar per agent (bars start at 0)."""
    cats = [r for r in res.get("by_category") or [] if _ok(r["brier"]["value"])]
    if not cats:
        return None
    groups = sorted({str(r["group"]) for r in cats})
    agents = sorted({r["agent"] for r in cats})
    style = _style(_all_agents(res))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups)), 4))
    width = 0.8 / max(1, len(agents))
    for i, agent in enumerate(agents):
        xs: list[float] = []
        ys: list[float] = []
        err: list[list[float]] = [[], []]
        for j, g in enumerate(groups):
            r = next((r for r in cats if r["agent"] == agent and str(r["group"]) == g), None)
            if r:
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(r["brier"]["value"])
                err[0].append(r["brier"]["value"] - r["brier"]["lo"])
                err[1].append(r["brier"]["hi"] - r["brier"]["value"])
        ax.bar(xs, ys, width=width, yerr=err, capsize=2, label=agent,
               color=style.get(agent, {}).get("color"), error_kw={"lw": 0.8})
    ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right")
    ax.set(ylabel="Brier (lower is better)", title="Brier by category")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def figure_skill(res: Mapping[str, Any]) -> Figure | None:
    """Ridge skills with their intervals, the anchor at 0."""
    table = (res.get("skill") or {}).get("table") or []
    table = [r for r in table if _ok(r["skill"])]
    if not table:
        return None
    fig, ax = plt.subplots(figsize=(6, 0.5 * len(table) + 1.8))
    rows = table[::-1]
    vals = [r["skill"] for r in rows]
    lo = [v - r["lo"] for v, r in zip(vals, rows)]
    hi = [r["hi"] - v for v, r in zip(vals, rows)]
    ax.errorbar(vals, range(len(rows)), xerr=[lo, hi], fmt="o", capsize=3, label="skill (95% interval)")
    anchor = (res.get("skill") or {}).get("anchor")
    ax.axvline(0, color="grey", lw=1, ls="--", label=f"anchor {anchor} = 0" if anchor else "mean 0")
    ax.set_yticks(range(len(rows)), [r["agent"] for r in rows])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set(xlabel="skill (higher is better)", title="Skill leaderboard")
    ax.legend(fontsize=7, loc="lower right")
    return fig


def figure_evidence(res: Mapping[str, Any]) -> Figure | None:
    """Figure 2b (Brier change by A group) and 2c (capture slope kappa vs improvement G)."""
    ev = res.get("evidence") or {}
    groups = [r for r in ev.get("quartiles") or [] if _ok(r.get("d_brier"))]
    pts = [r for r in ev.get("per_agent") or [] if _ok(r.get("kappa")) and _ok(r.get("G"))]
    if not groups and not pts:
        return None
    style = _style(_all_agents(res))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    if groups:
        x = list(range(len(groups)))
        y = [r["d_brier"] for r in groups]
        err = [[v - r["lo"] for v, r in zip(y, groups)], [r["hi"] - v for v, r in zip(y, groups)]]
        left.errorbar(x, y, yerr=err, fmt="o", capsize=3, label="mean change (95% interval)")
        left.axhline(0, color="grey", lw=1, ls="--", label="no change")
        left.set_xticks(x, [r["label"] for r in groups], rotation=20)
        left.set_xlim(-0.5, len(groups) - 0.5)
    else:
        left.text(0.5, 0.5, "undefined (see the table)", ha="center", va="center", color="grey",
                  transform=left.transAxes)
    left.set(xlabel="evidence availability A", ylabel="Brier change (negative = better)",
             title="Brier change by availability")
    if groups:
        left.legend(fontsize=7, loc="best")
    for i, r in enumerate(pts):
        st = style.get(r["agent"], {"marker": MARKERS[i % len(MARKERS)], "color": None})
        right.scatter([r["kappa"]], [r["G"]], marker=st["marker"], facecolors="none", edgecolors=st["color"],
                      s=110 - 18 * (i % 5), linewidths=1.5, label=r["agent"])
    if pts:
        right.legend(fontsize=7, loc="best")
    else:
        right.text(0.5, 0.5, "kappa undefined (see the table)", ha="center", va="center", color="grey",
                   transform=right.transAxes)
    right.set(xlabel="capture slope kappa", ylabel="episode improvement G", title="Evidence capture vs improvement")
    right.margins(0.15)
    fig.tight_layout()
    return fig


def figure_modes(res: Mapping[str, Any]) -> Figure | None:
    """Episode and world runs side by side: each shared agent's Brier in both modes (and the world's
    time-weighted Brier) with 95% intervals; modes told apart by marker and colour, dodged."""
    rows = [r for r in (res.get("modes") or {}).get("rows") or [] if _ok(r["brier"]["value"])]
    if not rows:
        return None
    agents = sorted({r["agent"] for r in rows})
    series = [("episode", "brier", "episode: Brier", "o"), ("world", "brier", "world: Brier", "s"),
              ("world", "time_weighted_brier", "world: time-weighted Brier", "^")]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(max(5.5, 1.6 * len(agents) + 2.5), 4))
    for i, (off, (mode, key, label, marker)) in enumerate(zip(_dodged(len(series), 0.45), series)):
        pts = [(agents.index(r["agent"]) + off, r[key]) for r in rows
               if r["mode"] == mode and r.get(key) and _ok(r[key].get("value"))]
        if not pts:
            continue
        x = [p[0] for p in pts]
        y = [p[1]["value"] for p in pts]
        err = [[v - p[1]["lo"] for v, p in zip(y, pts)], [p[1]["hi"] - v for v, p in zip(y, pts)]]
        ax.errorbar(x, y, yerr=err, fmt=marker, mfc="none", color=colours[i % len(colours)], capsize=3, lw=1,
                    label=label)
    ax.set_xticks(range(len(agents)), agents, rotation=20 if len(agents) > 4 else 0)
    ax.set_xlim(-0.6, len(agents) - 0.4)
    ax.set(ylabel="Brier (lower is better)", title="Episode and world mode side by side")
    ax.legend(fontsize=7, loc="best")
    return fig


FIGURES: dict[str, Callable[[Mapping[str, Any]], Figure | None]] = {
    "reliability": figure_reliability,
    "thirds": figure_thirds,
    "category": figure_category,
    "skill": figure_skill,
    "evidence": figure_evidence,
    "modes": figure_modes,
}


def draw_plots(res: Mapping[str, Any], out_dir: Path) -> dict[str, str]:
    """Draw every plot the analysis supports; returns {name: path relative to out_dir.parent}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    for name, make in FIGURES.items():
        fig = make(res)
        if fig is not None:
            _save(fig, out_dir / f"{name}.png")
            made[name] = f"plots/{name}.png"
    return made
