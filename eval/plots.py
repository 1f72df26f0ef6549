"""PNG plots of a report (matplotlib, Agg backend): reliability, step thirds, category, skill, evidence."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from forecast_env.store import atomic_path


def _ok(x: Any) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def _save(fig: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def draw_plots(res: Mapping[str, Any], out_dir: Path) -> dict[str, str]:
    """Draw every plot the analysis supports; returns {name: path relative to out_dir.parent}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}

    # reliability diagrams (binary and multi one-vs-rest pairs, every agent)
    cal = res.get("calibration") or {}
    if cal:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
        for ax, kind in zip(axes, ("binary", "multi")):
            ax.plot([0, 1], [0, 1], color="grey", lw=1, ls="--")
            for agent, parts in cal.items():
                bins = [b for b in parts[kind]["bins"] if b["n"]]
                if bins:
                    ax.plot([b["mean_forecast"] for b in bins], [b["observed"] for b in bins], marker="o", label=agent)
            ax.set(title=f"{kind} ({'P(first option)' if kind == 'binary' else 'one-vs-rest'})",
                   xlabel="mean forecast", ylabel="observed frequency", xlim=(0, 1), ylim=(0, 1))
            ax.legend(fontsize=7)
        _save(fig, out_dir / "reliability.png")
        made["reliability"] = "plots/reliability.png"

    thirds = [r for r in res.get("step_thirds") or [] if _ok(r["brier"]["value"])]
    if thirds:
        fig, ax = plt.subplots(figsize=(6, 4))
        for agent in sorted({r["agent"] for r in thirds}):
            rs = [r for r in thirds if r["agent"] == agent]
            x = list(range(len(rs)))
            y = [r["brier"]["value"] for r in rs]
            err = [[v - r["brier"]["lo"] for v, r in zip(y, rs)], [r["brier"]["hi"] - v for v, r in zip(y, rs)]]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=agent)
        ax.set_xticks([0, 1, 2], ["early", "middle", "late"])
        ax.set(ylabel="Brier", title="Brier by relative step position")
        ax.legend(fontsize=7)
        _save(fig, out_dir / "thirds.png")
        made["thirds"] = "plots/thirds.png"

    cats = [r for r in res.get("by_category") or [] if _ok(r["brier"]["value"])]
    if cats:
        groups = sorted({str(r["group"]) for r in cats})
        agents = sorted({r["agent"] for r in cats})
        fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(groups)), 4))
        width = 0.8 / max(1, len(agents))
        for i, agent in enumerate(agents):
            xs, ys = [], []
            for j, g in enumerate(groups):
                r = next((r for r in cats if r["agent"] == agent and str(r["group"]) == g), None)
                if r:
                    xs.append(j + i * width)
                    ys.append(r["brier"]["value"])
            ax.bar(xs, ys, width=width, label=agent)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))], groups, rotation=30, ha="right")
        ax.set(ylabel="Brier", title="Brier by category")
        ax.legend(fontsize=7)
        _save(fig, out_dir / "category.png")
        made["category"] = "plots/category.png"

    table = (res.get("skill") or {}).get("table") or []
    if table:
        fig, ax = plt.subplots(figsize=(6, 0.5 * len(table) + 1.5))
        names = [r["agent"] for r in table][::-1]
        vals = [r["skill"] for r in table][::-1]
        lo = [v - r["lo"] for v, r in zip(vals, table[::-1])]
        hi = [r["hi"] - v for v, r in zip(vals, table[::-1])]
        ax.errorbar(vals, range(len(names)), xerr=[lo, hi], fmt="o", capsize=3)
        ax.axvline(0, color="grey", lw=1, ls="--")
        ax.set_yticks(range(len(names)), names)
        ax.set(xlabel="skill (anchor = 0)", title="Skill leaderboard")
        _save(fig, out_dir / "skill.png")
        made["skill"] = "plots/skill.png"

    ev = (res.get("evidence") or {}).get("per_agent") or []
    pts = [r for r in ev if _ok(r.get("kappa")) and _ok(r.get("G"))]
    if pts:
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.scatter([r["kappa"] for r in pts], [r["G"] for r in pts])
        for r in pts:
            ax.annotate(r["agent"], (r["kappa"], r["G"]), fontsize=7)
        ax.set(xlabel="capture slope kappa", ylabel="episode improvement G", title="Evidence capture vs improvement")
        _save(fig, out_dir / "evidence.png")
        made["evidence"] = "plots/evidence.png"
    return made
