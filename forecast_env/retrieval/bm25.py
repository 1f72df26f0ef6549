"""BM25 as of a date (docs/design.md §3): an inverted index whose statistics are computed over an eligible prefix.

Rows are numbered globally across months in (day, doc_id) order, so the articles eligible at a date
are a prefix `[0, P)` of the rows. Postings of each term are sorted by row, so the document frequency
of a term as of the date is a binary search, the document count is `P` and the average length is a
prefix sum divided by `P`: no article after the date changes any score.

When leak-flagged articles are hidden, they are excluded from the hits *and* from the statistics
(N, df, avgdl are over the eligible visible articles), so a hidden article cannot change a score.

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

import numpy as np

from forecast_env.errors import WorkspaceError
from forecast_env.retrieval.layout import REBUILD, save_npy
from forecast_env.retrieval.tokenize import tokenize

GLOBAL_FILES = ("indptr", "rows", "tfs", "doclen", "term_hash", "term_id", "term_off")
#: Rows per block of the as-of prefix sums (N and total length) kept in memory by BM25Index.
PREFIX_BLOCK = 1024


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
    from forecast_env.store import atomic_path, atomic_write_bytes

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


class BM25Index:
    """The global BM25 index opened read-only (memory-mapped) for as-of-date scoring."""

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
        if vis is None:
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


def top_k(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (row, score) pairs: score descending, ties by smaller row."""
    if len(rows) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= kth
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rows, -scores))[:k]
    return rows[order], scores[order]
