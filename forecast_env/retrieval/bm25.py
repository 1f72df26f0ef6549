"""BM25 as of a date (docs/design.md §3): an inverted index whose statistics are computed over an eligible prefix.

Rows are numbered globally across months in (day, doc_id) order, so the articles eligible at a date
are a prefix `[0, P)` of the rows. Postings of each term are sorted by row, so the document frequency
of a term as of the date is a binary search, the document count is `P` and the average length is a
prefix sum divided by `P`: no article after the date changes any score.

When leak-flagged articles are hidden, they are excluded from the hits *and* from the statistics
(N, df, avgdl are over the eligible visible articles), so a hidden article cannot change a score.

`BM25Index.score` is exact but does not score every matching row (MaxScore, `_score_pruned`): the
rows of the rarest query terms are the candidates, and they provably hold the top k once the other
terms' most possible contributions add up to less than the k-th best candidate. It returns the same
rows and floats as `_score_exhaustive` (every posting scored), bit for bit.

Files (all `.npy`, memory-mapped when searched):
    month level  WS/index/bm25/YYYY-MM/{terms.txt, indptr.npy, rows.npy, tfs.npy, doclen.npy}
    global       WS/index/bm25/{indptr, rows, tfs, doclen, term_hash, term_id, term_off}.npy
                 + term_blob.bin (UTF-8 terms in id order, checked at lookup so hashing is exact)
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np

from forecast_env.errors import WorkspaceError
from forecast_env.retrieval.layout import REBUILD, save_npy
from forecast_env.retrieval.tokenize import tokenize

GLOBAL_FILES = ("indptr", "rows", "tfs", "doclen", "term_hash", "term_id", "term_off")
#: Rows per block of the as-of prefix sums (N and total length) kept in memory by BM25Index.
PREFIX_BLOCK = 1024
#: Relative slack of the pruned search's comparisons: its bounds and partial sums add floats in other
#: orders than a score does, so may round a few ulps below it.
BOUND_SLACK = 1e-9
#: Queries with fewer postings in [start, end) than this are scored exhaustively, which is faster there
#: (10M-article scale store: at 5-10k postings 0.44 ms vs 0.52 ms pruned, at 10-20k 0.73 vs 0.65).
PRUNE_MIN_POSTINGS = 10_000
#: Candidates scored in full first (at least 4 k), the best by their rare terms' partial scores: the
#: k-th best of their scores is the threshold that rows must beat to stay candidates.
SAMPLE_ROWS = 1024


def term_hash(term: str) -> int:
    """A stable 64-bit hash of a term (blake2b)."""
    return int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")


@dataclass
class MonthPostings:
    """The inverted index of one month: CSR over month-local term ids, rows local to the month."""

    terms: list[str]
    indptr: np.ndarray  # int64, len(terms) + 1
    rows: np.ndarray  # int32, sorted within each term
    tfs: np.ndarray  # float32 term frequencies
    doclen: np.ndarray  # int32 tokens per row


def build_month_postings(texts: Iterable[str]) -> MonthPostings:
    """Tokenize each text (one per row, in row order) and build the month's postings."""
    vocab: dict[str, int] = {}
    term_ids: list[int] = []
    row_ids: list[int] = []
    freqs: list[int] = []
    doclen: list[int] = []
    for row, text in enumerate(texts):
        toks = tokenize(text)
        doclen.append(len(toks))
        for term, tf in Counter(toks).items():
            term_ids.append(vocab.setdefault(term, len(vocab)))
            row_ids.append(row)
            freqs.append(tf)
    tid = np.asarray(term_ids, dtype=np.int64)
    order = np.argsort(tid, kind="stable")  # rows stay ascending within a term
    counts = np.bincount(tid, minlength=len(vocab))
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return MonthPostings(
        terms=list(vocab),
        indptr=indptr,
        rows=np.asarray(row_ids, dtype=np.int32)[order],
        tfs=np.asarray(freqs, dtype=np.float32)[order],
        doclen=np.asarray(doclen, dtype=np.int32),
    )


def write_month_postings(directory: Path, mp: MonthPostings) -> None:
    """Write one month's postings to `directory` (atomic per file)."""
    from forecast_env.store import atomic_write_text

    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(directory / "terms.txt", "\n".join(mp.terms))
    for name in ("indptr", "rows", "tfs", "doclen"):
        save_npy(directory / f"{name}.npy", getattr(mp, name))


def read_month_postings(directory: Path, mmap: bool = False) -> MonthPostings:
    """Read one month's postings written by `write_month_postings` (memory-mapped with `mmap`)."""
    try:
        text = (directory / "terms.txt").read_text(encoding="utf-8")
        arrays = {n: np.load(directory / f"{n}.npy", mmap_mode="r" if mmap else None)
                  for n in ("indptr", "rows", "tfs", "doclen")}
    except (OSError, ValueError) as exc:
        raise WorkspaceError(f"{directory}: unreadable BM25 month postings ({exc}); rebuild with `{REBUILD}`") from exc
    terms = text.split("\n") if text else []
    return MonthPostings(terms=terms, **arrays)


def build_global_postings(directory: Path, months: Sequence[MonthPostings | Path]) -> dict[str, int]:
    """Merge month postings (in month order) into the global index with global row numbers.

    `months` are MonthPostings or month folders (read memory-mapped, one at a time). Two passes, so
    memory holds one month's postings, never the corpus's: the first numbers the terms (first seen,
    months in order) and counts each term's postings; the second copies each month's run of every
    term into its place in memory-mapped output files. A term's postings are its months' runs in
    month order, rows ascending within each: sorted by global row, as the as-of binary search needs.
    """
    from forecast_env.store import atomic_path, atomic_write_bytes, reserve_space

    def month(i: int) -> MonthPostings:
        m = months[i]
        return read_month_postings(m, mmap=True) if isinstance(m, (str, Path)) else m

    vocab: dict[str, int] = {}
    to_global: list[np.ndarray] = []
    counts = np.zeros(0, np.int64)
    lens = []
    for i in range(len(months)):
        mp = month(i)
        l2g = np.fromiter((vocab.setdefault(t, len(vocab)) for t in mp.terms), dtype=np.int64, count=len(mp.terms))
        if len(vocab) > len(counts):
            counts = np.concatenate([counts, np.zeros(len(vocab) - len(counts), np.int64)])
        counts[l2g] += np.diff(np.asarray(mp.indptr))  # a month lists each term once
        to_global.append(l2g)
        lens.append(np.asarray(mp.doclen, dtype=np.int32))
    doclen = np.concatenate(lens) if lens else np.zeros(0, np.int32)
    if len(doclen) >= 2**31:
        raise WorkspaceError(f"{directory}: {len(doclen)} articles exceed the BM25 index's int32 row numbers")
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    total = int(indptr[-1])
    directory.mkdir(parents=True, exist_ok=True)
    with atomic_path(directory / "rows.npy") as tmp_rows, atomic_path(directory / "tfs.npy") as tmp_tfs:
        out_rows = np.lib.format.open_memmap(tmp_rows, mode="w+", dtype=np.int32, shape=(total,))
        out_tfs = np.lib.format.open_memmap(tmp_tfs, mode="w+", dtype=np.float32, shape=(total,))
        # a full disk fails here with an error, not later as SIGBUS in a mapped write
        reserve_space(tmp_rows, directory / "rows.npy")
        reserve_space(tmp_tfs, directory / "tfs.npy")
        fill = indptr[:-1].copy()  # next free slot of each global term
        offset = 0
        for i in range(len(months)):
            mp = month(i)
            local_ptr = np.asarray(mp.indptr, dtype=np.int64)
            per_term = np.diff(local_ptr)
            l2g = to_global[i]
            n = int(local_ptr[-1])
            # slot of posting j of local term t: fill[g(t)] + (j - local_ptr[t])
            pos = np.repeat(fill[l2g] - local_ptr[:-1], per_term) + np.arange(n, dtype=np.int64)
            out_rows[pos] = np.asarray(mp.rows, dtype=np.int64) + offset
            out_tfs[pos] = mp.tfs
            fill[l2g] += per_term
            offset += len(mp.doclen)
            del pos
        out_rows.flush()
        out_tfs.flush()
        del out_rows, out_tfs
    terms = list(vocab)
    hashes = np.fromiter((term_hash(t) for t in terms), dtype=np.uint64, count=len(terms))
    horder = np.argsort(hashes, kind="stable")
    encoded = [t.encode("utf-8") for t in terms]
    term_off = np.zeros(len(terms) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=term_off[1:])
    atomic_write_bytes(directory / "term_blob.bin", b"".join(encoded))
    for name, arr in (("indptr", indptr), ("doclen", doclen), ("term_hash", hashes[horder]),
                      ("term_id", horder.astype(np.int64)), ("term_off", term_off)):
        save_npy(directory / f"{name}.npy", arr)
    return {"terms": len(terms), "postings": total, "rows": len(doclen)}


@dataclass(slots=True)
class QueryTerm:
    """A query term as one `BM25Index.score` call sees it: its postings in [start, end) and weight."""

    slot: int  # its place in Counter(tokens): a row's score adds the terms' summands in this order
    wt: np.float64  # query count * idf as of the prefix
    ub: float  # the most it adds to a score: wt * (k1 + 1)
    lo: int  # its postings in rows [start, end) are rows[lo:hi]
    hi: int


class BM25Index:
    """The global BM25 index opened read-only (memory-mapped) for as-of-date scoring."""

    prune_min_postings: int = PRUNE_MIN_POSTINGS  # per index: the tests prune tiny corpora too
    # the GLOBAL_FILES arrays, memory-mapped in __init__
    indptr: np.ndarray
    rows: np.ndarray
    tfs: np.ndarray
    doclen: np.ndarray
    term_hash: np.ndarray
    term_id: np.ndarray
    term_off: np.ndarray

    def __init__(self, directory: Path, hidden: np.ndarray | None, k1: float = 1.2, b: float = 0.75):
        self.directory = Path(directory)
        self.k1, self.b = float(k1), float(b)
        try:
            for name in GLOBAL_FILES:
                setattr(self, name, np.load(self.directory / f"{name}.npy", mmap_mode="r"))
            blob_path = self.directory / "term_blob.bin"
            self.term_blob = np.memmap(blob_path, dtype=np.uint8, mode="r") if blob_path.stat().st_size else b""
        except (OSError, ValueError) as exc:
            raise WorkspaceError(
                f"{self.directory}: unreadable BM25 index file ({exc}); rebuild with `{REBUILD}`") from exc
        self.hidden = hidden if hidden is not None and hidden.any() else None
        # prefix sums per block of PREFIX_BLOCK rows, not per row: 16 bytes per block of private memory
        # (an int64 per row was 80 MB at 10M articles); a prefix adds the < PREFIX_BLOCK rows after
        # its block start at query time
        self._len_blocks, self._vis_blocks = self._block_sums()
        # hidden rows among all postings of each term a query needed them for (so that a long as-of
        # prefix counts its short rest instead): ~100 bytes per term ever asked, not per term indexed
        self._hidden_per_term: dict[int, int] = {}
        # plain ndarray views of the same maps for the pruned search: np.memmap's Python-level
        # __getitem__ costs microseconds a slice, dozens of times a query (views own no memory)
        self._maps = SimpleNamespace(**{name: np.asarray(getattr(self, name))
                                        for name in ("indptr", "rows", "tfs", "doclen")})

    def _visible_lengths(self, a: int, z: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Token counts of rows [a, z) with hidden rows at 0, and the visibility mask (None: all)."""
        dl = np.asarray(self.doclen[a:z], dtype=np.int64)
        if self.hidden is None:
            return dl, None
        vis = ~np.asarray(self.hidden[a:z])
        return np.where(vis, dl, 0), vis

    def _block_sums(self) -> tuple[np.ndarray, np.ndarray | None]:
        n = len(self.doclen)
        nb = n // PREFIX_BLOCK + 1
        lens = np.zeros(nb, np.int64)  # lens[i]: visible tokens in rows [0, i * PREFIX_BLOCK)
        vis_counts = np.zeros(nb, np.int64) if self.hidden is not None else None
        step = PREFIX_BLOCK * 256
        for s in range(0, n, step):
            z = min(n, s + step)
            full = (z - s) // PREFIX_BLOCK * PREFIX_BLOCK  # the trailing partial block is never needed
            if not full:
                break
            dl, vis = self._visible_lengths(s, s + full)
            b0 = s // PREFIX_BLOCK
            lens[b0 + 1: b0 + 1 + full // PREFIX_BLOCK] = lens[b0] + np.cumsum(dl.reshape(-1, PREFIX_BLOCK).sum(1))
            if vis_counts is not None and vis is not None:
                vis_counts[b0 + 1: b0 + 1 + full // PREFIX_BLOCK] = vis_counts[b0] + np.cumsum(
                    vis.reshape(-1, PREFIX_BLOCK).sum(1))
        return lens, vis_counts

    def prefix_stats(self, end: int) -> tuple[int, int]:
        """(visible articles, their total tokens) among rows [0, end): the as-of N and N * avgdl."""
        b = end // PREFIX_BLOCK
        dl, vis = self._visible_lengths(b * PREFIX_BLOCK, end)
        length = int(self._len_blocks[b]) + int(dl.sum())
        if vis is None or self._vis_blocks is None:  # both None exactly when no row is hidden
            return int(end), length
        return int(self._vis_blocks[b]) + int(vis.sum()), length

    def lookup(self, term: str) -> int:
        """Global term id, or -1 when the term is not in the index."""
        h = np.uint64(term_hash(term))
        i = int(np.searchsorted(self.term_hash, h))
        want = term.encode("utf-8")
        while i < len(self.term_hash) and self.term_hash[i] == h:
            tid = int(self.term_id[i])
            a, z = int(self.term_off[tid]), int(self.term_off[tid + 1])
            if bytes(self.term_blob[a:z]) == want:
                return tid
            i += 1
        return -1

    def eligible_count(self, end: int) -> int:
        """Visible articles among rows [0, end)."""
        return self.prefix_stats(end)[0]

    def score(self, tokens: Sequence[str], end: int, k: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Top-k rows in [start, end) matching >= 1 token, with statistics over the prefix [0, end).

        Returns (rows int64, scores float64) ordered by score descending, ties by row (= day, doc_id).
        """
        rows, scores, _ = self._score_pruned(tokens, end, k, start)
        return rows, scores

    def _score_pruned(self, tokens: Sequence[str], end: int, k: int,
                      start: int = 0) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
        """`score`, and (terms whose rows were candidates, terms with postings in [start, end)).

        The rows and float scores of `_score_exhaustive` bit for bit, without scoring every matching
        row (MaxScore): a term adds at most `ub = weight * idf * (k1 + 1)` to a score. The candidates
        are the rows of the rarest terms, each scored in full (the other terms' postings are
        binary-searched for it). When the other terms' bounds add up to less than the k-th best
        candidate score, no other row can enter the top k; else the next rarest term joins the
        candidates, and with all terms in, every matching row is one. A row's score adds its terms'
        summands in query order (`Counter(tokens)`), as `_score_exhaustive` does.
        """
        n_docs, total_len = self.prefix_stats(end)
        if n_docs == 0 or k <= 0 or not tokens:
            return *_no_hits(), (0, 0)
        avgdl = total_len / n_docs
        terms = self._query_terms(tokens, end, start, n_docs)
        if not terms:
            return *_no_hits(), (0, 0)
        # the bound needs tf * (k1 + 1) / (tf + k1 * norm) <= k1 + 1: k1 >= 0 and a length norm >= 0;
        # few postings are scored sooner than pruned (the pruning's numpy calls cost more)
        if (len(terms) > 1 and self.k1 >= 0 and 0 <= self.b <= 1
                and sum(t.hi - t.lo for t in terms) >= self.prune_min_postings):
            # rare terms first: their rows are few, and the terms left out (common, low idf) have the
            # smallest bounds
            order = sorted(terms, key=lambda t: (t.hi - t.lo, -t.ub))
            for j in range(1, len(terms)):
                if sum(t.hi - t.lo for t in order[:j]) < k:
                    continue  # fewer than k candidates: a row outside them is in the top k
                found = self._top_k_of_candidates(order[:j], order[j:], k, avgdl)
                if found is not None:
                    return *found, (j, len(terms))
        return *self._score_union(terms, k, avgdl), (len(terms), len(terms))

    def _query_terms(self, tokens: Sequence[str], end: int, start: int, n_docs: int) -> list[QueryTerm]:
        """The query's terms with postings in [start, end), in query order, with their as-of idf."""
        out = []
        for slot, (term, weight) in enumerate(Counter(tokens).items()):
            tid = self.lookup(term)
            if tid < 0:
                continue
            lo, hi = int(self._maps.indptr[tid]), int(self._maps.indptr[tid + 1])
            rows = self._maps.rows[lo:hi]
            cut = int(np.searchsorted(rows, end))
            first = int(np.searchsorted(rows[:cut], start)) if start > 0 else 0
            df = cut - self._hidden_postings(tid, lo, hi, cut)
            if df == 0 or first == cut:
                continue
            idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
            wt = weight * idf
            out.append(QueryTerm(slot=slot, wt=wt, ub=float(wt) * (self.k1 + 1.0), lo=lo + first, hi=lo + cut))
        return out

    def _hidden_postings(self, tid: int, lo: int, hi: int, cut: int) -> int:
        """Hidden rows among the first `cut` postings of term `tid` (rows[lo:hi])."""
        if self.hidden is None:
            return 0
        rows = self._maps.rows[lo:hi]
        if 2 * cut <= hi - lo:
            return int(np.count_nonzero(self.hidden[rows[:cut]]))
        # a long prefix: the term's total (counted once, then kept) less the short rest
        total = self._hidden_per_term.get(tid)
        if total is None:
            total = self._hidden_per_term[tid] = int(np.count_nonzero(self.hidden[rows]))
        return total - int(np.count_nonzero(self.hidden[rows[cut:]]))

    def _contribution(self, wt: np.float64, tfs: np.ndarray, dl: np.ndarray, avgdl: float) -> np.ndarray:
        """A term's summands of the scores of rows with term frequencies `tfs` and lengths `dl`."""
        k1, b = self.k1, self.b
        tf = tfs.astype(np.float64)
        # wt * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avgdl)), as in _score_exhaustive,
        # operation for operation (the same floats), in place
        norm = dl.astype(np.float64)
        norm *= b
        norm /= avgdl
        norm += 1.0 - b
        norm *= k1
        norm += tf
        tf *= wt
        tf *= k1 + 1.0
        tf /= norm
        return tf

    def _postings(self, t: QueryTerm) -> tuple[np.ndarray, np.ndarray]:
        """Visible rows (ascending) and term frequencies of a query term in [start, end)."""
        rows, tfs = self._maps.rows[t.lo:t.hi], self._maps.tfs[t.lo:t.hi]
        if self.hidden is not None:
            shown = ~self.hidden[rows]
            if not shown.all():
                rows, tfs = rows[shown], tfs[shown]
        return rows, tfs

    def _visible(self, rows: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The indices `at` into `rows` whose rows are visible."""
        return at if self.hidden is None else at[~self.hidden[rows[at]]]

    def _lookup(self, t: QueryTerm, rows: np.ndarray, dl: np.ndarray, avgdl: float) -> np.ndarray:
        """Term `t`'s summands for ascending `rows` of lengths `dl` (0 where a row lacks it)."""
        postings = self._maps.rows[t.lo:t.hi]
        pos = np.searchsorted(postings, rows)  # rows have the postings' dtype: no converted copy
        hit = postings[np.minimum(pos, len(postings) - 1)] == rows
        out = np.zeros(len(rows), np.float64)
        out[hit] = self._contribution(t.wt, self._maps.tfs[t.lo + pos[hit]], dl[hit], avgdl)
        return out

    def _union(self, terms: list[QueryTerm], avgdl: float) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """Rows (ascending) holding any of `terms`, their lengths, and each term's summands per row.

        Hidden rows included: the caller drops them (a visibility check on every candidate costs
        more than on the few that are scored in full).
        """
        parts = [(self._maps.rows[t.lo:t.hi], self._maps.tfs[t.lo:t.hi]) for t in terms]
        if len(parts) == 1:
            rows, tfs = parts[0]
            dl = self._maps.doclen[rows]
            return rows, dl, {terms[0].slot: self._contribution(terms[0].wt, tfs, dl, avgdl)}
        rows, order, new = _merge([p[0] for p in parts])
        at = np.empty(len(order), np.int64)
        at[order] = np.cumsum(new) - 1
        dl = self._maps.doclen[rows]
        cols = {}
        for t, (_, tfs), w in zip(terms, parts, np.split(at, np.cumsum([len(p[0]) for p in parts[:-1]]))):
            col = np.zeros(len(rows), np.float64)
            col[w] = self._contribution(t.wt, tfs, dl[w], avgdl)
            cols[t.slot] = col
        return rows, dl, cols

    def _full_scores(self, rows: np.ndarray, dl: np.ndarray, cols: dict[int, np.ndarray], rest: list[QueryTerm],
                     at: np.ndarray, avgdl: float) -> tuple[np.ndarray, np.ndarray]:
        """Rows `at` of the candidates (`rows`, `dl`, their `cols` of summands) and their scores."""
        summands = {slot: col[at] for slot, col in cols.items()}
        rows, dl = rows[at], dl[at]
        for t in rest:
            summands[t.slot] = self._lookup(t, rows, dl, avgdl)
        return rows, _add_in_query_order(summands)

    def _top_k_of_candidates(self, ess: list[QueryTerm], rest: list[QueryTerm], k: int,
                             avgdl: float) -> tuple[np.ndarray, np.ndarray] | None:
        """The top k when the rows of the `ess` terms provably hold it, else None.

        The candidates with the best partial scores (over `ess`) are scored in full first: their k-th
        best score `theta` is at most the final k-th. A row outside the candidates scores at most the
        sum of the `rest` bounds: unless that is below `theta`, return None. Then the `rest` terms are
        looked up for the candidates, largest bound first, and a candidate whose partial score plus
        the bounds still to add is below `theta` drops out; the survivors are scored in full.
        """
        rows, dl, cols = self._union(ess, avgdl)
        if len(rows) < k:
            return None
        # summed in query order, as the exhaustive scorer adds them (bit for bit)
        partial = cast(np.ndarray, sum(cols.values())) if len(cols) > 1 else next(iter(cols.values())).copy()
        m = min(len(rows), max(SAMPLE_ROWS, 4 * k))
        best = np.sort(np.argpartition(partial, len(rows) - m)[len(rows) - m:]) if m < len(rows) else np.arange(m)
        best = self._visible(rows, best)
        if len(best) < k:
            return None
        sample = self._full_scores(rows, dl, cols, rest, best, avgdl)[1]
        theta = float(np.partition(sample, len(sample) - k)[len(sample) - k])
        # bounds and partial sums add floats in other orders than a score and may round a few ulps
        # below it: the slack keeps each comparison on the safe side
        if not sum(t.ub for t in rest) * (1.0 + BOUND_SLACK) < theta:
            return None
        need = theta * (1.0 - BOUND_SLACK)
        live, keys, lens = None, rows, dl  # the surviving candidates (live: their indices; None: all)
        rest = sorted(rest, key=lambda t: -t.ub)  # the largest summands first: the most rows dropped
        for i, t in enumerate(rest):
            keep = partial >= need - sum(u.ub for u in rest[i:])
            # compacting costs ~1/3 of a lookup per row: worth it only when many rows drop out
            if np.count_nonzero(keep) < 0.75 * len(keep):
                sel = np.flatnonzero(keep)
                live = sel if live is None else live[sel]
                partial, keys, lens = partial[sel], keys[sel], lens[sel]
            partial += self._lookup(t, keys, lens, avgdl)
        sel = np.flatnonzero(partial >= need)
        at = self._visible(rows, sel if live is None else live[sel])
        top_rows, scores = self._full_scores(rows, dl, cols, rest, at, avgdl)
        return top_k(top_rows.astype(np.int64), scores, k)

    def _score_union(self, terms: list[QueryTerm], k: int, avgdl: float) -> tuple[np.ndarray, np.ndarray]:
        """Every visible row in [start, end) holding a term, scored: the top k of all of them."""
        parts_rows, parts_scores = [], []
        for t in terms:
            rows, tfs = self._postings(t)
            if len(rows):
                parts_rows.append(rows)
                parts_scores.append(self._contribution(t.wt, tfs, self._maps.doclen[rows], avgdl))
        if not parts_rows:
            return _no_hits()
        if len(parts_rows) == 1:
            return top_k(parts_rows[0].astype(np.int64), parts_scores[0], k)
        rows, order, new = _merge(parts_rows)
        # the merge is stable: a row's summands stay in query order, and bincount adds them in order
        scores = np.bincount(np.cumsum(new) - 1, weights=np.concatenate(parts_scores)[order])
        return top_k(rows.astype(np.int64), scores, k)

    def _score_exhaustive(self, tokens: Sequence[str], end: int, k: int,
                          start: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """`score` computed plainly: every posting of every term scored, the union by np.unique.

        The reference that `score` equals bit for bit (tests/retrieval/test_bm25.py, benchmarks/retrieval/bm25_pruning.py).
        """
        n_docs, total_len = self.prefix_stats(end)
        if n_docs == 0 or k <= 0 or not tokens:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        avgdl = total_len / n_docs
        k1, b = self.k1, self.b
        parts_rows, parts_scores = [], []
        for term, weight in Counter(tokens).items():
            tid = self.lookup(term)
            if tid < 0:
                continue
            lo, hi = int(self.indptr[tid]), int(self.indptr[tid + 1])
            rows = self.rows[lo:hi]
            cut = int(np.searchsorted(rows, end))
            rows = np.asarray(rows[:cut])
            tfs = np.asarray(self.tfs[lo:lo + cut])
            if self.hidden is not None and len(rows):
                keep = ~self.hidden[rows]
                rows, tfs = rows[keep], tfs[keep]
            df = len(rows)
            if df == 0:
                continue
            idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
            if start > 0:
                s = int(np.searchsorted(rows, start))
                rows, tfs = rows[s:], tfs[s:]
                if not len(rows):
                    continue
            tf = tfs.astype(np.float64)
            dl = self.doclen[rows].astype(np.float64)
            parts_rows.append(rows)
            parts_scores.append((weight * idf) * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / avgdl)))
        if not parts_rows:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        if len(parts_rows) == 1:
            cand, scores = parts_rows[0].astype(np.int64), parts_scores[0]
        else:
            all_rows = np.concatenate(parts_rows).astype(np.int64)
            all_scores = np.concatenate(parts_scores)
            base = int(all_rows.min())
            span = int(all_rows.max()) - base + 1
            if span <= 8 * len(all_rows):
                acc = np.bincount(all_rows - base, weights=all_scores, minlength=span)
                hit = np.bincount(all_rows - base, minlength=span) > 0
                cand = np.flatnonzero(hit)
                scores = acc[cand]
                cand = cand + base
            else:
                cand, inv = np.unique(all_rows, return_inverse=True)
                scores = np.bincount(inv, weights=all_scores)
        return top_k(cand, scores, k)


def _no_hits() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(0, np.int64), np.zeros(0, np.float64)


def _merge(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of ascending row arrays: (its rows, the stable sort order of the concatenation, and
    which sorted entries start a new row)."""
    merged = np.concatenate(parts)
    # each part is ascending: timsort merges the runs where np.unique would sort from scratch
    order = np.argsort(merged, kind="stable")
    ranked = merged[order]
    new = np.empty(len(ranked), bool)
    new[:1] = True
    np.not_equal(ranked[1:], ranked[:-1], out=new[1:])
    return ranked[new], order, new


def _add_in_query_order(cols: dict[int, np.ndarray]) -> np.ndarray:
    """Scores from per-term summands (0 where a row lacks the term), added in query order from 0.0.

    Adding 0.0 changes no float, so each row's sum is the one bincount forms over its postings alone.
    """
    scores = np.zeros(len(next(iter(cols.values()))), np.float64)
    for slot in sorted(cols):
        scores += cols[slot]
    return scores


def top_k(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (row, score) pairs: score descending, ties by smaller row."""
    if len(rows) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= kth
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rows, -scores))[:k]
    return rows[order], scores[order]
