"""The index at 10M articles (issue 14 item 6): generated news-like text, static-backend vectors,
float16 exact shards, IVF months, BM25 with as-of statistics; against the exact scan in one run.

Two commands, each resumable and separately runnable (the data stays under ROOT, outside the repo):

    nice -n 19 .venv/bin/python -m benchmarks.retrieval.index_at_scale build --root /work/scale/10m --rows 10000000 --months 10
    .venv/bin/python -m benchmarks.retrieval.index_at_scale query --root /work/scale/10m --queries 200 [--alt-codes pq4fs]
    .venv/bin/python -m benchmarks.retrieval.index_at_scale lists --root /work/scale/10m --month 2024-10   (lists x codes)

`build --upto N` generates and indexes the first N months only: a complete, searchable index of
N x rows/months articles; a later `build` with a larger N (or none) adds the remaining months.

`build` writes ROOT/ws/corpus/articles/YYYY-MM.parquet one month at a time (a month already on disk
is kept: generation is a pure function of the month's index and the seed), then runs the project's
own index build (`forecast_env.corpus_build.index.build_index`, static backend, float16 shards,
`index.ann_min_rows` = one month's rows, so every month after the first is an IVF month trained on
the months before it). The index build is resumable per month, so a killed `build` continues where
it stopped. Seconds per stage are added up across runs in ROOT/timings.json.

`--record` (on `build` and `query`) writes the planner's rates into forecast_env/rates.json: `build` the IVF
training (`ivf`: this run's IVF train + add wall seconds x OMP_NUM_THREADS per article, when the run trained
every IVF month) and the disk per article (`index.disk`: the whole workspace under ROOT/ws); `query` the
searcher's private memory after the searches (`index.search_memory`).

`query` opens the index in a fresh child process and measures, for the same queries and dates:
hybrid / dense / BM25 latency through `Searcher.search` (query embedding and `Hit` objects
included) with the IVF months and with every month scanned exactly, recall@10 of the IVF months
against the exact scan (dense top-10 and hybrid top-10), and the searcher's memory from
/proc/self/smaps_rollup (anonymous = private heap; USS and PSS include the mapped index pages this
process touched, which are page cache that every searcher process shares).

The text: every article has a story and a second one (5,000 stories in 100 sections, Zipf-distributed
popularity); title, summary and body mix the story's own words, its section's, some of the second
story's, a Zipfian background
over the embedding model's word-piece vocabulary (its head is function words, as in running text)
and rare tail words, so document frequencies span
stop-word-like to single-digit, as BM25 sees in news. Queries are 2-4 words of one story and its
section.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import child_env, module_command
from benchmarks.recording import Measurement, add_record_arguments, record_rates, start_recording

SEED = 20261130
TOPICS = 5_000
STORY_WORDS = 8
SECTIONS = 100
SECTION_WORDS = 60
START = date(2024, 1, 1)
LEAK_SHARE = 0.01
QUOTE_SHARE = 0.005
GEN_CHUNK = 50_000


# ---------------------------------------------------------------------------------------------
# generated text
# ---------------------------------------------------------------------------------------------


class TextModel:
    """Words (the static model's whole-word vocabulary, in its frequency-like id order) and topics."""

    def __init__(self, words: list[str], seed: int = SEED):
        self.words = np.array(words, dtype=object)
        rng = np.random.default_rng(seed)
        n = len(words)
        rank = np.arange(1, n + 1, dtype=np.float64)
        # Zipf over the whole vocabulary (exponent 1.2: the head, the vocabulary's first ids, is
        # function words, as in running text)
        self.background = (1.0 / rank**1.2) / np.sum(1.0 / rank**1.2)
        self.background_cdf = np.cumsum(self.background)
        # topics are stories within sections (politics, sports, ...): a section's 60 words and a
        # story's 8 words (its names and specifics) are disjoint draws of mid-frequency content words
        # (the ~300 most frequent ids are function words), so a word belongs to one section and to
        # ~3 stories, as "senate" belongs to politics and "Kalshi" to a few stories
        lo = min(300, n // 4)
        perm = rng.permutation(np.arange(lo, n))
        n_sec = SECTIONS * SECTION_WORDS
        self.section_words = perm[:n_sec].reshape(SECTIONS, SECTION_WORDS)
        rest = perm[n_sec:]
        self.story_words = rest[rng.integers(0, len(rest), size=(TOPICS, STORY_WORDS))]
        self.section_of = rng.integers(0, SECTIONS, size=TOPICS)
        pop = 1.0 / np.arange(1, TOPICS + 1) ** 0.8
        self.topic_cdf = np.cumsum(pop / pop.sum())
        # within a topic a few words dominate (Zipf inside the topic)
        w = 1.0 / np.arange(1, SECTION_WORDS + 1)
        self.section_cdf = np.cumsum(w / w.sum())
        w = 1.0 / np.arange(1, STORY_WORDS + 1) ** 0.5
        self.story_cdf = np.cumsum(w / w.sum())
        self.tail_lo = n // 2

    @classmethod
    def from_static_model(cls) -> TextModel:
        from forecast_env.retrieval.dense import Embedder

        vocab = Embedder(backend="static").model.tokenizer.get_vocab()
        words = [w for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])
                 if w.isascii() and w.isalpha() and len(w) >= 2]
        return cls(words)

    def topics(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.searchsorted(self.topic_cdf, rng.random(n), side="right").clip(0, TOPICS - 1)

    def _pick(self, rng: np.random.Generator, cdf: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
        return np.searchsorted(cdf, rng.random(shape), side="right").clip(0, len(cdf) - 1)

    def _draw(self, rng: np.random.Generator, topic: np.ndarray, second: np.ndarray, length: int,
              p_topic: float, p_tail: float) -> np.ndarray:
        """Word ids: the story's words (p_topic / 2), its section's (p_topic / 2), a second story's
        (p_topic / 8), rare tail words (p_tail), else the background."""
        n = len(topic)
        shape = (n, length)
        u = rng.random(shape)
        bg = self._pick(rng, self.background_cdf, shape)
        story = self.story_words[topic[:, None], self._pick(rng, self.story_cdf, shape)]
        section = self.section_words[self.section_of[topic][:, None], self._pick(rng, self.section_cdf, shape)]
        story2 = self.story_words[second[:, None], self._pick(rng, self.story_cdf, shape)]
        tail = rng.integers(self.tail_lo, len(self.words), size=shape)
        c1, c2, c3 = p_topic / 2, p_topic, p_topic * 1.125
        return np.where(u < c1, story, np.where(u < c2, section, np.where(
            u < c3, story2, np.where(u < c3 + p_tail, tail, bg))))

    def texts(self, rng: np.random.Generator, topic: np.ndarray, second: np.ndarray, length: int, min_len: int,
              p_topic: float, p_tail: float, sentence: int = 0) -> list[str]:
        ids = self._draw(rng, topic, second, length, p_topic, p_tail)
        lens = rng.integers(min_len, length + 1, size=len(topic))
        words = self.words[ids]
        out = []
        for row, n in zip(words, lens.tolist()):
            toks = row[:n].tolist()
            if sentence:
                for j in range(sentence - 1, n - 1, sentence):
                    toks[j] += "."
            text = " ".join(toks)
            out.append(text[:1].upper() + text[1:])
        return out

    def queries(self, rng: np.random.Generator, n: int) -> list[str]:
        """Queries of 2-4 words: one or two of a story's words and one or two of its section's."""
        out = []
        for t in self.topics(rng, n).tolist():
            a, b = int(rng.integers(1, 3)), int(rng.integers(1, 3))
            words = np.concatenate([self.story_words[t, self._pick(rng, self.story_cdf, (1, a))[0]],
                                    self.section_words[self.section_of[t], self._pick(rng, self.section_cdf, (1, b))[0]]])
            out.append(" ".join(self.words[words].tolist()))
        return out


def month_start(m: int) -> date:
    y, mo = divmod(START.month - 1 + m, 12)
    return date(START.year + y, mo + 1, 1)


def month_articles(model: TextModel, m: int, rows: int) -> Any:
    """Month `m`'s articles as an ARTICLES table sorted by (day, doc_id): a pure function of (m, rows)."""
    import pyarrow as pa

    from forecast_env import schema
    from forecast_env.store import conform

    rng = np.random.default_rng([SEED, m])
    first = month_start(m)
    n_days = (month_start(m + 1) - first).days
    titles, summaries, bodies = [], [], []
    topic_all = model.topics(rng, rows)
    second_all = model.topics(rng, rows)
    for start in range(0, rows, GEN_CHUNK):
        topic, second = topic_all[start:start + GEN_CHUNK], second_all[start:start + GEN_CHUNK]
        titles += model.texts(rng, topic, second, 9, 5, 0.6, 0.04)
        summaries += model.texts(rng, topic, second, 22, 12, 0.4, 0.04, sentence=11)
        bodies += model.texts(rng, topic, second, 90, 40, 0.35, 0.04, sentence=14)
    day_off = np.sort(rng.integers(0, n_days, size=rows))
    doc_ids = [hashlib.blake2b(f"{m}-{i}".encode(), digest_size=8).hexdigest() for i in range(rows)]
    days = np.array([first.toordinal() - date(1970, 1, 1).toordinal()], dtype=np.int32) + day_off.astype(np.int32)
    t = (days.astype(np.int64) * 86400 + rng.integers(0, 86400, size=rows)) * 1_000_000
    table = pa.table({
        "doc_id": doc_ids,
        "url": [f"https://news{z % 997}.example/{first:%Y/%m}/{i}" for i, z in enumerate(topic_all.tolist())],
        "title": titles, "summary": summaries, "body": bodies,
        "t": pa.array(t, pa.timestamp("us", tz="UTC")), "t_source": pa.array(["pub"] * rows),
        "day": pa.array(days, pa.date32()),
        "leak_flag": rng.random(rows) < LEAK_SHARE, "market_quote": rng.random(rows) < QUOTE_SHARE,
        "lang_score": pa.array(np.full(rows, 0.99, np.float32)),
    })
    order = np.lexsort((np.array(doc_ids), days))
    return conform(table.take(pa.array(order)), schema.ARTICLES)


# ---------------------------------------------------------------------------------------------
# build (resumable)
# ---------------------------------------------------------------------------------------------


class Timings:
    """Seconds per stage, added up across runs in ROOT/timings.json (a resumed build keeps counting)."""

    def __init__(self, path: Path):
        self.path = path
        self.data: dict[str, float] = json.loads(path.read_text()) if path.exists() else {}
        self.run: dict[str, float] = {}  # this run's seconds per stage (not saved: what `--record` reads)
        self.calls: dict[str, int] = {}  # this run's timed calls per stage

    def add(self, stage: str, seconds: float) -> None:
        self.data[stage] = round(self.data.get(stage, 0.0) + seconds, 2)
        self.run[stage] = self.run.get(stage, 0.0) + seconds
        self.calls[stage] = self.calls.get(stage, 0) + 1
        self.path.write_text(json.dumps(self.data, indent=1, sort_keys=True))


def timed(timings: Timings, stage: str, fn: Any) -> Any:
    """`fn` with its wall time added to `stage` (instrumentation of the real build functions)."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            timings.add(stage, time.perf_counter() - t0)

    return wrapper


#: IVF lists per month (index.ann_nlist): 8,192 for every month. The automatic rule (8 x sqrt of the
#: rows before the month) gives 8,192 from the second month on, but 2,048 for the first (65,536 rows
#: before it); measured on one 1M-row month (`lists`), 8,192 lists reach recall@10 0.955 at nprobe 256
#: in 2.5 ms, 1,024 lists 0.967 in 14 ms (benchmarks/log/2026-11-30-ivf-months-and-10m.md).
NLIST = 8192
#: Rows searched exactly (index.ann_min_rows): the first 65,536 (about two days; 8 training rows per
#: list of the first month's IVF); every later row, most of the first month included, is in an IVF
#: month trained on the rows before it.
EXACT_ROWS = 8 * NLIST
#: Training rows per list (index.ann_train_per_list): 32 (262,144 per month from the second on; k-means
#: time grows with rows x lists, and 64 would double the ~2 minutes per month).
TRAIN_PER_LIST = 32


def scale_config(rows_per_month: int) -> dict[str, Any]:
    from forecast_env.config import load_config

    cfg = load_config("corpus")
    cfg["embed"].update(backend="static", float16=True)
    cfg["index"] = dict(cfg.get("index") or {}, ann_min_rows=min(EXACT_ROWS, rows_per_month), ann_nlist=NLIST,
                        ann_train_per_list=TRAIN_PER_LIST)
    cfg["execution"] = dict(cfg.get("execution") or {}, engine="local")
    return cfg


def build(root: Path, rows: int, months: int, upto: int | None = None, stage: str = "all",
          timings: Timings | None = None) -> dict[str, Any]:
    import forecast_env.corpus_build.index as index_mod
    from forecast_env import schema
    from forecast_env.store import Workspace, atomic_write_table

    root.mkdir(parents=True, exist_ok=True)
    meta_path = root / "scale.json"
    meta = {"rows": rows, "months": months, "seed": SEED}
    if meta_path.exists() and json.loads(meta_path.read_text()) != meta:
        sys.exit(f"{root} holds a run with {meta_path.read_text()}; use another --root or the same sizes")
    meta_path.write_text(json.dumps(meta))
    timings = Timings(root / "timings.json") if timings is None else timings
    ws = Workspace.at(root / "ws", create=True)
    per = rows // months
    model = None
    from tqdm.auto import tqdm

    upto = months if upto is None else min(int(upto), months)
    for m in tqdm(range(upto), desc="generate months", unit="month"):
        path = ws.articles_dir / f"{month_start(m):%Y-%m}.parquet"
        if path.exists():
            continue
        model = model or TextModel.from_static_model()
        t0 = time.perf_counter()
        atomic_write_table(path, month_articles(model, m, per), schema.ARTICLES)
        timings.add("1 generate text", time.perf_counter() - t0)
    if stage == "generate":
        return {"generated": len(ws.article_shards()), "timings_s": timings.data}
    # time the real build's stages (this process runs the whole build: engine local)
    for name, stage in (("write_text_copy", "2 text copy"), ("build_month_postings", "3 bm25 month postings"),
                        ("embed_articles", "4 embed (static)"), ("write_dense_shard", "5 dense shard write"),
                        ("build_ivf", "6 IVF train + add"), ("build_global", "7 global merge (bm25 + rows)")):
        setattr(index_mod, name, timed(timings, stage, getattr(index_mod, name)))
    t0 = time.perf_counter()
    summary = index_mod.build_index(ws.root, scale_config(per), progress=True)
    timings.add("index build, total", time.perf_counter() - t0)
    sizes = disk_sizes(ws.root)
    (root / "sizes.json").write_text(json.dumps(sizes, indent=1))
    return {"summary": {k: summary[k] for k in ("articles", "months", "approximate", "rebuilt", "seconds")},
            "timings_s": timings.data, "disk_mb": sizes}


def disk_sizes(ws_root: Path) -> dict[str, float]:
    def mb(paths: Any) -> float:
        return round(sum(p.stat().st_size for p in paths if p.is_file()) / 2**20, 1)

    idx = ws_root / "index"
    return {"articles (parquet)": mb((ws_root / "corpus" / "articles").glob("*.parquet")),
            "text copy": mb((idx / "text").glob("*.arrow")),
            "dense exact (float16)": mb(p for p in (idx / "dense").glob("*.faiss") if ".ivf." not in p.name),
            "dense IVF-SQ8": mb((idx / "dense").glob("*.ivf.faiss")),
            "bm25 month postings": mb((idx / "bm25").glob("*/*")),
            "bm25 global": mb((idx / "bm25").glob("*.*")),
            "rows": mb((idx / "rows").glob("*")),
            "total": mb(ws_root.rglob("*"))}


#: The build's stage that trains and fills the IVF months (`Timings`).
IVF_STAGE = "6 IVF train + add"


def rates_from_build(result: dict[str, Any], timings: Timings, threads: int) -> dict[str, Measurement]:
    """The planner's `ivf` (core-s per article) and `index.disk` (bytes per article) of one `build` run."""
    if "summary" not in result:  # --stage generate: no index built
        return {}
    articles = int(result["summary"]["articles"])
    total_mb = result["disk_mb"]["total"]
    rates = {"index.disk": Measurement(round(total_mb * 2**20 / articles),
                                       f"{total_mb / 1024:.1f} GiB for the index of {articles:,} articles (the "
                                       "workspace: article store, text copy, dense shards, IVF, BM25, rows)")}
    ivf_s, ivf_months = timings.run.get(IVF_STAGE, 0.0), len(result["summary"]["approximate"])
    # the rate is per article of the corpus, so only a run that trained every IVF month gives it
    if ivf_s > 0 and timings.calls.get(IVF_STAGE) == ivf_months:
        rates["ivf"] = Measurement(float(f"{ivf_s * threads / articles:.4g}"),
                                   f"{ivf_s:.0f} s on {threads} thread(s) to train the {ivf_months} IVF months of "
                                   f"{articles:,} articles")
    return rates


def rates_from_query(result: dict[str, Any]) -> dict[str, Measurement]:
    """The planner's `index.search_memory` (bytes) of one `query` run: the searcher's private memory after the searches."""
    mb = result["memory_mb"]["after_searches"]["anonymous"]
    return {"index.search_memory": Measurement(round(mb * 2**20), f"the searcher's private (anonymous) memory over "
                                               f"the {result['articles']:,}-article index after the searches "
                                               f"({mb:.0f} MiB)")}


# ---------------------------------------------------------------------------------------------
# query (run in a fresh process)
# ---------------------------------------------------------------------------------------------


def memory() -> dict[str, float]:
    """This process's memory (MB) from /proc/self/smaps_rollup."""
    vals: dict[str, float] = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[-1] == "kB":
            vals[key] = int(parts[0]) / 1024
    return {"anonymous": round(vals.get("Anonymous", 0), 1),
            "uss": round(vals.get("Private_Clean", 0) + vals.get("Private_Dirty", 0), 1),
            "pss": round(vals.get("Pss", 0), 1), "rss": round(vals.get("Rss", 0), 1)}


def alt_sweep(root: Path, searcher: Any, codes: str, vecs: np.ndarray, truth: list[np.ndarray], lo: int, hi: int,
              hidden: Any, pct: Any, recall: Any) -> dict[str, Any]:
    """The IVF months rebuilt with other codes (cached under ROOT/alt_CODES, same training rows), swept."""
    from forecast_env.retrieval.ann import build_ivf
    from forecast_env.retrieval.layout import IndexLayout

    layout = IndexLayout(root / "ws" / "index")
    ann = []
    for m, month in enumerate(searcher.months):
        if month.get("kind") != "ivf":
            ann.append(None)
            continue
        path = root / f"alt_{codes}" / f"{month['month']}.ivf.faiss"
        start = int(month.get("start", 0))
        if not path.exists():
            params = {"nlist": month["nlist"], "nprobe": 0, "candidates": 0, "train_rows": month["train_rows"],
                      "centre": True, "codes": codes}
            if start:
                params["start"] = start
            build_ivf(path, [layout.dense(x["month"]) for x in searcher.months[: m + 1]], params)
        ann.append({"path": path, "nprobe": 0, "candidates": 1000, "start": start})
    return nprobe_sweep((64, 128, 256, 512), searcher.dense.paths, searcher.offsets, ann, hidden, vecs, truth, lo, hi,
                        pct, recall, searcher.threads)


def nprobe_sweep(nprobes: tuple[int, ...], paths: Any, offsets: Any, ann: list[Any], hidden: Any, vecs: np.ndarray,
                 truth: list[np.ndarray], lo: int, hi: int, pct: Any, recall: Any, threads: int = 1) -> dict[Any, Any]:
    """Recall@10 against `truth` and latency of dense search over rows [lo, hi) at each nprobe."""
    from forecast_env.retrieval.dense import DenseShards

    sweep: dict[Any, Any] = {}
    for nprobe in nprobes:
        shards = DenseShards(paths, offsets, hidden, [dict(a, nprobe=nprobe) if a else None for a in ann], threads)
        lat, got = [], []
        for i in range(len(vecs)):
            t0, c0 = time.perf_counter(), time.process_time()
            got.append(shards.search(vecs[i:i + 1], lo, hi, 10)[0][0])
            lat.append((time.perf_counter() - t0, time.process_time() - c0))
        sweep[nprobe] = {"recall@10": recall([g.tolist() for g in got], [t.tolist() for t in truth]), **pct(lat)}
        shards.close()
    return sweep


def query(root: Path, n_queries: int, n_exact: int, alt_codes: str | None = None) -> dict[str, Any]:
    import warnings

    from forecast_env.enums import SEARCH_MODES
    from forecast_env.retrieval import Searcher
    from forecast_env.retrieval.dense import DenseShards

    warnings.simplefilter("ignore")
    model = TextModel.from_static_model()
    base = memory()
    from forecast_env.config import load_config

    cfg = load_config("corpus")
    # what auto gives a process without a thread budget: the cores, up to 4 (this process keeps
    # OMP_NUM_THREADS=1 so that faiss does not nest its own threads inside the month threads)
    cfg["retrieval"]["search_threads"] = max(1, min(4, os.cpu_count() or 1))
    searcher = Searcher.open(root / "ws", cfg)
    searcher.embedder.encode_queries(["warm up"])
    opened = memory()
    exact = DenseShards([searcher.dense.paths[i] for i in range(len(searcher.months))], searcher.offsets,
                        None if searcher.visible.all() else ~searcher.visible, threads=searcher.threads)
    approx = searcher.dense
    rng = np.random.default_rng([SEED, 99])
    qs = model.queries(rng, n_queries)
    first, last = searcher.first_day, searcher.last_day
    span = (last - first).days
    # dates: uniform over the corpus (the as-of prefix ends anywhere), and the last day (everything)
    dates = [first + timedelta(days=int(d)) for d in rng.integers(0, span + 1, size=n_queries)]
    out: dict[str, Any] = {"articles": int(searcher.offsets[-1]), "months": len(searcher.months),
                           "ivf_months": sum(m.get("kind") == "ivf" for m in searcher.months),
                           "exact_rows": int(next((int(searcher.offsets[i]) + int(m.get("start", 0))
                                                   for i, m in enumerate(searcher.months) if m.get("kind") == "ivf"),
                                                  int(searcher.offsets[-1]))),
                           "nprobe": sorted({a["nprobe"] for a in approx.ann if a}),
                           "search_threads": searcher.threads, "queries": n_queries, "exact_queries": n_exact}

    def run(mode: str, dense: Any, which: list[int], when: str) -> tuple[list[tuple[float, float]], list[list[str]]]:
        searcher.dense = dense
        lat, ids = [], []
        for i in which:
            d = last if when == "last" else dates[i]
            t0, c0 = time.perf_counter(), time.process_time()
            hits = searcher.search(qs[i], d, k=10, mode=mode)
            lat.append((time.perf_counter() - t0, time.process_time() - c0))
            ids.append([h.doc_id for h in hits])
        return lat, ids

    def pct(lat: list[tuple[float, float]]) -> dict[str, float]:
        wall, cpu = np.array([x[0] for x in lat]), np.array([x[1] for x in lat])
        return {"p50_ms": round(float(np.median(wall)) * 1000, 2), "p95_ms": round(float(np.percentile(wall, 95)) * 1000, 2),
                "cpu_p50_ms": round(float(np.median(cpu)) * 1000, 2)}

    def recall(a: list[list[Any]], b: list[list[Any]]) -> float:
        return round(float(np.mean([len(set(x) & set(y)) / max(1, len(y)) for x, y in zip(a, b)])), 4)

    allq, exq = list(range(n_queries)), list(range(n_exact))
    # each query is new to the embedder: the query-vector cache would hide the embedding cost
    searcher.embedder.query_cache_size = 0
    # warm: one untimed pass of every query and date through both paths (a serving searcher's index
    # pages are in the page cache; the first pass after a build or a reboot reads them from disk)
    t0 = time.perf_counter()
    for when in ("last", "random"):
        run("hybrid", approx, allq, when)
        run("dense", exact, exq, when)
    out["warm_pass_s"] = round(time.perf_counter() - t0, 1)
    for when in ("last", "random"):
        for mode in SEARCH_MODES:
            lat, ivf_ids = run(mode, approx, allq, when)
            out[f"{when}/{mode}/ivf"] = pct(lat)
            if mode == "bm25":
                continue
            lat_x, ex_ids = run(mode, exact, exq, when)
            out[f"{when}/{mode}/exact"] = pct(lat_x)
            out[f"{when}/{mode}/ivf_same_queries"] = pct(run(mode, approx, exq, when)[0])
            out[f"{when}/{mode}/recall@10_vs_exact"] = recall(ivf_ids[:n_exact], ex_ids)
    # the same hybrid searches on one thread (months one after another, BM25 after them)
    searcher.threads, approx.threads = 1, 1
    for when in ("last", "random"):
        out[f"{when}/hybrid/ivf/1 thread"] = pct(run("hybrid", approx, allq, when)[0])
    searcher.threads = approx.threads = out["search_threads"]
    searched = memory()  # the searcher's own, before the sweeps below open more indexes
    # recall against cost on the IVF months alone (the exact months would dilute it), as of the last
    # day: nprobe is a search-time setting, swept here
    first_ivf = next((m for m, spec in enumerate(approx.ann) if spec), None)
    if first_ivf is not None:
        lo, hi = out["exact_rows"], int(searcher.offsets[-1])  # the approximate rows only
        vecs = searcher.embedder.encode_queries([qs[i] for i in exq])
        truth = [r for r, _ in exact.search(vecs, lo, hi, 10)]
        hidden = None if searcher.visible.all() else ~searcher.visible
        sweep = nprobe_sweep((32, 64, 128, 256, 512), approx.paths, approx.offsets, approx.ann, hidden, vecs, truth,
                             lo, hi, pct, recall, searcher.threads)
        lat = []
        for i in range(len(exq)):
            t0, c0 = time.perf_counter(), time.process_time()
            exact.search(vecs[i:i + 1], lo, hi, 10)
            lat.append((time.perf_counter() - t0, time.process_time() - c0))
        sweep["exact"] = pct(lat)
        out[f"approximate rows only ({hi - lo}, {len(approx.ann) - first_ivf} IVF months), last day, dense: nprobe sweep"] = sweep
        if alt_codes:
            out[f"same, {alt_codes} codes (1,000 candidates): nprobe sweep"] = alt_sweep(
                root, searcher, alt_codes, vecs, truth, lo, hi, hidden, pct, recall)
    searcher.dense = approx
    out["memory_mb"] = {"before_open": base, "after_open": opened, "after_searches": searched,
                        "after_sweeps": memory()}
    return out


def lists(root: Path, month: str, variants: list[str], n_queries: int, nprobes: tuple[int, ...]) -> dict[str, Any]:
    """One month's IVF built several ways (lists x codes), each trained like the index build (an even
    sample of the earlier months, centred), swept over nprobe on one thread, warm: recall@10 against
    the month's exact top 10 and p50 of IVF search + exact re-ranking of 100 candidates."""
    import faiss

    from forecast_env.retrieval.ann import training_sample
    from forecast_env.retrieval.dense import Embedder, read_index
    from forecast_env.retrieval.layout import IndexLayout

    faiss.omp_set_num_threads(1)
    layout = IndexLayout(root / "ws" / "index")
    manifest = json.loads(layout.manifest.read_text())
    names = [m["month"] for m in manifest["months"]]
    earlier = [layout.dense(m) for m in names[: names.index(month)]]
    flat = read_index(layout.dense(month))
    queries = TextModel.from_static_model().queries(np.random.default_rng([SEED, 99]), n_queries)
    vecs = np.ascontiguousarray(Embedder(backend="static").encode_queries(queries), dtype=np.float32)
    _, truth = flat.search(vecs, 10)
    out: dict[str, Any] = {"month": month, "rows": int(flat.ntotal), "queries": n_queries}
    t0 = time.perf_counter()
    flat.search(vecs[:20], 10)
    out["exact scan of the month, ms per query"] = round((time.perf_counter() - t0) / 20 * 1000, 2)
    for variant in variants:  # e.g. sq8:8192, sq4:4096, rabitq:1024
        codes, nlist = variant.split(":")[0], int(variant.split(":")[1])
        path = root / "lists" / f"{month}.{codes}.{nlist}.faiss"
        if not path.exists():
            train = training_sample(earlier, min(32 * nlist, 300_000))
            mean = train.mean(0, keepdims=True)
            quantizer = faiss.IndexFlatIP(flat.d)
            if codes == "rabitq":  # 1-bit RaBitQ codes, fast-scan kernels
                ivf = faiss.IndexIVFRaBitQFastScan(quantizer, flat.d, nlist, faiss.METRIC_INNER_PRODUCT)
            else:
                qt = {"sq8": faiss.ScalarQuantizer.QT_8bit, "sq4": faiss.ScalarQuantizer.QT_4bit}[codes]
                ivf = faiss.IndexIVFScalarQuantizer(quantizer, flat.d, nlist, qt, faiss.METRIC_INNER_PRODUCT)
            ivf.cp.seed = 1234
            ivf.train(np.ascontiguousarray(train - mean))
            for a in range(0, flat.ntotal, 1 << 16):
                ivf.add(np.ascontiguousarray(flat.reconstruct_n(a, min(1 << 16, flat.ntotal - a)) - mean))
            path.parent.mkdir(parents=True, exist_ok=True)
            faiss.write_index(ivf, str(path))
        ivf = read_index(path)
        for nprobe in nprobes:
            params = faiss.SearchParametersIVF()
            params.nprobe = nprobe
            cand = 100 if codes != "rabitq" else 1000  # 1-bit estimates need more candidates
            for rnd in range(2):  # the first round warms the pages
                got, lat = [], []
                for i in range(len(vecs)):
                    t1 = time.perf_counter()
                    _, ids = ivf.search(vecs[i:i + 1], cand, params=params)
                    ids = ids[0][ids[0] >= 0]
                    exact = flat.reconstruct_batch(ids) @ vecs[i]
                    got.append(ids[np.argsort(-exact)[:10]])
                    lat.append(time.perf_counter() - t1)
            out[f"{codes}, {nlist} lists, nprobe {nprobe}"] = {
                "recall@10": round(float(np.mean([len(set(g.tolist()) & set(t.tolist())) / 10
                                                  for g, t in zip(got, truth)])), 3),
                "p50_ms": round(float(np.median(lat)) * 1000, 2)}
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="generate the months and build the index (resumable)")
    b.add_argument("--root", type=Path, default=Path("/work/scale/10m"))
    b.add_argument("--rows", type=int, default=10_000_000)
    b.add_argument("--months", type=int, default=10)
    b.add_argument("--upto", type=int, default=None,
                   help="generate and index the first UPTO months only (a later run with more continues)")
    b.add_argument("--stage", choices=("all", "generate"), default="all",
                   help="generate: write the article months only (the index build runs with `all`)")
    add_record_arguments(b)
    q = sub.add_parser("query", help="latency, recall and memory of the built index (fresh process)")
    q.add_argument("--root", type=Path, default=Path("/work/scale/10m"))
    q.add_argument("--queries", type=int, default=200)
    q.add_argument("--exact-queries", type=int, default=50, help="queries also run against the exact scan")
    q.add_argument("--alt-codes", choices=("pq4fs", "sq8"), default=None,
                   help="also sweep the IVF months rebuilt with these codes (built once under ROOT/alt_CODES)")
    q.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    add_record_arguments(q)
    lp = sub.add_parser("lists", help="one month's IVF built several ways (lists, codes), swept over nprobe")
    lp.add_argument("--root", type=Path, default=Path("/work/scale/10m"))
    lp.add_argument("--month", default="2024-10")
    lp.add_argument("--variants", default="sq8:1024,sq8:4096,sq8:8192,sq4:4096,rabitq:4096",
                    help="comma-separated CODES:NLIST (codes: sq8, sq4, rabitq); built once under ROOT/lists")
    lp.add_argument("--queries", type=int, default=100)
    lp.add_argument("--nprobe", default="64,128,256,512")
    args = ap.parse_args(argv)
    # the threads of the run are part of its command (the IVF rate is per core)
    env = [f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}"] if "OMP_NUM_THREADS" in os.environ else []
    recording = (start_recording(args, "benchmarks.retrieval.index_at_scale", sys.argv[1:] if argv is None else argv,
                                 env) if args.cmd in ("build", "query") and not getattr(args, "child", False) else None)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.cmd == "build":
        timings = Timings(args.root / "timings.json")
        result = build(args.root, args.rows, args.months, args.upto, args.stage, timings)
        print(json.dumps(result, indent=1))
        record_rates(recording, rates_from_build(result, timings, int(os.environ["OMP_NUM_THREADS"])))
    elif args.cmd == "lists":
        print(json.dumps(lists(args.root, args.month, args.variants.split(","), args.queries,
                               tuple(int(x) for x in args.nprobe.split(","))), indent=1))
    elif args.child:
        print(json.dumps(query(args.root, args.queries, args.exact_queries, args.alt_codes)))
    else:
        cmd = module_command("benchmarks.retrieval.index_at_scale", "query", "--root", str(args.root), "--queries",
                             str(args.queries), "--exact-queries", str(args.exact_queries), "--child") + (
                   ["--alt-codes", args.alt_codes] if args.alt_codes else [])
        res = subprocess.run(cmd, capture_output=True, text=True, check=False, env=child_env())
        if res.returncode:
            sys.exit(res.stderr)
        result = json.loads(res.stdout.strip().splitlines()[-1])
        print(json.dumps(result, indent=1))
        record_rates(recording, rates_from_query(result))


if __name__ == "__main__":
    main()
