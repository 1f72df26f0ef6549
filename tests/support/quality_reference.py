"""The plain references of the quality filters' fast paths (corpus_build/quality_text.py): token-by-token
counts and datatrove's n-gram walks, which tests/corpus_build/test_quality.py (by hypothesis) and
benchmarks/corpus/quality_filter_speed.py (the plain path) compare the shipped code with."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from forecast_env.corpus_build.quality_text import _WORD_RE, _GopherStats, _is_symbol_char


def gopher_stats(text: str) -> _GopherStats:
    """`_gopher_stats` counted token by token (the reference; tested equal)."""
    words = _WORD_RE.findall(text)
    non_symbol = [w for w in words if not all(_is_symbol_char(c) for c in w)]
    lines = text.splitlines() or [""]
    return _GopherStats(
        n_words=len(words), n_non_symbol=len(non_symbol), non_symbol_chars=sum(map(len, non_symbol)),
        hashes=text.count("#"), ellipses=text.count("...") + text.count("…"), n_lines=len(lines),
        bullet_lines=sum(s.lstrip().startswith(("•", "-")) for s in lines),
        ellipsis_lines=sum(s.rstrip().endswith(("...", "…")) for s in lines),
        alpha_words=sum(any(c.isalpha() for c in w) for w in words), vocabulary=frozenset(words))


def top_ngram_chars(words: Sequence[str], n: int) -> int:
    """Characters covered by the most frequent n-gram (" "-joined length x count), as datatrove.

    Reference implementation (the filter uses `_NgramIndex.top_chars`, tested equal)."""
    grams = Counter(zip(*(words[i:] for i in range(n))))
    if not grams:
        return 0
    gram, count = grams.most_common(1)[0]
    return (sum(len(w) for w in gram) + n - 1) * count


def all_dup_ngram_chars(words: Sequence[str], lengths: Sequence[int], n: int) -> int:
    """Characters of repeated n-grams, skipping past each repeat (datatrove find_all_duplicate).

    Reference implementation (the filter uses `_NgramIndex.dup_chars`, tested equal)."""
    n_words = len(words)
    seen: set[tuple[str, ...]] = set()
    repeated = idx = 0
    while idx < n_words - n + 1:
        gram = tuple(words[idx : idx + n])
        if gram in seen:
            repeated += sum(lengths[idx : idx + n])  # datatrove joins with "": no separators
            idx += n
        else:
            seen.add(gram)
            idx += 1
    return repeated
