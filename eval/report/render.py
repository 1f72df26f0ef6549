"""Run reports (docs/design.md §7): Markdown, a self-contained HTML page with PNG plots, and JSON.

`build_report(run_dir)` reads only the run directory (forecasts, notebook, events and market tables
written by the runner), so a report can be rebuilt anywhere. The Markdown is deterministic (no
clock, fixed bootstrap seed, fixed number formats): the golden-file test pins it.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import quote

import polars as pl

from forecast_env.config import load_config
from forecast_env.envs.records import ablations
from forecast_env.errors import RunError
from forecast_env.eval.report import metrics
from forecast_env.eval.report.calibration import decompose
from forecast_env.eval.report.evidence import evidence_diagnostics, world_evidence_diagnostics
from forecast_env.eval.report.forecastbench import forecastbench_section
from forecast_env.eval.report.modes import check_companion, compare_modes, find_companion, run_mode
from forecast_env.eval.report.skill import date_scores, skill_leaderboard
from forecast_env.eval.runs.store import read_record
from forecast_env.store import atomic_write_json, atomic_write_text

Block = tuple  # ("h1"|"h2"|"p", text) | ("table", headers, rows) | ("img", title, relpath)


@dataclass(frozen=True)
class Link:
    """A table cell that links (the question's page in the run viewer); its text is escaped like any cell."""

    text: str
    href: str  # built by the report from quoted ids, never from free text


# ---------------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------------


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """The tables of a run directory, forecasts and market joined with event type and category."""
    run_dir = Path(run_dir)
    if not (run_dir / "forecasts.parquet").exists():
        raise RunError(f"{run_dir}: no forecasts.parquet; is this a run directory (WS/runs/<run_id>)? "
                       "Create one with `forecast-env run`")
    meta = read_record(run_dir, missing_ok=True)
    forecasts = pl.read_parquet(run_dir / "forecasts.parquet")
    events = pl.read_parquet(run_dir / "events.parquet") if (run_dir / "events.parquet").exists() else None
    market = pl.read_parquet(run_dir / "market.parquet") if (run_dir / "market.parquet").exists() else None
    notebook = pl.read_parquet(run_dir / "notebook.parquet") if (run_dir / "notebook.parquet").exists() else None
    if events is not None and events.height:
        cols = events.select("event_id", "type", "category")
        forecasts = forecasts.join(cols, on="event_id", how="left")
        if market is not None:
            market = market.join(cols, on="event_id", how="left")
    else:
        forecasts = forecasts.with_columns(
            type=pl.when(pl.col("options").list.len() == 2).then(pl.lit("binary")).otherwise(pl.lit("multi")),
            category=pl.lit(None, pl.String))
    world = run_dir / "world_questions.parquet"  # world-mode runs (docs/design.md §5 "World mode")
    world_questions = pl.read_parquet(world) if world.exists() else None
    out = {"meta": meta, "forecasts": forecasts, "market": market, "notebook": notebook, "events": events,
           "world_questions": world_questions, "world_days": None, "tool_calls": None}
    if meta.get("mode") == "world":  # the world's evidence is what was read per question (eval/report/evidence.py)
        if (run_dir / "world_days.parquet").exists():
            out["world_days"] = pl.read_parquet(run_dir / "world_days.parquet", columns=["agent", "rollout", "day",
                                                                                          "date"])
        if (run_dir / "tool_calls.parquet").exists():
            out["tool_calls"] = pl.read_parquet(run_dir / "tool_calls.parquet", columns=[
                "agent", "rollout", "step", "call_index", "tool", "args_json", "error"])
    return out


# ---------------------------------------------------------------------------------------------
# formatting
# ---------------------------------------------------------------------------------------------


def _num(x: Any, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if isinstance(x, (int,)) and not isinstance(x, bool):
        return str(x)
    v = float(x)
    return f"{0.0 if abs(v) < 0.5 * 10**-digits else v:.{digits}f}"  # no "-0.0000"


def _ci(est: Mapping[str, Any] | None, digits: int = 4) -> str:
    if not est or est.get("value") is None or not math.isfinite(est["value"]):
        return "-"
    return f"{_num(est['value'], digits)} [{_num(est['lo'], digits)}, {_num(est['hi'], digits)}]"


def _md_cell(c: Any) -> str:
    if isinstance(c, Link):
        text = c.text.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]").replace("\n", " ")
        return f"[{text}]({c.href})"
    return str(c)


def _html_cell(c: Any) -> str:
    if isinstance(c, Link):
        return f"<a href=\"{html.escape(c.href, quote=True)}\">{html.escape(c.text)}</a>"
    return html.escape(str(c))


def render_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if b[0] == "h1":
            out.append(f"# {b[1]}\n")
        elif b[0] == "h2":
            out.append(f"## {b[1]}\n")
        elif b[0] == "p":
            out.append(f"{b[1]}\n")
        elif b[0] == "table":
            headers, rows = b[1], b[2]
            out.append("| " + " | ".join(headers) + " |")
            out.append("|" + "|".join("---" for _ in headers) + "|")
            for r in rows:
                out.append("| " + " | ".join(_md_cell(c) for c in r) + " |")
            out.append("")
        elif b[0] == "img":
            out.append(f"![{b[1]}]({b[2]})\n")
    return "\n".join(out).rstrip() + "\n"


def render_html(blocks: list[Block], base: Path, title: str) -> str:
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             ("<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
             "text-align:right}th{background:#f3f3f3}td:first-child{text-align:left}img{max-width:100%}</style>"),
             "</head><body>"]
    for b in blocks:
        if b[0] in ("h1", "h2"):
            parts.append(f"<{b[0]}>{html.escape(b[1])}</{b[0]}>")
        elif b[0] == "p":
            parts.append(f"<p>{html.escape(b[1])}</p>")
        elif b[0] == "table":
            parts.append("<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in b[1]) + "</tr>")
            for r in b[2]:
                parts.append("<tr>" + "".join(f"<td>{_html_cell(c)}</td>" for c in r) + "</tr>")
            parts.append("</table>")
        elif b[0] == "img":
            path = base / b[2]
            if path.exists():
                data = base64.b64encode(path.read_bytes()).decode("ascii")
                parts.append(f"<figure><img alt='{html.escape(b[1])}' src='data:image/png;base64,{data}'>"
                             f"<figcaption>{html.escape(b[1])}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------------
# the analysis
# ---------------------------------------------------------------------------------------------


def analyse(run: Mapping[str, Any], boot: metrics.Boot, n_bins: int = 10, skill_kind: str = "log",
            companion: Mapping[str, Any] | None = None,
            forecastbench: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every number of the report, as plain data (report.json); `companion` is a loaded run of the other
    mode (episode / world) to show beside this one (`eval/report/modes.py`); `forecastbench` the run's
    ForecastBench scoring (`forecastbench.forecastbench_section`), kept under "forecastbench" when given."""
    f, market, notebook = run["forecasts"], run["market"], run["notebook"]
    scored = metrics.scored(f)
    out: dict[str, Any] = {
        "agents": metrics.agent_table(f, market, boot),
        "by_type": metrics.group_table(f, market, "type", boot),
        "by_category": metrics.group_table(f, market, "category", boot),
        "step_thirds": metrics.step_thirds(f, market, boot),
        "paired": metrics.paired_table(f, boot),
        "base_rate": metrics.base_rate_reference(f, boot),
    }
    cal = {}
    for agent in sorted(scored["agent"].unique().to_list()):
        cal[agent] = {k: v.to_dict() for k, v in decompose(scored.filter(pl.col("agent") == agent), n_bins).items()}
    if market is not None and market.height:
        cal[metrics.MARKET] = {k: v.to_dict() for k, v in decompose(market, n_bins).items()}
    out["calibration"] = cal
    out["market_comparisons"] = list(metrics.market_comparisons(f))
    sk = skill_leaderboard(date_scores(f, skill_kind), anchor="uniform", draws=boot.draws, seed=boot.seed,
                           level=boot.level)
    lam_lo, lam_hi = sk.lam_range(boot.level)
    out["skill"] = {"kind": skill_kind, "lambda": sk.lam, "lambda_lo": lam_lo, "lambda_hi": lam_hi,
                    "sigma_err": sk.sigma_err, "sigma_skill": sk.sigma_skill, "high_volume": list(sk.high_volume),
                    "anchor": sk.anchor, "table": sk.table.to_dicts()}
    wq = run.get("world_questions")
    if wq is not None and wq.height:  # world mode: the time-weighted Brier, events weighted equally
        from forecast_env.eval.report.bootstrap import clustered_mean

        out["world"] = []
        for agent in sorted(wq["agent"].unique().to_list()):
            sub = wq.filter((pl.col("agent") == agent) & pl.col("time_weighted_brier").is_not_null())
            est = clustered_mean(sub, "time_weighted_brier", boot.draws, boot.seed, boot.level)
            out["world"].append({"agent": agent, "value": est.value, "lo": est.lo, "hi": est.hi,
                                 "questions": sub["event_id"].n_unique(), "days": int(sub["eligible_days"].sum())})
    if companion is not None:
        pair = (run, companion) if run_mode(run["meta"]) == "episode" else (companion, run)
        out["modes"] = compare_modes(*pair, boot)
    elif run_mode(run["meta"]) == "world":
        out["modes"] = None  # no episode run to compare with: the report says how to make one
    if forecastbench is not None:
        out["forecastbench"] = dict(forecastbench)
    out["questions"] = question_rows(scored, run.get("events"))
    ev = None
    if run["meta"].get("mode") == "world":
        if run.get("tool_calls") is not None and run.get("world_days") is not None and scored.height:
            ev = world_evidence_diagnostics(f, run["tool_calls"], run["world_days"], boot.draws, boot.seed,
                                            boot.level)
        else:
            out["evidence_missing"] = ("this world run has no tool_calls.parquet or world_days.parquet, so what each "
                                       "forecast relied on cannot be told; rerun it with this version")
    elif notebook is not None and scored.height:
        ev = evidence_diagnostics(f, notebook, boot.draws, boot.seed, boot.level)
    if ev is not None:
        out["evidence"] = {"per_agent": ev.per_agent.to_dicts(), "quartiles": ev.quartiles.to_dicts(),
                           "cut_points": ev.cut_points, "grouping": ev.grouping, "keepers": list(ev.keepers),
                           "spearman": ev.spearman, "notes": ev.notes, "basis": ev.basis}
    return out


def knowledge_cutoff_warning(meta: Mapping[str, Any]) -> str | None:
    """A warning when a run's LLM agents were evaluated on events that resolved before the model's knowledge
    cutoff (`llm.knowledge_cutoff`): such a model may remember the answer, so its score is not a forecast."""
    bench = (meta.get("config") or {}).get("benchmark") or {}
    cutoff = (bench.get("llm") or {}).get("knowledge_cutoff")
    uses_llm = any((a.get("name") if isinstance(a, Mapping) else a) == "llm" for a in meta.get("agents") or [])
    if not cutoff or not uses_llm or not meta.get("workspace"):
        return None
    path = Path(meta["workspace"]) / "events" / "events.parquet"
    if not path.exists():
        return f"**Warning**: llm.knowledge_cutoff is {cutoff}, but the events table is missing, so no check was made."
    ev = pl.read_parquet(path, columns=["event_id", "t_end", "t_close"]).filter(
        pl.col("event_id").is_in(list(meta.get("event_ids") or [])))
    day = date.fromisoformat(str(cutoff)[:10])
    resolved = ev.with_columns(end=pl.min_horizontal(pl.col("t_end"), pl.col("t_close")).dt.date())
    before = resolved.filter(pl.col("end") <= day).height
    if not before:
        return None
    return (f"**Warning: knowledge cutoff.** {before} of {ev.height} evaluated events resolved on or before the LLM's "
            f"knowledge cutoff ({day.isoformat()}): the model may remember their outcomes, so its scores on them "
            "measure memory, not forecasting. Evaluate on events after the cutoff, and compare with the no-tools "
            "ablation (`--set llm.tools=false`).")


def question_rows(scored: pl.DataFrame, events: pl.DataFrame | None) -> list[dict[str, Any]]:
    """One row per question: its text and each agent's mean Brier over its scored forecasts (report.json)."""
    if not scored.height:
        return []
    means = scored.group_by("event_id", "agent").agg(pl.col("brier").mean()).sort("event_id", "agent")
    text = dict(events.select("event_id", "question").iter_rows()) if events is not None and events.height else {}
    rows: dict[str, dict[str, Any]] = {}
    for eid, agent, brier in means.iter_rows():
        row = rows.setdefault(eid, {"event_id": eid, "question": text.get(eid) or eid, "brier": {}})
        row["brier"][agent] = brier
    return list(rows.values())


def _questions_blocks(rows: list[dict[str, Any]], viewer: str | None) -> list[Block]:
    """Every question with each agent's Brier; the question links to its page in the run viewer (`viewer`: the
    viewer's index.html relative to the report, None when it was not written)."""
    if not rows:
        return []
    agents = sorted({a for r in rows for a in r["brier"]})
    how = ("Each question opens its page in the run viewer (forecast path against the market, and every date's "
           "searches, articles and notes): the static viewer written beside this report." if viewer else
           "The run is too large for a static viewer beside the report: open a question with `forecast-env view "
           "--run RUN` (a local server), or write one for chosen questions with `--out DIR --events id1,id2`.")
    table = []
    for r in rows:
        label = f"{r['question']} ({r['event_id']})"
        cell: Any = Link(label, f"{viewer}#/q/{quote(r['event_id'], safe='')}") if viewer else label
        table.append([cell, *(_num(r["brier"].get(a), 3) if r["brier"].get(a) is not None else "-" for a in agents)])
    return [("h2", "Questions"), ("p", how), ("table", ["question", *(f"Brier {a}" for a in agents)], table)]


def _blocks(res: Mapping[str, Any], meta: Mapping[str, Any], level: float, plots: Mapping[str, str],
            viewer: str | None = None) -> list[Block]:
    pct = f"{round(level * 100)}%"
    run_id = meta.get("run_id", "?")
    ablation = ablations((meta.get("config") or {}).get("env") or {})
    b: list[Block] = [("h1", f"Benchmark report: run {run_id}" + (" (ablation)" if ablation else ""))]
    b.append(("p", (f"Split `{meta.get('split', '?')}`, {len(meta.get('event_ids') or [])} events, "
                   f"{meta.get('rollouts', '?')} rollout(s), seed {meta.get('seed', '?')}; corpus snapshot "
                   f"`{meta.get('corpus_snapshot_id')}`. Intervals: {pct} percentile, event-clustered bootstrap, "
                   "events weighted equally. Averaging order: each rollout's mean over its scored dates, then the "
                   "mean over the event's rollouts, then over events (a rollout with missing dates still counts "
                   "as one rollout).")))
    warning = knowledge_cutoff_warning(meta)
    if warning:
        b.append(("p", warning))
    if ablation:
        b.append(("p", (f"**Ablation run**: {'; '.join(ablation)}. These scores measure the ablation: compare them "
                       "with a default run of the same events; do not pool them with default runs.")))
    if res.get("world"):
        w = meta.get("world") or {}
        b.append(("h2", "World mode"))
        b.append(("p", (f"One shared clock over {w.get('start', '?')} .. {w.get('end', '?')}: each question scored on "
                       "its scheduled dates with its standing forecast at the end of the day (the tables below, "
                       "comparable with episode runs); time-weighted Brier = each question's mean end-of-day Brier "
                       "over its listed days before the cut, then the mean over questions (events weighted "
                       "equally). The evidence diagnostics of a world run count the articles read for each "
                       "question (see that section).")))
        b.append(("table", ["agent", "time-weighted Brier", "questions", "question-days"],
                  [[r["agent"], _ci(r), r["questions"], r["days"]] for r in res["world"]]))
    if "modes" in res:
        b.extend(_modes_blocks(res["modes"], meta, pct, plots))
    b.append(("h2", "Scores"))
    comps = res.get("market_comparisons") or ["log_vs_market"]
    heads = {"log_vs_market": "log vs market (day mean)", "log_vs_market_close": "log vs market (day close)"}
    rows = [[r["agent"], _ci(r["brier"]), _ci(r["accuracy"]), *(_ci(r.get(c)) for c in comps),
             r["n_forecasts"], r["missing"], r["fallbacks"], r["n_events"]] for r in res["agents"]]
    b.append(("table", ["agent", "Brier", "accuracy", *(heads[c] for c in comps), "forecasts", "missing",
                        "fallbacks", "events"], rows))
    close = ("; day close = the same against the market's last price of that date, the stricter comparison "
             "since the agent has read all of that day's news" if "log_vs_market_close" in comps else
             "; this run did not record the day's last price, the stricter comparison (the agent has read all "
             "of that day's news)")
    b.append(("p", ("Brier on [0, 2] (lower is better); accuracy with fractional ties; log vs market = "
                   "ln p(Y) - ln m(Y) (positive favours the agent) against the market's mean price of the "
                   f"forecast date{close}. The market row uses complete belief vectors on the same forecast dates. "
                   "Missing reports (infrastructure failures) are not scored.")))
    for key, title in (("by_type", "By option count"), ("by_category", "By category")):
        b.append(("h2", title))
        b.append(("table", ["group", "agent", "Brier", "accuracy", "forecasts"],
                  [[r["group"], r["agent"], _ci(r["brier"]), _ci(r["accuracy"]), r["n_forecasts"]] for r in res[key]]))
        if key == "by_category" and "category" in plots:
            b.append(("img", "Brier by category", plots["category"]))
    b.append(("h2", "By relative step position"))
    b.append(("p", ("Position (t-1)/(T_e-1) in thirds; agent dates with a market price, market dates with a "
                   "complete vector; only events represented in all three thirds.")))
    b.append(("table", ["agent", "third", "events", "Brier", *(heads[c] for c in comps)],
              [[r["agent"], r["third"], r["n_events"], _ci(r["brier"]), *(_ci(r.get(c)) for c in comps)]
               for r in res["step_thirds"]]))
    if "thirds" in plots:
        b.append(("img", "Score by step third", plots["thirds"]))
    b.append(("h2", "Calibration (Murphy decomposition, 10 bins)"))
    b.append(("p", ("Binary events: P(first option); multi-option events: one-vs-rest over (option, forecast) pairs. "
                   "Brier = REL - RES + UNC + WBV - 2 WBC (within-bin variance and covariance).")))
    cal_rows = []
    for agent, parts in res["calibration"].items():
        for kind in ("binary", "multi", "all"):
            d = parts[kind]
            if d["n"]:
                cal_rows.append([agent, kind, d["n"], _num(d["brier"]), _num(d["reliability"]), _num(d["resolution"]),
                                 _num(d["uncertainty"]), _num(d["within_variance"]), _num(d["within_covariance"])])
    b.append(("table", ["agent", "pairs", "n", "Brier", "REL", "RES", "UNC", "WBV", "WBC"], cal_rows))
    if "reliability" in plots:
        b.append(("img", "Reliability diagrams", plots["reliability"]))
    b.append(("h2", "Paired differences"))
    b.append(("p", ("A minus B on the (event, date) forecasts both made; negative Brier difference favours A; "
                   "* = interval excludes 0.")))
    b.append(("table", ["A", "B", "Brier difference", "events", "significant"],
              [[r["a"], r["b"], _ci(r), r["n_events"], "*" if r["significant"] else ""] for r in res["paired"]]))
    br = res["base_rate"]
    b.append(("h2", "Base-rate reference"))
    b.append(("p", ("Constant forecast of the empirical label frequency by option position within each stratum "
                   "(binary / K options) of the evaluated events; Delta_BR = reference Brier - agent Brier "
                   "(positive = the agent beats the base rate; * = interval excludes 0).")))
    b.append(("table", ["agent", "reference Brier", "Delta_BR", "events", "beats"],
              [[r["agent"], _num(r["ref_brier"]), _ci(r), r["n_events"], "*" if r["beats_base_rate"] else ""]
               for r in br.get("agents", [])]))
    sk = res["skill"]
    b.append(("h2", "Skill leaderboard"))
    high = ", ".join(sk.get("high_volume") or []) or "-"
    b.append(("p", (f"Ridge regression on head-to-head {sk['kind']}-score differences per event (weights: share of "
                   f"the event's dates both forecast); lambda = sigma_err^2 / sigma_skill^2 = {_num(sk['lambda'])} "
                   f"(sigma_err {_num(sk['sigma_err'])}, sigma_skill {_num(sk['sigma_skill'])} from the "
                   f"high-volume agents: {high}; an agent is high-volume with at least half the largest matchup "
                   f"weight, all agents when fewer than 3 are); anchored at {sk['anchor'] or 'mean 0'} = 0; {pct} "
                   f"intervals from events resampled, lambda re-estimated in every draw ({pct} range "
                   f"{_num(sk.get('lambda_lo'))} to {_num(sk.get('lambda_hi'))}).")))
    b.append(("table", ["agent", "skill", "events", "matchups"],
              [[r["agent"], _ci({"value": r["skill"], "lo": r["lo"], "hi": r["hi"]}), r["n_events"], r["n_matchups"]]
               for r in sk["table"]]))
    if "skill" in plots:
        b.append(("img", "Skill with intervals", plots["skill"]))
    if res.get("forecastbench"):
        b.extend(_forecastbench_blocks(res["forecastbench"]))
    ev = res.get("evidence")
    if ev:
        b.extend(_evidence_blocks(ev, plots))
    elif res.get("evidence_missing"):
        b.append(("h2", "Evidence diagnostics (articles read per question)"))
        b.append(("p", f"Undefined: {res['evidence_missing']}."))
    b.extend(_questions_blocks(res.get("questions") or [], viewer))
    return b


def _modes_blocks(modes: Mapping[str, Any] | None, meta: Mapping[str, Any], pct: str,
                  plots: Mapping[str, str]) -> list[Block]:
    """The side-by-side section of an episode run and a world run (`eval/report/modes.py`)."""
    b: list[Block] = [("h2", "Episode and world mode side by side")]
    if not modes:
        b.append(("p", ("No episode run of the same agents, events and settings was found in this workspace's "
                       "runs/ folder, so the two modes are not compared here. Make one with `forecast-env run "
                       f"--workspace WS --split {meta.get('split', 'eval')} --agents <the same agents>` and rebuild "
                       "this report (or give it with `forecast-env report --compare WS/runs/<run_id>`).")))
        return b
    heads = {"log_vs_market": "log vs market (day mean)", "log_vs_market_close": "log vs market (day close)"}
    comps = [v for v in modes["values"] if v in heads]
    b.append(("p", (f"Episode run `{modes['episode_run']}` and world run `{modes['world_run']}`, on the "
                   f"{len(modes['agents'])} agent(s) both ran with the same settings and the {modes['events']} "
                   "events both scored. Each mode's row is computed from its own run only: the world run scores "
                   "every event on its scheduled dates with the standing forecast at the end of the day, the "
                   f"episode run with the forecast of that date's session. {pct} event-clustered bootstrap "
                   "intervals, events weighted equally; the time-weighted Brier (each question's mean end-of-day "
                   "Brier over its listed days, then the mean over questions) exists in world mode only.")))
    b.append(("table", ["agent", "mode", "run", "Brier", "accuracy", *(heads[c] for c in comps),
                        "time-weighted Brier", "forecasts", "events"],
              [[r["agent"], r["mode"], r["run_id"], _ci(r["brier"]), _ci(r["accuracy"]), *(_ci(r[c]) for c in comps),
                _ci(r["time_weighted_brier"]), r["n_forecasts"], r["n_events"]] for r in modes["rows"]]))
    b.append(("p", ("Paired difference world - episode per agent on the (event, date) cells both runs scored "
                   "(negative Brier difference: the agent forecast better on the shared clock; * = the Brier "
                   "interval excludes 0).")))
    b.append(("table", ["agent", "Brier world - episode", "accuracy world - episode",
                        *(f"{heads[c]} world - episode" for c in comps), "cells", "events", "significant"],
              [[r["agent"], _ci(r["brier"]), _ci(r["accuracy"]), *(_ci(r[c]) for c in comps), r["cells"],
                r["brier"]["n_events"], "*" if r["brier"]["significant"] else ""] for r in modes["paired"]]))
    if "modes" in plots:
        b.append(("img", "Episode and world mode side by side", plots["modes"]))
    return b


def _forecastbench_blocks(fb: Mapping[str, Any]) -> list[Block]:
    """The run scored on imported ForecastBench items as its leaderboard scores (`eval/report/forecastbench.py`)."""
    b: list[Block] = [("h2", "ForecastBench (its leaderboard's rules)")]
    fe = fb.get("fixed_effects", "estimated")
    fe_text = (f"ForecastBench's, from {fe.split(':', 1)[1]}" if fe.startswith("supplied:")
               else "supplied" if fe == "supplied"
               else "estimated from this run's forecasters by two-way fixed effects")
    rounds = ", ".join(fb.get("scored_due_dates") or []) or "-"
    b.append(("p", (f"The run's forecasts on the imported ForecastBench items (rounds due {rounds}; pooling as of "
                   f"{fb.get('as_of', '-')}; {fb.get('n_pending', 0)} item(s) still pending). Brier = (p(Yes) - "
                   "outcome)^2, half the environment's two-option Brier; rollouts averaged per item. Adjusted "
                   f"Brier = Brier - the question's effect ({fe_text}), averaged over the model's items, shifted so "
                   "that Always 0.5 scores 0.25; Brier Index = (1 - sqrt(adjusted Brier)) * 100 (higher is better, "
                   "50 = Always 0.5); overall = the mean of dataset and market. Brier columns are the plain means.")))
    b.append(("table", ["model", "Brier Index", "Brier Index dataset", "Brier Index market", "adj. Brier dataset",
                        "adj. Brier market", "Brier dataset", "Brier market", "N dataset", "N market", "N"],
              [[r["model"], _num(r["index_overall"], 1), _num(r["index_dataset"], 1), _num(r["index_market"], 1),
                _num(r["adjusted_dataset"]), _num(r["adjusted_market"]), _num(r["brier_dataset"]),
                _num(r["brier_market"]), r["n_dataset"], r["n_market"], r["n_overall"]] for r in fb["rows"]]))
    if fb.get("by_source"):
        b.append(("table", ["kind", "source", "items", "agent", "answered", "Brier"],
                  [[r["kind"], r["source"], r["n_items"], r["model"], r["n"], _num(r["brier"])]
                   for r in fb["by_source"]]))
    for note in fb.get("notes") or []:
        b.append(("p", f"Note: {note}"))
    b.append(("p", "Dataset questions are about data series (FRED, yfinance, ...): their values are not news, so "
                   "the corpus rarely holds the answer."))
    return b


def _evidence_blocks(ev: Mapping[str, Any], plots: Mapping[str, str]) -> list[Block]:
    notes = ev.get("notes") or {}
    keepers = ", ".join(ev.get("keepers") or []) or "none"
    peers = "notebook-keeping agents" if ev.get("basis", "notebook") == "notebook" else "reading agents"
    if ev.get("basis", "notebook") == "notebook":
        b: list[Block] = [("h2", "Evidence diagnostics (memory-on notebooks)")]
        b.append(("p", (f"Notebook-keeping agents (at least one entry in the run): {keepers}. A = leave-one-agent-out "
                       "availability index (mean count of newly dated entries of the other keepers); kappa = capture "
                       "slope sum(own * A) / sum(A^2); G = first minus last Brier (positive = improvement); searches "
                       "/ opens per forecast date. A dash is an undefined value; the last column says why.")))
    else:
        b = [("h2", "Evidence diagnostics (articles read per question)")]
        b.append(("p", (f"World run: one notebook serves every question and is recorded once, at the world's end, so "
                       "the evidence behind a forecast is what the agent read for it. A reading segment is the run "
                       "of one day's calls after that day's previous forecast up to a forecast(question_id); its "
                       "opened articles and searches count for that question. Own count at a question's scheduled "
                       "step t = distinct articles of its segments on the days after the previous scheduled date, up "
                       f"to and including this one. Reading agents (at least one such article): {keepers}. A = "
                       "leave-one-agent-out mean own count of the other readers; kappa = sum(own * A) / sum(A^2); "
                       "G = first minus last scheduled Brier of a question (positive = improvement); searches / "
                       "opens per scored (question, date) row. A dash is an undefined value; the last column says "
                       "why.")))
    b.append(("table", ["agent", "kappa", "G", "searches", "opens", "kappa undefined because"],
              [[r["agent"], _num(r["kappa"]), _ci({"value": r["G"], "lo": r["G_lo"], "hi": r["G_hi"]}),
                _num(r["searches"], 2), _num(r["opens"], 2), r.get("kappa_note") or ""] for r in ev["per_agent"]]))
    grouping = ev.get("grouping", "quartiles")
    if grouping == "quartiles":
        intro = (f"Brier change between consecutive forecasts of the {peers} by quartile of A (cut points "
                 + ", ".join(_num(c) for c in ev["cut_points"]) + "; a value on a cut point is in the lower group).")
    elif grouping == "values":
        intro = f"Brier change between consecutive forecasts of the {peers} by value of A."
    else:
        intro = "Brier change between consecutive forecasts by A: undefined."
    if notes.get("quartiles"):
        intro += f" Note: {notes['quartiles']}."
    b.append(("p", intro))
    if ev["quartiles"]:
        b.append(("table", ["group", "A range", "transitions", "Brier change", "events"],
                  [[r["label"], f"{_num(r['lo_cut'], 2)}-{_num(r['hi_cut'], 2)}", r["n"],
                    _ci({"value": r["d_brier"], "lo": r["lo"], "hi": r["hi"]}), r["n_events"]]
                   for r in ev["quartiles"]]))
    rho = ev["spearman"]
    parts = []
    for name in ("kappa", "searches", "opens"):
        why = notes.get(f"spearman_{name}")
        parts.append(f"{name} {_num(rho[name], 3)}" + (f" (undefined: {why})" if why else ""))
    b.append(("p", f"Spearman with G across {peers}: " + "; ".join(parts) + "."))
    if "evidence" in plots:
        b.append(("img", "Evidence capture vs improvement", plots["evidence"]))
    return b


def _write_viewer(run_dir: Path, out_dir: Path) -> str | None:
    """The run viewer as static files in `out_dir/viewer/` (docs/viewer.md) when the run is small enough for one
    (`eval/viewer/export.py`); its index.html relative to the report, or None."""
    from forecast_env.eval.viewer.export import MAX_QUESTION_SERIES, export_static

    f = pl.read_parquet(run_dir / "forecasts.parquet", columns=["event_id", "agent"])
    if f.select(pl.struct("event_id", "agent").n_unique()).item() > MAX_QUESTION_SERIES:
        return None
    export_static(run_dir, out_dir / "viewer")
    return "viewer/index.html"


def build_report(run_dir: str | Path, out: str | Path | None = None, config: Mapping[str, Any] | None = None,
                 plots: bool = True, compare: str | Path | bool | None = None, viewer: bool = True,
                 forecastbench_fixed_effects: str | Path | None = None) -> dict[str, Any]:
    """Write report.md, report.html (plots embedded), report.json and plots/*.png; returns their paths.

    `compare`: the run of the other mode to show side by side (a run directory); None looks for one in
    the same `runs/` folder (`modes.find_companion`), False shows none. When the run answered imported
    ForecastBench items, a section scores them by its leaderboard's rules (pooling as of the data's date), with
    the question effects of `forecastbench_fixed_effects` (a CSV, Parquet or JSON file of ForecastBench's
    effects) or, without it, effects estimated from the run's forecasters. `viewer`: also write the run viewer
    as static files in `OUT/viewer/` (runs up to the static viewer's size) and link every question to its page.
    """
    run_dir = Path(run_dir)
    out_dir = Path(out) if out is not None else run_dir
    cfg = load_config("benchmark", overrides=dict(config or {}))
    boot = metrics.Boot(int(cfg["bootstrap"]["draws"]), int(cfg["bootstrap"]["seed"]), float(cfg["bootstrap"]["level"]))
    run = load_run(run_dir)
    companion = None
    if compare is None or compare is True:
        found = find_companion(run_dir, run["meta"])
        companion = load_run(found) if found is not None else None
    elif compare is not False:
        check_companion(run["meta"], compare)
        companion = load_run(compare)
    fb = forecastbench_section(run_dir, forecastbench_fixed_effects)
    res = analyse(run, boot, int(cfg["calibration_bins"]), companion=companion, forecastbench=fb)
    if compare is False:
        res.pop("modes", None)  # asked for no comparison: no section at all
    plot_paths: dict[str, str] = {}
    if plots:
        from forecast_env.eval.report.plots import draw_plots

        plot_paths = draw_plots(res, out_dir / "plots")
    viewer_page = _write_viewer(run_dir, out_dir) if viewer else None
    blocks = _blocks(res, run["meta"], boot.level, plot_paths, viewer_page)
    md = render_markdown(blocks)
    md_path, html_path, json_path = out_dir / "report.md", out_dir / "report.html", out_dir / "report.json"
    atomic_write_text(md_path, md)
    atomic_write_text(html_path, render_html(blocks, out_dir, f"Run {run['meta'].get('run_id', '')}"))
    atomic_write_json(json_path, res)
    return {"markdown": md_path, "html": html_path, "json": json_path,
            "plots": [out_dir / p for p in plot_paths.values()]}
