"""Stage 5 of the corpus builder (docs/design.md §2), the text rules: Gopher quality + repetition, C4 and
FineWeb filters (the profiles that configure them and the page rule: quality.py, quality_page.py).

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
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from forecast_env.errors import ConfigError
from forecast_env.schema import CORPUS_REASONS

__all__ = [
    "POLICY_SUBSTRINGS",
    "STOP_WORDS",
    "C4Filter",
    "DocumentFilter",
    "FilterResult",
    "FineWebFilter",
    "GopherQualityFilter",
    "GopherRepetitionFilter",
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
        """Datatrove's most frequent n-gram's characters, ties to the one seen first (Counter's order; the
        plain walk `top_ngram_chars` in tests/support/quality_reference.py, tested equal)."""
        g, first = self.grams(n)
        if g.size == 0:
            return 0
        counts = np.bincount(g)
        best = counts.max()
        pos = int(first[counts == best].min())
        return (int(self.lengths[pos:pos + n].sum()) + n - 1) * int(best)

    def dup_chars(self, n: int) -> int:
        """Datatrove's find_all_duplicate (`all_dup_ngram_chars` in tests/support/quality_reference.py):
        the same left-to-right walk (a visited n-gram seen before counts and skips its n words; else it is
        seen), run only over the positions whose n-gram occurred earlier: every other position is a first
        sighting, so it only joins `seen`. Most bodies have none."""
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
