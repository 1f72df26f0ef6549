"""Stage 5 of the corpus builder (docs/design.md §2): Gopher quality + repetition, C4 and FineWeb filters.

Faithful ports of datatrove's filters (huggingface/datatrove, src/datatrove/pipeline/filters/
gopher_quality_filter.py, gopher_repetition_filter.py, c4_filters.py, fineweb_quality_filter.py),
with the thresholds as constructor arguments and datatrove's FineWeb defaults. We do not depend on
datatrove (it drops the metadata we need) nor on NLTK: `word_tokenize` / `sent_tokenize` below are
regex approximations of NLTK's Treebank word tokenizer and Punkt sentence splitter that datatrove
uses for English (contractions split as "do" + "n't", punctuation as separate tokens, ellipses
kept whole). Each filter's `filter(text)` returns a `FilterResult` whose reason is one of
`forecast_env.schema.CORPUS_REASONS["quality"]`.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from forecast_env.errors import ConfigError
from forecast_env.schema import CORPUS_REASONS

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "PROFILE_NAMES",
    "STOP_WORDS",
    "C4Filter",
    "FilterResult",
    "FineWebFilter",
    "GopherQualityFilter",
    "GopherRepetitionFilter",
    "PageRule",
    "active_profile",
    "apply_filters",
    "build_filters",
    "check_shared_cleanup",
    "profile_verdicts",
    "resolve_quality",
    "sent_tokenize",
    "word_tokenize",
]

#: Gopher's stop words (Rae et al. 2021, as in datatrove).
STOP_WORDS = ("the", "be", "to", "of", "and", "that", "have", "with")

_WORD_RE = re.compile(
    r"\w+(?=n't\b)|n't\b|\w+(?='(?:s|re|ve|ll|d|m)\b)|'(?:s|re|ve|ll|d|m)\b|\w+(?:[.,'\-]\w+)*|\.\.\.|…|[^\w\s]",
    re.IGNORECASE,
)
#: `_WORD_RE` without the contraction alternatives, which make the engine backtrack through every word
#: twice: the two split the same text into the same tokens outside tokens holding an apostrophe, and
#: `_tokens` tokenizes those again with `_WORD_RE` (the contraction alternatives look no further than
#: the token's end, where both see a non-word character or the text's end).
_PLAIN_WORD_RE = re.compile(r"'(?:s|re|ve|ll|d|m)\b|\w+(?:[.,'\-]\w+)*|\.\.\.|…|[^\w\s]", re.IGNORECASE)
_ABBREV = (
    "mr|mrs|ms|dr|prof|sr|jr|st|mt|gen|gov|sen|rep|lt|col|sgt|capt|cmdr|adm|rev|hon|pres|"
    "inc|ltd|co|corp|vs|etc|no|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|u\\.s|u\\.k|"
    "e\\.g|i\\.e|a\\.m|p\\.m|approx|est|fig|dept|univ|ave|blvd"
)
_SENT_SPLIT = re.compile(r"[.!?…][\"'”’)\]]*(\s+)(?=[\"'“‘(\[]?[A-Z0-9])")
_ABBREV_END = re.compile(r"\b(?:" + _ABBREV + r"|[a-z])\.$", re.IGNORECASE)
#: characters of a sentence's end `_ABBREV_END` needs: the longest abbreviation, its ".", a trailing
#: newline and the character before it (for \b), with room to spare
_ABBREV_TAIL = max(len(a.replace("\\", "")) for a in _ABBREV.split("|")) + 8


def _is_symbol_char(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PSCZ"


@functools.lru_cache(maxsize=200_000)
def _is_symbol_word(word: str) -> bool:
    """Every character is punctuation, a symbol, a control or a separator (datatrove's non-symbol test),
    cached per distinct token: a body repeats its words, and the vocabulary of a WARC is small."""
    return all(_is_symbol_char(c) for c in word)


@functools.lru_cache(maxsize=200_000)
def _has_alpha(word: str) -> bool:
    return any(c.isalpha() for c in word)


def word_tokenize(text: str) -> list[str]:
    """English word tokens approximating NLTK's `word_tokenize` (punctuation split off)."""
    return list(_tokens(text))


@functools.lru_cache(maxsize=8)
def _tokens(text: str) -> tuple[str, ...]:
    """`word_tokenize`, remembered for the last few texts: every filter of both profiles tokenizes the
    same body (the part records both profiles' verdicts), so it is tokenized once."""
    tokens = _PLAIN_WORD_RE.findall(text)
    if "'" not in text:
        return tuple(tokens)
    out: list[str] = []
    for tok in tokens:
        if len(tok) > 1 and "'" in tok:
            out.extend(_WORD_RE.findall(tok))
        else:
            out.append(tok)
    return tuple(out)


def sent_tokenize(text: str) -> list[str]:
    """Sentences approximating NLTK Punkt: split after . ! ? before a capital, not after abbreviations."""
    text = text.strip()
    if not text:
        return []
    pieces, start = [], 0
    for m in _SENT_SPLIT.finditer(text):
        pieces.append(text[start : m.start(1)])
        start = m.end(1)
    pieces.append(text[start:])
    sents: list[str] = []
    for piece in pieces:
        # only the sentence's last characters can end in an abbreviation: searching its tail gives the
        # same answer (the longest alternative plus its "." and \b's character fit in it) without
        # rescanning the whole sentence at every split
        if sents and _ABBREV_END.search(sents[-1][-_ABBREV_TAIL:]):
            sents[-1] = sents[-1] + " " + piece
        else:
            sents.append(piece)
    return [s.strip() for s in sents if s.strip()]


@dataclass
class FilterResult:
    """Keep or drop with a reason code; `text` is the document after line-level cleanup (C4)."""

    keep: bool
    reason: str | None
    detail: str | None
    text: str


class DocumentFilter(Protocol):
    name: str

    def filter(self, text: str) -> FilterResult: ...


class PageSignalsLike(Protocol):
    """What `PageRule` reads of `corpus_build.extract.PageSignals` (kept structural: quality.py does not
    import the extractor)."""

    og_type: str | None
    jsonld_types: tuple[str, ...]
    has_pub_meta: bool
    n_article_tags: int
    n_link_headings: int
    text_words: int
    password_input: bool
    error_title: bool
    url_shape: str
    n_paragraphs: int
    n_long_paragraphs: int
    p_words: int
    url_date: bool

    @property
    def link_share(self) -> float: ...

    @property
    def article_meta(self) -> bool: ...


def _drop(reason: str, detail: str | None, text: str) -> FilterResult:
    return FilterResult(False, reason, detail, text)


class GopherQualityFilter:
    """Gopher quality heuristics (Rae et al. 2021, Table A1; datatrove GopherQualityFilter)."""

    name = "gopher_quality"

    def __init__(
        self,
        min_doc_words: int | None = 50,
        max_doc_words: int | None = 100_000,
        min_avg_word_length: float | None = 3,
        max_avg_word_length: float | None = 10,
        max_symbol_word_ratio: float | None = 0.1,
        max_bullet_lines_ratio: float | None = 0.9,
        max_ellipsis_lines_ratio: float | None = 0.3,
        max_non_alpha_words_ratio: float | None = 0.8,
        min_stop_words: int | None = 2,
        stop_words: tuple[str, ...] | list[str] | None = None,
        alpha_ratio_of: str = "all_tokens",
    ):
        self.min_doc_words = min_doc_words
        self.max_doc_words = max_doc_words
        self.min_avg_word_length = min_avg_word_length
        self.max_avg_word_length = max_avg_word_length
        self.max_symbol_word_ratio = max_symbol_word_ratio
        self.max_bullet_lines_ratio = max_bullet_lines_ratio
        self.max_ellipsis_lines_ratio = max_ellipsis_lines_ratio
        self.max_non_alpha_words_ratio = max_non_alpha_words_ratio
        self.min_stop_words = min_stop_words
        self.stop_words = frozenset(STOP_WORDS if stop_words is None else stop_words)
        if alpha_ratio_of not in ("all_tokens", "words"):
            raise ConfigError(f"quality.gopher_quality.alpha_ratio_of: {alpha_ratio_of!r}; choose all_tokens or words")
        #: datatrove divides by every token, punctuation tokens included ("all_tokens": "$", "%", "," and
        #: "(" count as words without a letter); "words" divides by the non-symbol words only.
        self.alpha_ratio_of = alpha_ratio_of

    def filter(self, text: str) -> FilterResult:
        s = _gopher_stats(text)
        n_words, n_non_symbol = s.n_words, s.n_non_symbol
        if self.min_doc_words and n_non_symbol < self.min_doc_words:
            return _drop("gopher_short_doc", f"words={n_non_symbol}", text)
        if self.max_doc_words and n_non_symbol > self.max_doc_words:
            return _drop("gopher_long_doc", f"words={n_non_symbol}", text)
        avg = s.non_symbol_chars / n_non_symbol
        if self.min_avg_word_length and avg < self.min_avg_word_length:
            return _drop("gopher_mean_word_length", f"mean={avg:.2f}", text)
        if self.max_avg_word_length and avg > self.max_avg_word_length:
            return _drop("gopher_mean_word_length", f"mean={avg:.2f}", text)
        if self.max_symbol_word_ratio:
            ratio = s.hashes / n_words
            if ratio > self.max_symbol_word_ratio:
                return _drop("gopher_symbol_ratio", f"hash_per_word={ratio:.3f}", text)
            ratio = s.ellipses / n_words
            if ratio > self.max_symbol_word_ratio:
                return _drop("gopher_ellipsis_ratio", f"ellipsis_per_word={ratio:.3f}", text)
        if self.max_bullet_lines_ratio:
            ratio = s.bullet_lines / s.n_lines
            if ratio > self.max_bullet_lines_ratio:
                return _drop("gopher_bullet_lines", f"ratio={ratio:.3f}", text)
        if self.max_ellipsis_lines_ratio:
            ratio = s.ellipsis_lines / s.n_lines
            if ratio > self.max_ellipsis_lines_ratio:
                return _drop("gopher_ellipsis_lines", f"ratio={ratio:.3f}", text)
        if self.max_non_alpha_words_ratio:
            # a symbol word has no letter, so the tokens with a letter are the non-symbol words with one
            ratio = s.alpha_words / (n_words if self.alpha_ratio_of == "all_tokens" else n_non_symbol)
            if ratio < self.max_non_alpha_words_ratio:
                return _drop("gopher_alpha_words", f"alpha_ratio={ratio:.3f}", text)
        if self.min_stop_words:
            # datatrove counts the distinct stop words present (`len(stop_words & set(words))`),
            # case-sensitive: "The" at a sentence start is not "the".
            n_stop = len(self.stop_words & s.vocabulary)
            if n_stop < self.min_stop_words:
                return _drop("gopher_stop_words", f"stop_words={n_stop}", text)
        return FilterResult(True, None, None, text)


@dataclass(frozen=True)
class _GopherStats:
    """What `GopherQualityFilter` compares with its thresholds, counted once per text: both profiles
    judge the same body, so the counts are shared (`_gopher_stats`)."""

    n_words: int  # every token
    n_non_symbol: int  # tokens that are not all punctuation / symbols
    non_symbol_chars: int
    hashes: int
    ellipses: int
    n_lines: int
    bullet_lines: int
    ellipsis_lines: int
    alpha_words: int  # tokens with a letter (all of them non-symbol words)
    vocabulary: frozenset[str]


@functools.lru_cache(maxsize=8)
def _gopher_stats(text: str) -> _GopherStats:
    words = _tokens(text)
    # per distinct token (the n-gram index, which the repetition filter reads too, numbered them)
    index = _ngram_index(text)
    symbol = np.fromiter(map(_is_symbol_word, index.vocabulary), dtype=bool, count=len(index.vocabulary))
    alpha = np.fromiter(map(_has_alpha, index.vocabulary), dtype=bool, count=len(index.vocabulary))
    is_symbol = symbol[index.words]
    n_non_symbol = len(words) - int(is_symbol.sum())
    alpha_words = int(alpha[index.words].sum())  # a symbol word has no letter
    lines = text.splitlines() or [""]
    return _GopherStats(
        n_words=len(words), n_non_symbol=n_non_symbol, non_symbol_chars=int(index.lengths[~is_symbol].sum()),
        hashes=text.count("#"), ellipses=text.count("...") + text.count("…"), n_lines=len(lines),
        bullet_lines=sum(s.lstrip().startswith(("•", "-")) for s in lines),
        ellipsis_lines=sum(s.rstrip().endswith(("...", "…")) for s in lines),
        alpha_words=alpha_words, vocabulary=frozenset(words))


def _gopher_stats_reference(text: str) -> _GopherStats:
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


def _find_duplicates(items: list[str]) -> tuple[int, int]:
    """(number of repeated elements, their characters), first occurrences not counted."""
    seen: set[str] = set()
    dup_elements = dup_chars = 0
    for item in items:
        if item in seen:
            dup_elements += 1
            dup_chars += len(item)
        else:
            seen.add(item)
    return dup_elements, dup_chars


def _top_ngram_chars(words: Sequence[str], n: int) -> int:
    """Characters covered by the most frequent n-gram (" "-joined length x count), as datatrove.

    Reference implementation (the filter uses `_NgramIndex.top_chars`, tested equal)."""
    grams = Counter(zip(*(words[i:] for i in range(n))))
    if not grams:
        return 0
    gram, count = grams.most_common(1)[0]
    return (sum(len(w) for w in gram) + n - 1) * count


def _all_dup_ngram_chars(words: Sequence[str], lengths: Sequence[int], n: int) -> int:
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


class _NgramIndex:
    """Exact n-gram statistics of one token list in numpy: each n-gram gets a dense id, built from
    the (n-1)-gram ids and the next word's id (no hashing, so no collisions), and each id the
    position of its first occurrence."""

    def __init__(self, words: Sequence[str]) -> None:
        ids: dict[str, int] = {}
        self.words = np.fromiter((ids.setdefault(w, len(ids)) for w in words), dtype=np.int64, count=len(words))
        #: the distinct tokens, in the order of their ids
        self.vocabulary: list[str] = list(ids)
        self.vocab = max(len(ids), 1)
        self.lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        self._grams: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        #: the smallest n known to have no repeated n-gram (then no longer n-gram repeats either)
        self._no_repeat_from: int | None = None

    def grams(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids of the n-grams starting at 0 .. len - n, equal ids for equal n-grams; first position of
        each id)."""
        if n not in self._grams:
            m = len(self.words) - n + 1
            if m <= 0:
                self._grams[n] = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))
            else:
                key = self.words if n == 1 else self.grams(n - 1)[0][:m] * self.vocab + self.words[n - 1:n - 1 + m]
                _, first, ids = np.unique(key, return_index=True, return_inverse=True)
                self._grams[n] = (ids.astype(np.int64).reshape(-1), first.astype(np.int64))
        return self._grams[n]

    def top_chars(self, n: int) -> int:
        """`_top_ngram_chars`: the most frequent n-gram, ties to the one seen first (Counter's order)."""
        g, first = self.grams(n)
        if g.size == 0:
            return 0
        counts = np.bincount(g)
        best = counts.max()
        pos = int(first[counts == best].min())
        return (int(self.lengths[pos:pos + n].sum()) + n - 1) * int(best)

    def dup_chars(self, n: int) -> int:
        """`_all_dup_ngram_chars`: the same left-to-right walk (a visited n-gram seen before counts and
        skips its n words; else it is seen), run only over the positions whose n-gram occurred earlier:
        every other position is a first sighting, so it only joins `seen`. Most bodies have none."""
        if self._no_repeat_from is not None and n >= self._no_repeat_from:
            return 0  # an n-gram seen twice holds an (n-1)-gram seen twice
        g, first = self.grams(n)
        later = np.nonzero(first[g] < np.arange(g.size))[0]
        if later.size == 0:
            self._no_repeat_from = min(n, self._no_repeat_from or n)
            return 0
        cum = np.concatenate([[0], np.cumsum(self.lengths)])
        seen: set[int] = set()
        repeated = idx = 0
        gl = g.tolist()
        for c in later.tolist():
            if c < idx:  # inside a skipped repeat: never visited
                continue
            seen.update(gl[idx:c])
            if gl[c] in seen:
                repeated += int(cum[c + n] - cum[c])
                idx = c + n
            else:
                seen.add(gl[c])
                idx = c + 1
        return repeated


@functools.lru_cache(maxsize=4)
def _ngram_index(text: str) -> _NgramIndex:
    return _NgramIndex(_tokens(text))


class GopherRepetitionFilter:
    """Gopher repetition heuristics (Rae et al. 2021, Table A1; datatrove GopherRepetitionFilter)."""

    name = "gopher_repetition"

    def __init__(
        self,
        dup_line_frac: float | None = 0.3,
        dup_para_frac: float | None = 0.3,
        dup_line_char_frac: float | None = 0.2,
        dup_para_char_frac: float | None = 0.2,
        top_n_grams: tuple | list = ((2, 0.2), (3, 0.18), (4, 0.16)),
        dup_n_grams: tuple | list = ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)),
    ):
        self.dup_line_frac = dup_line_frac
        self.dup_para_frac = dup_para_frac
        self.dup_line_char_frac = dup_line_char_frac
        self.dup_para_char_frac = dup_para_char_frac
        self.top_n_grams = [(int(n), float(f)) for n, f in top_n_grams]
        self.dup_n_grams = [(int(n), float(f)) for n, f in dup_n_grams]
        allowed = set(CORPUS_REASONS["quality"])
        for n, _ in self.top_n_grams:
            if f"gopher_top_{n}_gram" not in allowed:
                raise ConfigError(f"quality.gopher_repetition.top_n_grams: n={n} is not one of 2, 3, 4")
        for n, _ in self.dup_n_grams:
            if f"gopher_dup_{n}_gram" not in allowed:
                raise ConfigError(f"quality.gopher_repetition.dup_n_grams: n={n} is not one of 5..10")
        self._para_re = re.compile(r"\n{2,}")
        self._line_re = re.compile(r"\n+")

    def filter(self, text: str) -> FilterResult:
        n_chars = len(text)
        if n_chars == 0:
            return FilterResult(True, None, None, text)
        paragraphs = self._para_re.split(text.strip())
        dup, dup_chars = _find_duplicates(paragraphs)
        if self.dup_para_frac and dup / len(paragraphs) > self.dup_para_frac:
            return _drop("gopher_dup_para_frac", f"frac={dup / len(paragraphs):.3f}", text)
        if self.dup_para_char_frac and dup_chars / n_chars > self.dup_para_char_frac:
            return _drop("gopher_dup_para_char_frac", f"frac={dup_chars / n_chars:.3f}", text)
        lines = self._line_re.split(text)
        dup, dup_chars = _find_duplicates(lines)
        if self.dup_line_frac and dup / len(lines) > self.dup_line_frac:
            return _drop("gopher_dup_line_frac", f"frac={dup / len(lines):.3f}", text)
        if self.dup_line_char_frac and dup_chars / n_chars > self.dup_line_char_frac:
            return _drop("gopher_dup_line_char_frac", f"frac={dup_chars / n_chars:.3f}", text)
        index = _ngram_index(text)
        for n, frac in self.top_n_grams:
            share = index.top_chars(n) / n_chars
            if share > frac:
                return _drop(f"gopher_top_{n}_gram", f"share={share:.3f}", text)
        for n, frac in self.dup_n_grams:
            share = index.dup_chars(n) / n_chars
            if share > frac:
                return _drop(f"gopher_dup_{n}_gram", f"share={share:.3f}", text)
        return FilterResult(True, None, None, text)


_CITATION_RE = re.compile(r"\[\d*]|\[edit]|\[citation needed]", re.IGNORECASE)
_END_PUNCT = (".", "?", "!", '"', "'")
POLICY_SUBSTRINGS = (
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
)


class C4Filter:
    """C4 line cleanup then document rules (Raffel et al. 2020; datatrove C4QualityFilter)."""

    name = "c4"

    def __init__(
        self,
        max_word_length: int = 1000,
        min_words_per_line: int = 3,
        min_sentences: int = 5,
        filter_javascript: bool = True,
        filter_policy: bool = True,
        filter_lorem_ipsum: bool = True,
        filter_curly_bracket: bool = True,
        remove_citations: bool = True,
        filter_no_terminal_punct: bool = False,
    ):
        self.max_word_length = max_word_length
        self.min_words_per_line = min_words_per_line
        self.min_sentences = min_sentences
        self.filter_javascript = filter_javascript
        self.filter_policy = filter_policy
        self.filter_lorem_ipsum = filter_lorem_ipsum
        self.filter_curly_bracket = filter_curly_bracket
        self.remove_citations = remove_citations
        self.filter_no_terminal_punct = filter_no_terminal_punct

    def filter(self, text: str) -> FilterResult:
        lines, n_tokens = _c4_lines(text, self.max_word_length, self.min_words_per_line, self.remove_citations,
                                    self.filter_no_terminal_punct, self.filter_javascript, self.filter_policy)
        n_sentences = 0
        kept: list[str] = []
        for line, lorem, skipped, curly, n_sent in lines:
            if self.filter_lorem_ipsum and lorem:
                return _drop("c4_lorem_ipsum", None, text)
            if skipped == "javascript":
                continue
            if self.filter_curly_bracket and curly:
                return _drop("c4_curly_bracket", None, text)
            if skipped:  # a policy line
                continue
            n_sentences += n_sent
            kept.append(line)
        if n_sentences < self.min_sentences:
            return _drop("c4_too_few_sentences", f"sentences={n_sentences}", text)
        cleaned = "\n".join(kept).strip()
        _remember_token_count(cleaned, n_tokens)
        return FilterResult(True, None, None, cleaned)


@functools.lru_cache(maxsize=8)
def _c4_lines(text: str, max_word_length: int, min_words_per_line: int, remove_citations: bool,
              filter_no_terminal_punct: bool, filter_javascript: bool,
              filter_policy: bool) -> tuple[tuple[tuple[str, bool, str, bool, int], ...], int]:
    """C4's line pass, shared by every profile with the same line cleanup (`LINE_CLEANUP_KEYS`: all of
    them, `check_shared_cleanup`): per line that survives the word-length, terminal-punctuation and
    words-per-line rules, (the line after citation removal, has "lorem ipsum", "javascript" / "policy"
    when that rule skips it else "", has "{", its sentences when it is kept). The document rules
    (lorem ipsum, curly bracket, minimum sentences) differ between profiles and read this in order.

    Also the number of `word_tokenize` tokens of the kept lines joined (the text FineWeb counts words
    of), from the text's own tokens: no token spans whitespace, so the tokens of lines joined by line
    breaks are the lines' tokens, and only the dropped lines and those citation removal changed are
    tokenized again."""
    out = []
    n_tokens = len(_tokens(text))
    for line in text.splitlines():
        line = line.strip()
        words = line.split()
        original = line
        if max_word_length != -1 and len(line) > max_word_length and max(map(len, words)) > max_word_length:
            n_tokens -= len(_WORD_RE.findall(original))
            continue
        if remove_citations:
            line = _CITATION_RE.sub("", line)
        if (filter_no_terminal_punct and (not line.endswith(_END_PUNCT) or line.endswith("..."))) \
                or len(words) < min_words_per_line:
            n_tokens -= len(_WORD_RE.findall(original))
            continue
        low = line.lower()
        skipped = ("javascript" if filter_javascript and "javascript" in low
                   else "policy" if filter_policy and any(p in low for p in POLICY_SUBSTRINGS) else "")
        if skipped:
            n_tokens -= len(_WORD_RE.findall(original))
        elif line != original:
            n_tokens += len(_WORD_RE.findall(line)) - len(_WORD_RE.findall(original))
        out.append((line, "lorem ipsum" in low, skipped, "{" in line, 0 if skipped else len(sent_tokenize(line))))
    return tuple(out), n_tokens


#: Token counts of texts C4 returned (`_c4_lines` knows them without tokenizing), for FineWeb's word count.
_TOKEN_COUNTS: dict[str, int] = {}


def _remember_token_count(text: str, n: int) -> None:
    # a count is a function of its text, so threads racing here can only drop entries, never mix them up
    try:
        while len(_TOKEN_COUNTS) >= 16:
            _TOKEN_COUNTS.pop(next(iter(_TOKEN_COUNTS)), None)
    except (RuntimeError, StopIteration):  # changed by another thread while iterated
        _TOKEN_COUNTS.clear()
    _TOKEN_COUNTS[text] = n


def _token_count(text: str) -> int:
    """len(word_tokenize(text)), from C4's count when this is the text it returned."""
    n = _TOKEN_COUNTS.get(text)
    return len(_tokens(text)) if n is None else n


class FineWebFilter:
    """FineWeb's own line heuristics (Penedo et al. 2024; datatrove FineWebQualityFilter)."""

    name = "fineweb"

    def __init__(
        self,
        line_punct_thr: float = 0.12,
        line_punct_exclude_zero: bool = False,
        short_line_thr: float = 0.67,
        short_line_length: int = 30,
        char_duplicates_ratio: float = 0.01,
        new_line_ratio: float = 0.3,
        newlines_of_blank_lines: bool = True,
        line_end_chars: str = ".'\"!?",
    ):
        self.line_punct_thr = line_punct_thr
        #: the characters a line may end with to count as ending in terminal punctuation (datatrove's
        #: FineWeb: . ' " ! ?); typographic closing quotes and brackets after a full stop are not among them.
        self.line_end_chars = tuple(line_end_chars)
        #: datatrove counts every "\n" of the text for the newline ratio, those of the blank lines between
        #: paragraphs too (our bodies separate paragraphs with a blank line); False counts line breaks only.
        self.newlines_of_blank_lines = newlines_of_blank_lines
        self.line_punct_exclude_zero = line_punct_exclude_zero
        self.short_line_thr = short_line_thr
        self.short_line_length = short_line_length
        self.char_duplicates_ratio = char_duplicates_ratio
        self.new_line_ratio = new_line_ratio

    def filter(self, text: str) -> FilterResult:
        # as datatrove: the line rules look at non-empty lines only (a blank line between paragraphs is
        # neither a line without terminal punctuation nor a short line), and thresholds are strict.
        lines = [line for line in text.split("\n") if line.strip()]
        if not lines:
            return _drop("fineweb_punct_lines", "ratio=0.000 (no lines)", text)
        ratio = sum(1 for line in lines if line.endswith(self.line_end_chars)) / len(lines)
        if ratio < self.line_punct_thr and not (ratio == 0 and self.line_punct_exclude_zero):
            return _drop("fineweb_punct_lines", f"ratio={ratio:.3f}", text)
        ratio = sum(1 for line in lines if len(line) <= self.short_line_length) / len(lines)
        if ratio > self.short_line_thr:
            return _drop("fineweb_short_lines", f"ratio={ratio:.3f}", text)
        n_chars = len(text.replace("\n", "")) or 1
        ratio = _find_duplicates(lines)[1] / n_chars
        if ratio > self.char_duplicates_ratio:
            return _drop("fineweb_dup_line_chars", f"ratio={ratio:.4f}", text)
        n_words = _token_count(text) or 1
        newlines = text.count("\n") if self.newlines_of_blank_lines else len(lines) - 1
        ratio = newlines / n_words
        if ratio > self.new_line_ratio:
            return _drop("fineweb_newline_ratio", f"ratio={ratio:.3f}", text)
        return FilterResult(True, None, None, text)


_META_ARTICLE = re.compile(r"<meta\b[^>]*?\b(?:property|name)\s*=\s*[\"']?(?:og|article):[^>]*>", re.IGNORECASE)
_JSONLD_SCRIPT = re.compile(r"<script\b[^>]*?\btype\s*=\s*[\"']?application/ld\+json[^>]*>.*?</script\s*>",
                            re.IGNORECASE | re.DOTALL)
_MICRODATA_ATTR = re.compile(r"\s(?:itemscope|itemtype|itemprop|itemid|pubdate)(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?",
                             re.IGNORECASE)
_ARTICLE_TAG = re.compile(r"<(/?)article\b", re.IGNORECASE)


def strip_article_metadata(html: str) -> str:
    """The page without what declares it an article: og:* / article:* <meta>, JSON-LD scripts, microdata
    attributes (itemscope, itemtype, itemprop, itemid) and <time pubdate>, and <article> turned into
    <div>. The measurement of the page rule on pages with no article metadata (small and older sites)
    uses it (benchmarks/bench_quality_profiles.py --strip-metadata)."""
    html = _JSONLD_SCRIPT.sub("", html)
    html = _META_ARTICLE.sub("", html)
    html = re.sub(r"<[a-zA-Z][^>]*>", lambda m: _MICRODATA_ATTR.sub("", m.group(0)), html)
    return _ARTICLE_TAG.sub(lambda m: f"<{m.group(1)}div", html)


#: JSON-LD types that declare a page of many items (a category, a search result, a shop grid, a profile)
COLLECTION_TYPES = frozenset(("collectionpage", "itemlist", "searchresultspage", "productgroup", "product",
                              "offercatalog", "profilepage"))
_COOKIE_WORDS = re.compile(r"\bcookies?\b|\bconsent\b|\bgdpr\b", re.IGNORECASE)
_LOGIN_WORDS = re.compile(r"\b(?:log ?in|sign ?in|sign up|password|username|register|subscribe)\b", re.IGNORECASE)


#: The page rule's linear model's inputs (`page_features`), in order.
PAGE_FEATURES = ("url_home", "url_listing", "url_section", "url_date", "link_share", "body_share", "log_body_words",
                 "log_text_words", "collection_type", "og_not_article", "log_teasers", "article_meta", "pub_meta",
                 "p_share", "log_long_paragraphs", "long_paragraph_share", "log_mean_paragraph_words")


def page_features(body_words: int, page: PageSignalsLike) -> list[float]:
    """The page's inputs to the page rule's linear model, in `PAGE_FEATURES` order (plain floats)."""
    text_words = page.text_words
    og = page.og_type or ""
    return [
        float(page.url_shape == "home"), float(page.url_shape == "listing"), float(page.url_shape == "section"),
        float(page.url_date),
        page.link_share,
        min(1.0, body_words / text_words) if text_words else 1.0,
        math.log1p(body_words),
        math.log1p(text_words),
        float(bool(set(page.jsonld_types) & COLLECTION_TYPES) or og.startswith("product")),
        float(bool(og) and not og.startswith("article")),
        math.log1p(max(page.n_article_tags, page.n_link_headings)),
        float(page.article_meta),
        float(page.has_pub_meta),
        min(1.0, page.p_words / text_words) if text_words else 0.0,
        math.log1p(page.n_long_paragraphs),
        page.n_long_paragraphs / page.n_paragraphs if page.n_paragraphs else 0.0,
        math.log1p(page.p_words / page.n_paragraphs) if page.n_paragraphs else 0.0,
    ]


#: The page rule's linear model (`PageRule(method="linear")`): a logistic regression over `page_features`
#: fitted on the tuning pages only (benchmarks/RESULTS.md, issue 30; the article pages twice, as they are
#: and with their article metadata stripped). Plain numbers, in `PAGE_FEATURES` order.
PAGE_MODEL: dict = {
    "intercept": 2.7281,
    "weights": (2.6371, 1.2309, 1.7296, -2.4587, 0.8079, -1.4483, -0.5451, 0.3576, 2.8288, 1.8528, -0.0723, 0.1525,
                -0.8554, -1.0057, -0.4119, -0.6066, -0.2614),
}


class PageRule:
    """Is this page an article? A page-level rule over the signals of the page's one parse
    (`corpus_build.extract.PageSignals`) and the body's length; a news corpus keeps articles only.

    Three short-page rules, for pages whose body is under `short_body_words` words and whose metadata does
    not declare an article (a short wire item about cookies, or a podcast called "The 404", is kept):
    `page_error` (the title or first <h1> says 404 / not found / server error), `page_login` (a password
    field and login / sign-up words in the body), `page_cookie_wall` (the body talks of cookies or consent).

    Then `page_listing`, a score: one point for each listing sign, the URL's shape (home page, /tag/,
    /category/, /page/N, /search, a bare section path); at least `max_link_share` of the page's words
    inside links; the body under `min_body_share` of the page's words (the extractor found a small part
    of a page of teasers); a collection-typed JSON-LD object (`COLLECTION_TYPES`) or og:type product;
    at least `min_teasers` <article> blocks or link headlines. Minus `article_weight` for article
    metadata (og:type article, an article-typed JSON-LD object) and again for a publication-date
    candidate in the page's metadata. The page is dropped when the score is >= `drop_score`.

    Without signals (`page=None`: a caller that does not pass them) the document is kept."""

    name = "page"
    needs_page = True

    def __init__(
        self,
        drop_score: int | None = 2,
        article_weight: int = 2,
        max_link_share: float = 0.4,
        min_body_share: float = 0.6,
        min_teasers: int = 10,
        short_body_words: int = 150,
        listing: bool = True,
        error: bool = True,
        login: bool = True,
        cookie_wall: bool = True,
        method: str = "score",
        linear_threshold: float = 0.0,
    ):
        self.drop_score = drop_score
        self.article_weight = article_weight
        self.max_link_share = max_link_share
        self.min_body_share = min_body_share
        self.min_teasers = min_teasers
        self.short_body_words = short_body_words
        self.listing = listing
        self.error = error
        self.login = login
        self.cookie_wall = cookie_wall
        if method not in ("score", "linear"):
            raise ConfigError(f"quality.page.method: {method!r} is not score or linear; see docs/corpus_quality.md")
        self.method = method
        self.linear_threshold = linear_threshold

    @staticmethod
    def linear_score(text: str, page: PageSignalsLike) -> float:
        """The linear model's listing score (`PAGE_MODEL` over `page_features`): >= the threshold is a listing."""
        feats = page_features(len(text.split()), page)
        return PAGE_MODEL["intercept"] + sum(w * f for w, f in zip(PAGE_MODEL["weights"], feats, strict=True))

    def score(self, text: str, page: PageSignalsLike) -> tuple[int, list[str]]:
        """The listing score and the signs that made it (for the drop's detail)."""
        body_words = len(text.split())
        signs: list[str] = []
        if page.url_shape != "other":
            signs.append(f"url={page.url_shape}")
        if page.link_share >= self.max_link_share:
            signs.append(f"link_share={page.link_share:.2f}")
        share = body_words / page.text_words if page.text_words else 1.0
        if share < self.min_body_share:
            signs.append(f"body_share={share:.2f}")
        og = (page.og_type or "")
        if set(page.jsonld_types) & COLLECTION_TYPES or og.startswith("product"):
            signs.append("collection_type")
        teasers = max(page.n_article_tags, page.n_link_headings)
        if teasers >= self.min_teasers:
            signs.append(f"teasers={teasers}")
        score = len(signs)
        if page.article_meta:
            score -= self.article_weight
            signs.append("article_meta")
        if page.has_pub_meta:
            score -= self.article_weight
            signs.append("pub_meta")
        return score, signs

    def filter(self, text: str, page: PageSignalsLike | None = None) -> FilterResult:
        if page is None:
            return FilterResult(True, None, None, text)
        body_words = len(text.split())
        if body_words < self.short_body_words and not (page.article_meta or page.has_pub_meta):
            if self.error and page.error_title:
                return _drop("page_error", f"body_words={body_words}", text)
            if self.login and page.password_input and _LOGIN_WORDS.search(text):
                return _drop("page_login", f"body_words={body_words}", text)
            if self.cookie_wall and _COOKIE_WORDS.search(text):
                return _drop("page_cookie_wall", f"body_words={body_words}", text)
        if self.listing and self.method == "linear":
            z = self.linear_score(text, page)
            if z >= self.linear_threshold:
                return _drop("page_listing", f"linear={z:.2f}", text)
        elif self.listing and self.drop_score is not None:
            score, signs = self.score(text, page)
            if score >= self.drop_score:
                return _drop("page_listing", f"score={score} ({', '.join(signs)})", text)
        return FilterResult(True, None, None, text)


_FILTERS = (
    ("page", PageRule),
    ("gopher_quality", GopherQualityFilter),
    ("gopher_repetition", GopherRepetitionFilter),
    ("c4", C4Filter),
    ("fineweb", FineWebFilter),
)


#: The quality profiles (docs/corpus_quality.md). `paper`: datatrove's FineWeb defaults, the thresholds
#: the paper's corpus was built with (replication). `news`: the same filters with the rules that drop
#: real news articles (number-heavy reports, short wire items, repeated bylines or captions) relaxed,
#: tuned on the tuning sets named in benchmarks/RESULTS.md and measured on held-out pages.
PROFILES: dict[str, dict[str, dict]] = {
    "paper": {
        "gopher_quality": {
            "enabled": True, "min_doc_words": 50, "max_doc_words": 100_000, "min_avg_word_length": 3,
            "max_avg_word_length": 10, "max_symbol_word_ratio": 0.1, "max_bullet_lines_ratio": 0.9,
            "max_ellipsis_lines_ratio": 0.3, "max_non_alpha_words_ratio": 0.8, "min_stop_words": 2,
            "alpha_ratio_of": "all_tokens",
        },
        "gopher_repetition": {
            "enabled": True, "dup_line_frac": 0.3, "dup_para_frac": 0.3, "dup_line_char_frac": 0.2,
            "dup_para_char_frac": 0.2, "top_n_grams": [[2, 0.2], [3, 0.18], [4, 0.16]],
            "dup_n_grams": [[5, 0.15], [6, 0.14], [7, 0.13], [8, 0.12], [9, 0.11], [10, 0.1]],
        },
        "c4": {
            "enabled": True, "max_word_length": 1000, "min_words_per_line": 3, "min_sentences": 5,
            "filter_javascript": True, "filter_policy": True, "filter_lorem_ipsum": True,
            "filter_curly_bracket": True, "remove_citations": True, "filter_no_terminal_punct": False,
        },
        "fineweb": {
            "enabled": True, "line_punct_thr": 0.12, "line_punct_exclude_zero": False, "short_line_thr": 0.67, "short_line_length": 30,
            "char_duplicates_ratio": 0.01, "new_line_ratio": 0.3, "newlines_of_blank_lines": True,
            "line_end_chars": ".'\"!?",
        },
    },
}
#: The page rule's thresholds (`PageRule`, tuned on the tuning sets of benchmarks/RESULTS.md, issue 25
#: third session). Only `news` has the section: `paper` judges text alone, as the paper's corpus did.
PAGE_DEFAULTS: dict = {
    "enabled": True, "drop_score": 2, "article_weight": 2, "max_link_share": 0.4, "min_body_share": 0.6,
    "min_teasers": 10, "short_body_words": 150, "listing": True, "error": True, "login": True, "cookie_wall": True,
    # issue 30: the linear model (PAGE_MODEL) judges listings; threshold 2.0 chosen on the tuning pages
    "method": "linear", "linear_threshold": 2.0,
}
PROFILES["news"] = {
    # is the page an article at all (index, tag, login, cookie-wall and error pages are not)
    "page": dict(PAGE_DEFAULTS),
    # numbers, currency and scores are words here: the share is taken over non-symbol words, not over
    # every token ("$", "%", "(" and "," are tokens too in datatrove's count), and a lower share passes
    "gopher_quality": {**PROFILES["paper"]["gopher_quality"], "max_non_alpha_words_ratio": 0.55,
                       "alpha_ratio_of": "words"},
    # a body with repeated short headings, captions or "Advertisement" lines is not a repeated document:
    # the counts of repeated paragraphs and lines pass up to half (their characters stay at 0.2), and
    # repeated 5..10-grams (recipe steps, product boxes, a quote repeated as a pull quote) up to 0.10 more
    "gopher_repetition": {**PROFILES["paper"]["gopher_repetition"], "dup_line_frac": 0.5, "dup_para_frac": 0.5,
                          "dup_n_grams": [[5, 0.25], [6, 0.24], [7, 0.23], [8, 0.22], [9, 0.21], [10, 0.2]]},
    # short wire items have 3-4 sentences; a "{" in a body is a code sample or a formula, not a script
    "c4": {**PROFILES["paper"]["c4"], "min_sentences": 3, "filter_curly_bracket": False},
    # a repeated caption, byline or "Advertisement" line is not a repeated document; a line ending in a
    # closing typographic quote or bracket ends a sentence; blank lines between paragraphs are no lines;
    # no share of lines must end in punctuation (0: trafilatura's bodies of tables, lists and
    # headline-per-line layouts have none, and the page rule judges whether such a page is an article)
    "fineweb": {**PROFILES["paper"]["fineweb"], "char_duplicates_ratio": 0.1, "newlines_of_blank_lines": False,
                "line_end_chars": ".'\"!?”’)", "line_punct_thr": 0.0},
}
PROFILE_NAMES = tuple(PROFILES)
DEFAULT_PROFILE = "news"  # the shipped config's (issue 30); `paper` is the paper's thresholds, for replication


def resolve_quality(quality_cfg: dict | None, profile: str | None = None) -> dict:
    """The thresholds a build uses: the profile's table, then every explicit (non-null) value of the
    `quality` section on top (`--set quality.c4.min_sentences=4` overrides the profile's).

    `profile` picks another profile than the section's (the part records both profiles' verdicts).
    Returns ``{"profile": name, "filters": {section: {param: value}}}``, which is what is hashed."""
    quality_cfg = dict(quality_cfg or {})
    name = profile or quality_cfg.pop("profile", None) or DEFAULT_PROFILE
    quality_cfg.pop("profile", None)
    if name not in PROFILES:
        raise ConfigError(f"quality.profile: {name!r} is not a profile; choose one of {', '.join(PROFILE_NAMES)}")
    sections = {sec for sec, _ in _FILTERS}
    unknown = set(quality_cfg) - sections
    if unknown:
        raise ConfigError(f"quality: unknown filter section(s) {sorted(unknown)}; expected {sorted(sections)} "
                          "and profile")
    resolved: dict[str, dict] = {}
    for sec, _ in _FILTERS:
        overrides = {k: v for k, v in (quality_cfg.get(sec) or {}).items() if v is not None}
        if sec not in PROFILES[name]:
            if not overrides:
                continue  # a profile without the section (paper has no page rule): not resolved, not hashed
            base = {**PAGE_DEFAULTS, "enabled": False} if sec == "page" else {}
        else:
            base = PROFILES[name][sec]
        params = {k: (list(map(list, v)) if isinstance(v, list) else v) for k, v in base.items()}
        for key, value in overrides.items():
            if value is None:
                continue
            if key not in params:
                raise ConfigError(f"quality.{sec}.{key}: unknown threshold; known: {', '.join(sorted(params))}")
            params[key] = value
        resolved[sec] = params
    return {"profile": name, "filters": resolved}


def active_profile(quality_cfg: dict | None) -> str:
    """The profile a `quality` section selects (validated)."""
    return resolve_quality(quality_cfg)["profile"]


def build_filters(quality_cfg: dict | None, profile: str | None = None) -> list[DocumentFilter]:
    """Filters of the resolved profile, in order Gopher quality, repetition, C4, FineWeb."""
    resolved = resolve_quality(quality_cfg, profile)["filters"]
    filters: list[DocumentFilter] = []
    for name, cls in _FILTERS:
        if name not in resolved:
            continue
        params = dict(resolved[name])
        if not params.pop("enabled", True):
            continue
        try:
            filters.append(cls(**params))
        except TypeError as exc:
            raise ConfigError(f"quality.{name}: bad key ({exc}); see docs/corpus_quality.md") from exc
    return filters


#: The C4 settings that remove lines (the text every later filter sees and the part stores): every
#: profile must share them, as a part holds one body per record for all profiles (`check_shared_cleanup`).
LINE_CLEANUP_KEYS = ("enabled", "max_word_length", "min_words_per_line", "remove_citations", "filter_javascript",
                     "filter_policy", "filter_no_terminal_punct")


def check_shared_cleanup(resolved: dict[str, dict[str, dict]]) -> None:
    """Raise ConfigError unless every profile's resolved C4 section removes the same lines (profile ->
    `resolve_quality(...)["filters"]`): the profiles may differ in what they drop, not in the text."""
    seen: dict[tuple, str] = {}
    for name, filters in resolved.items():
        c4 = filters.get("c4") or {}
        key = tuple(c4.get(k) for k in LINE_CLEANUP_KEYS)
        seen.setdefault(key, name)
    if len(seen) > 1:
        raise ConfigError(f"quality profiles {sorted(seen.values())} remove different lines (c4: "
                          f"{', '.join(LINE_CLEANUP_KEYS)}); a part stores one body per record for every profile")


def profile_verdicts(text: str, filters_by_profile: dict[str, list],
                     page: PageSignalsLike | None = None) -> dict[str, FilterResult]:
    """Each profile's verdict on one body (the same text and page signals; filters are pure functions of
    them)."""
    return {name: apply_filters(text, filters, page) for name, filters in filters_by_profile.items()}


def apply_filters(text: str, filters, page: PageSignalsLike | None = None) -> FilterResult:
    """Run filters in order; the first failing one gives the reason; C4's cleaned text flows on.

    `page` (`corpus_build.extract.PageSignals`) goes to the filters that judge the page (`needs_page`);
    text-only filters get the text alone. Without it the page rule keeps the document."""
    for f in filters:
        result = f.filter(text, page) if getattr(f, "needs_page", False) else f.filter(text)
        if not result.keep:
            return result
        text = result.text
    return FilterResult(True, None, None, text)
