"""Searches that queue up, answered together: `BatchedSearcher` (docs/design.md §3).

A server runs many sessions on threads that share one `Searcher`. Wrapped in a `BatchedSearcher`,
their `search` calls go to one worker thread, which takes every request waiting when it is free and
answers them with one `Searcher.search_many` per (k, mode): the same hits and scores, bit for bit, as
each call alone. Nothing waits for a batch to fill (no timer): a lone request is answered at once,
and requests batch only when they arrive while the worker is busy, that is when they queue up anyway.
Everything else (`open_article`, `hidden`, `first_day`, ...) is the wrapped searcher's.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future
from datetime import date
from typing import Any

from forecast_env.retrieval.searcher import Hit, Searcher

#: Requests answered by one worker pass at most (a batch's hit lists are built before any is answered).
MAX_BATCH = 64


class BatchedSearcher:
    """A `Searcher` whose concurrent `search` calls are answered by batched `search_many` calls."""

    def __init__(self, searcher: Searcher, max_batch: int = MAX_BATCH) -> None:
        self.searcher = searcher
        self.max_batch = max(1, int(max_batch))
        self._queue: deque[tuple[str, Any, int, str, Future[list[Hit]]]] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self.batches = 0  # worker passes, and the requests they answered (for benchmarks and tests)
        self.requests = 0
        self._worker = threading.Thread(target=self._serve, name="search-batcher", daemon=True)
        self._worker.start()

    def search(self, query: str, as_of: date | str, k: int = 10, mode: str = "hybrid") -> list[Hit]:
        """`Searcher.search`, answered with whatever other searches are waiting."""
        return self.submit(query, as_of, k, mode).result()

    def submit(self, query: str, as_of: date | str, k: int = 10, mode: str = "hybrid") -> Future[list[Hit]]:
        """Queue one search; its future holds the hits (or the search's exception)."""
        fut: Future[list[Hit]] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError("this BatchedSearcher is closed")
            self._queue.append((query, as_of, k, mode, fut))
            self._cond.notify()
        return fut

    def _serve(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
            self.batches += 1
            self.requests += len(batch)
            groups: dict[tuple[Any, str], list[tuple[str, Any, int, str, Future[list[Hit]]]]] = {}
            for req in batch:
                groups.setdefault((req[2], req[3]), []).append(req)
            for (k, mode), reqs in groups.items():
                self._answer(reqs, k, mode)

    def _answer(self, reqs: list[tuple[str, Any, int, str, Future[list[Hit]]]], k: Any, mode: str) -> None:
        try:
            results = self.searcher.search_many([r[0] for r in reqs], [r[1] for r in reqs], k=k, mode=mode)
        except Exception:  # one bad request (an empty query, a bad date): each is answered alone
            for query, as_of, k_, mode_, fut in reqs:
                try:
                    fut.set_result(self.searcher.search(query, as_of, k=k_, mode=mode_))
                except Exception as exc:
                    fut.set_exception(exc)
            return
        for req, hits in zip(reqs, results):
            req[4].set_result(hits)

    def close(self) -> None:
        """Answer what is queued, stop the worker and close the wrapped searcher."""
        self.stop()
        self.searcher.close()

    def stop(self) -> None:
        """Answer what is queued and stop the worker (the wrapped searcher stays open)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._worker is not threading.current_thread():
            self._worker.join()

    def __getattr__(self, name: str) -> Any:
        if name == "searcher":  # not yet set (or unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.searcher, name)

    def __enter__(self) -> BatchedSearcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
