"""The question pipeline's own cost (model time excluded), and the generated split under the audit and the baselines.

    python -m benchmarks.questions.pipeline_cost [--preset questions_large] [--every 7] [--per-date 4] [--record]

Builds the preset (seed 0; default `questions_large`: 80 events whose news reports each outcome after it closes)
into bench_out/questions_cost, then runs `generate_questions` and `resolve_questions` against a scripted
OpenAI-compatible server on 127.0.0.1 (tests/support/question_data.py: it proposes questions about the seed's
truth event and resolves them by quoting the outcome reports; one resolver of three answers wrong, so the vote
is exercised). The server's own time is measured and subtracted: what remains is the pipeline's cost (seed
sampling, the research tools, schema checks, quote checks, every vetting check, the events import), reported
per 1,000 seed articles, with the model tokens per accepted question. A workspace holding only the generated
events (the generated split) then gets audit checks 2 (blind structure probe) and 6 (cross-question exposure)
and a run of the baselines (uniform, base_rate, retrieval).

The scripted proposer reads the truth, so the yield and precision here say nothing about a model; they are
benchmarks/questions/local_model.py's. What this measures is the code around the model. The scripted server
counts tokens as characters / 4 (the prompts are the pipeline's real prompts; local_model.py's real tokenizer
gives the comparison in RESULTS.md). `--record` writes the planner's three rates (`rates_from`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from benchmarks.recording import Measurement, add_record_arguments, record_rates, start_recording

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench_out"


def rates_from(out: dict[str, Any]) -> dict[str, Measurement]:
    """The planner's rates (forecast_env/rates.json) from a run's results."""
    seeds, accepted = out["seeds"], out["accepted"]
    on = f"the {out['preset']} sample world, a scripted model (tokens: characters / 4)"
    rates = {}
    if seeds:
        rates["questions.tokens_per_seed"] = Measurement(out["tokens_per_seed"], f"{seeds} seed articles", on)
        rates["questions.pipeline_seconds_per_seed"] = Measurement(
            round(out["seconds"]["pipeline"] / seeds, 4), "generate + resolve wall time less the scripted server's", on)
    if accepted:
        rates["questions.tokens_per_accepted"] = Measurement(out["tokens_per_accepted"], f"{accepted} accepted", on)
    return rates


def _usage(body: dict, reply: dict) -> dict:
    """`reply` with its token counts as characters / 4 of the request's messages and the reply's content."""
    chars = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
    out = len(str(reply["choices"][0]["message"].get("content") or ""))
    reply["usage"] = {"prompt_tokens": chars // 4, "completion_tokens": out // 4, "total_tokens": (chars + out) // 4}
    return reply


def main(argv: list[str] | None = None) -> None:
    import sys

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="questions_large")
    ap.add_argument("--dates", default="2025-06-15..2026-05-20")
    ap.add_argument("--every", type=int, default=7)
    ap.add_argument("--per-date", type=int, default=4)
    add_record_arguments(ap)
    argv = sys.argv[1:] if argv is None else argv
    args = ap.parse_args(argv)
    recording = start_recording(args, "benchmarks.questions.pipeline_cost", argv)

    import polars as pl

    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.envs.events.build import build_events, import_questions
    from forecast_env.eval.audit.run import run_audit
    from forecast_env.eval.report.metrics import agent_table
    from forecast_env.eval.runs.runner import run_benchmark
    from forecast_env.questions import generate_questions, questions_report, resolve_questions
    from forecast_env.questions.store import QuestionFiles
    from forecast_env.synth import synthesize
    from tests.support.chat_server import ChatServer
    from tests.support.question_data import scripted_model, world_facts

    root = OUT / "questions_cost" / args.preset
    if not (root / "ws" / "events" / "events.parquet").exists():
        shutil.rmtree(root, ignore_errors=True)
        synthesize(root / "world", preset=args.preset, seed=0, progress=False)
        build_corpus(sorted((root / "world" / "news").glob("*.warc.gz")), root / "ws", workers=1, progress=False)
        build_index(root / "ws", progress=False)
        build_events(root / "world" / "polymarket", root / "ws", progress=False)
    ws = root / "ws"
    shutil.rmtree(ws / "questions", ignore_errors=True)
    facts = world_facts(root)
    handler = scripted_model(facts, wrong_resolver=1)
    server_seconds = [0.0]

    def timed(body: dict) -> dict:
        t = time.perf_counter()
        out = _usage(body, handler(body))
        server_seconds[0] += time.perf_counter() - t
        return out

    cfg: dict[str, Any] = {"llm": {"model": "scripted", "max_retries": 0}, "seeds": {"per_date": args.per_date},
                           "dates": {"every_days": args.every}}
    with ChatServer(default=timed) as srv:
        cfg["llm"]["base_url"] = srv.base_url
        t0 = time.perf_counter()
        gen = generate_questions(ws, args.dates, cfg, progress=False)
        t1 = time.perf_counter()
        res = resolve_questions(ws, cfg, progress=False)
        t2 = time.perf_counter()
        n_requests = len(srv.requests)
    rep = questions_report(ws)
    seeds = rep["seeds"]
    # the generated split alone: a workspace whose events are only the accepted questions
    gws = root / "generated_ws"
    shutil.rmtree(gws, ignore_errors=True)
    shutil.copytree(ws, gws, ignore=shutil.ignore_patterns("events", "runs", "audit"))
    t3 = time.perf_counter()
    imported = import_questions(QuestionFiles.of(gws).accepted, gws, progress=False, source="generated")
    t4 = time.perf_counter()
    audits = {}
    for split in ("eval", "train"):
        report = run_audit(gws, split=split, checks=["structure", "siblings"], progress=False)
        audits[split] = {c.name: {"verdict": c.verdict, "reason": c.reason} for c in report.checks}
    run_dir = run_benchmark(gws, agents="uniform,base_rate,retrieval", split="eval", rollouts=1, progress=False)
    fc = pl.read_parquet(run_dir / "forecasts.parquet")
    summary = [{k: r[k] for k in r if k in ("agent", "brier", "accuracy", "n_events", "events", "rows")}
               for r in agent_table(fc)]
    events = pl.read_parquet(gws / "events" / "events.parquet")
    pipeline = (t2 - t0) - server_seconds[0]
    out = {
        "preset": args.preset, "dates": args.dates, "every_days": args.every, "per_date": args.per_date,
        "seeds": seeds, "drafts": rep["drafts"], "accepted": rep["accepted"], "funnel": rep["funnel"],
        "agreement": rep["agreement"], "distributions": rep["distributions"], "balance": rep["balance"],
        "model_requests": n_requests, "tokens_per_accepted": rep["tokens"]["per_accepted"],
        "tokens_per_seed": round(rep["tokens"]["total"] / seeds, 1) if seeds else None,
        "seconds": {"generate": round(t1 - t0, 2), "resolve_and_vet_and_import": round(t2 - t1, 2),
                    "scripted_server": round(server_seconds[0], 2), "pipeline": round(pipeline, 2),
                    "import_generated_split": round(t4 - t3, 2)},
        "pipeline_seconds_per_1000_seeds": round(1000 * pipeline / seeds, 1) if seeds else None,
        "generated_split": {"events": events.height, "by_split": dict(events.group_by("split").len().iter_rows()),
                            "kept": imported["kept"], "audit": audits},
        "baselines": summary,
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "questions_cost.json").write_text(json.dumps(out, indent=1, sort_keys=True, default=str))
    print(json.dumps({k: v for k, v in out.items() if k not in ("funnel",)}, indent=1, sort_keys=True, default=str)[:8000])
    print("generate summary:", {k: gen[k] for k in ("drafts", "status")}, "resolve:", res["status"])
    record_rates(recording, rates_from(out))


if __name__ == "__main__":
    main()
