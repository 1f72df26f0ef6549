"""The run viewer at scale: a generated run of N events x A agents x R rollouts, its events page and question pages.

    .venv/bin/python -m benchmarks.eval.viewer_scale --template demo_ws/runs/RUN [--events 10000] [--agents 5]
        [--rollouts 3] [--out /tmp/viewer_scale] [--keep]

The run is made from a real run's parts (`--template`, e.g. the demo's): each generated part is one of the
template's parts (round robin over the retrieval agent's parts, so searches, hits, opened articles and notebook
entries are real) with its event id, agent and rollout rewritten, and its observations cut (3 hits per search,
400 characters per article) so a part is about 20 KB (the demo's are 150 KB; 150,000 of them would be 22 GB). The
run's forecasts.parquet and events.parquet, and the workspace's events and daily beliefs, are the template's
rows replicated under the new ids. Nothing here is a mock of the viewer: it reads the generated files as it
reads any run.

Measured, in this process, on the data layer the server answers from (`forecast_env.eval.viewer.RunView`) and
through the HTTP server on 127.0.0.1 (urllib):
- the first view's index build (`viewer_index.parquet`), then the events page (`api/events`) cold and warm;
- a question page (`api/question`) for 20 random events after the index exists (median and max);
- the obvious alternative for a question page: scanning every part file of the run for the event (`glob`).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Any

import polars as pl


def _trim_part(part: dict[str, Any]) -> dict[str, Any]:
    """A smaller copy of a part: 3 hits per search result with short summaries, article texts cut to 400
    characters, the notebook echo of each observation dropped (the part's own notebook table stays)."""
    out = dict(part)
    steps = []
    for st in part.get("steps") or []:
        st = dict(st)
        obs = st.get("observation")
        try:
            doc = json.loads(obs) if isinstance(obs, str) else None
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict):
            doc.pop("notebook", None)
            tr = doc.get("tool_result")
            if isinstance(tr, dict):
                if isinstance(tr.get("hits"), list):
                    tr["hits"] = [dict(h, summary=str(h.get("summary") or "")[:80]) for h in tr["hits"][:3]]
                for key in ("text", "body", "summary"):
                    if isinstance(tr.get(key), str):
                        tr[key] = tr[key][:400]
            st["observation"] = json.dumps(doc)
        steps.append(st)
    out["steps"] = steps
    out["tool_calls"] = [dict(c, result_doc_ids=(c.get("result_doc_ids") or [])[:3]) for c in part.get("tool_calls") or []]
    return out


def generate(template: Path, out: Path, n_events: int, n_agents: int, n_rollouts: int) -> Path:
    """Write WS (events, beliefs) and WS/runs/scale (run.json, tables, parts) under `out`; return the run dir."""
    if out.exists():
        shutil.rmtree(out)
    tpl_ws = Path(json.loads((template / "run.json").read_text()).get("workspace") or template.parent.parent)
    parts = sorted((template / "parts" / "retrieval").glob("*/r0.json")) or sorted((template / "parts").glob("*/*/r0.json"))
    tpl_parts = [_trim_part(json.loads(p.read_text())) for p in parts]
    tpl_events = [p["event_id"] for p in tpl_parts]
    ids = [f"pm-s{i:06d}" for i in range(n_events)]
    src_of = {eid: tpl_events[i % len(tpl_events)] for i, eid in enumerate(ids)}
    agents = [f"agent{a}" for a in range(n_agents)]
    run_dir = out / "ws" / "runs" / "scale"
    (out / "ws" / "events").mkdir(parents=True)
    run_dir.mkdir(parents=True)
    mapping = pl.DataFrame({"event_id": ids, "src": [src_of[e] for e in ids]})

    def replicate(frame: pl.DataFrame) -> pl.DataFrame:
        return (mapping.join(frame.rename({"event_id": "src"}), on="src", how="inner").drop("src")
                .select(frame.columns))

    for name in ("events", "beliefs", "schedule", "legs"):
        src = tpl_ws / "events" / f"{name}.parquet"
        if src.exists():
            replicate(pl.read_parquet(src)).write_parquet(out / "ws" / "events" / f"{name}.parquet")
    replicate(pl.read_parquet(template / "events.parquet")).write_parquet(run_dir / "events.parquet")
    fc = pl.read_parquet(template / "forecasts.parquet").filter(pl.col("agent") == "retrieval", pl.col("rollout") == 0)
    fc = replicate(fc)
    frames = [fc.with_columns(agent=pl.lit(a), rollout=pl.lit(r, pl.Int32), run_id=pl.lit("scale"))
              for a in agents for r in range(n_rollouts)]
    pl.concat(frames).write_parquet(run_dir / "forecasts.parquet")
    market = template / "market.parquet"
    if market.exists():
        replicate(pl.read_parquet(market)).write_parquet(run_dir / "market.parquet")
    rec = json.loads((template / "run.json").read_text())
    rec.update(run_id="scale", workspace=str(out / "ws"), agents=[{"label": a} for a in agents], rollouts=n_rollouts,
               event_ids=ids)
    (run_dir / "run.json").write_text(json.dumps(rec, default=str))
    by_src = {p["event_id"]: p for p in tpl_parts}
    for a in agents:
        for eid in ids:
            folder = run_dir / "parts" / a / eid
            folder.mkdir(parents=True)
            base = by_src[src_of[eid]]
            for r in range(n_rollouts):
                part = dict(base, run_id="scale", agent=a, event_id=eid, rollout=r)
                part["forecasts"] = [dict(f, event_id=eid, rollout=r) for f in base.get("forecasts") or []]
                part["tool_calls"] = [dict(c, event_id=eid, rollout=r) for c in base.get("tool_calls") or []]
                part["notebook"] = [dict(n, event_id=eid, rollout=r) for n in base.get("notebook") or []]
                (folder / f"r{r}.json").write_text(json.dumps(part))
    return run_dir


def _timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def measure(run_dir: Path, n_questions: int = 20, seed: int = 0) -> dict[str, Any]:
    from forecast_env.eval.viewer import RunView
    from forecast_env.eval.viewer.server import make_server

    out: dict[str, Any] = {}
    index = run_dir / "viewer_index.parquet"
    if index.exists():
        index.unlink()
    out["first_open_s"], view = _timed(lambda: RunView.open(run_dir))
    out["events_cold_s"], events = _timed(view.events)
    out["n_events"] = len(events["events"])
    out["index_s"], _ = _timed(lambda: view.question(events["events"][0]["event_id"]))
    out["index_exists"] = index.exists()
    out["events_warm_s"], _ = _timed(view.events)
    rng = random.Random(seed)
    ids = [e["event_id"] for e in rng.sample(events["events"], n_questions)]
    times = [_timed(lambda e=e: view.question(e))[0] for e in ids]
    out["question_median_s"], out["question_max_s"] = statistics.median(times), max(times)
    # the same through the server (a fresh RunView in the server: index already on disk)
    import threading

    server = make_server(run_dir)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{port}/"
        out["http_events_s"], _ = _timed(lambda: urllib.request.urlopen(base + "api/events", timeout=120).read())
        http = [_timed(lambda e=e: urllib.request.urlopen(
            base + "api/question?id=" + urllib.request.quote(e), timeout=120).read())[0] for e in ids]
        out["http_question_median_s"], out["http_question_max_s"] = statistics.median(http), max(http)
    finally:
        server.shutdown()
        server.server_close()
    # the obvious alternative: find a question's parts by scanning every part of the run
    e = ids[0]
    out["scan_question_s"], found = _timed(
        lambda: [p for p in (run_dir / "parts").glob("*/*/r*.json") if p.parent.name == e])
    out["scan_found_parts"] = len(found)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--template", type=Path, required=True, help="a real run directory (its parts are the templates)")
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--agents", type=int, default=5)
    ap.add_argument("--rollouts", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("/tmp/viewer_scale"))
    ap.add_argument("--reuse", action="store_true", help="measure an already generated run under --out")
    args = ap.parse_args()
    from forecast_env.rates import machine_state

    state = machine_state()
    run_dir = args.out / "ws" / "runs" / "scale"
    if not args.reuse:
        t0 = time.perf_counter()
        run_dir = generate(args.template, args.out, args.events, args.agents, args.rollouts)
        print(f"generated {args.events} events x {args.agents} agents x {args.rollouts} rollouts in "
              f"{time.perf_counter() - t0:.1f} s")
    figures = measure(run_dir)
    figures["machine"] = state
    print(json.dumps(figures, indent=1, default=str))


if __name__ == "__main__":
    main()
