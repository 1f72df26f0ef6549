"""A compact reference port of the corpus quality filters (docs/design.md §2), used to validate the sample world.

It mirrors datatrove's order and thresholds (Gopher quality -> Gopher repetition -> C4 -> FineWeb)
closely enough to check that good synthetic articles pass with margin and that each planted page
fails with its intended reason first. The corpus builder has its own implementation; this one is
only the generator's self-check (word splitting here is a simple regex, not a full tokenizer).
"""

from __future__ import annotations

import re
from collections import Counter

STOP_WORDS = {"the", "be", "to", "of", "and", "that", "have", "with"}
_WORD = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]+")
_PUNCT_ONLY = re.compile(r"^[^\w]+$")
POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies",
          "use cookies")
END_PUNCT = (".", "?", "!", '"', "'", "”", "’")


def words_of(text: str) -> list[str]:
    return _WORD.findall(text)


def _dups(items: list[str]) -> tuple[int, int]:
    seen: set[str] = set()
    n = chars = 0
    for x in items:
        if x in seen:
            n += 1
            chars += len(x)
        else:
            seen.add(x)
    return n, chars


def gopher_quality(text: str) -> str | None:
    words = words_of(text)
    n_words = max(len(words), 1)
    nonsym = [w for w in words if not _PUNCT_ONLY.match(w)]
    if len(nonsym) < 50:
        return "gopher_short_doc"
    if len(nonsym) > 100_000:
        return "gopher_long_doc"
    mean = sum(len(w) for w in nonsym) / len(nonsym)
    if mean < 3 or mean > 10:
        return "gopher_mean_word_length"
    if text.count("#") / n_words > 0.1:
        return "gopher_symbol_ratio"
    if (text.count("...") + text.count("…")) / n_words > 0.1:
        return "gopher_ellipsis_ratio"
    lines = text.splitlines() or [""]
    if sum(ln.lstrip().startswith(("•", "-")) for ln in lines) / len(lines) > 0.9:
        return "gopher_bullet_lines"
    if sum(ln.rstrip().endswith(("...", "…")) for ln in lines) / len(lines) > 0.3:
        return "gopher_ellipsis_lines"
    if sum(any(c.isalpha() for c in w) for w in words) / n_words < 0.8:
        return "gopher_alpha_words"
    if sum(w.lower() in STOP_WORDS for w in words) < 2:
        return "gopher_stop_words"
    return None


def gopher_repetition(text: str) -> str | None:
    paragraphs = re.split(r"\n{2,}", text.strip())
    n, c = _dups(paragraphs)
    if n / len(paragraphs) > 0.3:
        return "gopher_dup_para_frac"
    if c / max(len(text), 1) > 0.2:
        return "gopher_dup_para_char_frac"
    lines = re.split(r"\n+", text)
    n, c = _dups(lines)
    if n / len(lines) > 0.3:
        return "gopher_dup_line_frac"
    if c / max(len(text), 1) > 0.2:
        return "gopher_dup_line_char_frac"
    words = [w for w in words_of(text)]
    for k, thr in ((2, 0.2), (3, 0.18), (4, 0.16)):
        grams = [" ".join(words[i : i + k]) for i in range(len(words) - k + 1)]
        if grams:
            top, cnt = Counter(grams).most_common(1)[0]
            if len(top) * cnt / len(text) > thr:
                return f"gopher_top_{k}_gram"
    for k, thr in zip(range(5, 11), (0.15, 0.14, 0.13, 0.12, 0.11, 0.10)):
        if dup_ngram_char_frac(words, k, len(text)) > thr:
            return f"gopher_dup_{k}_gram"
    return None


def dup_ngram_char_frac(words: list[str], n: int, text_len: int) -> float:
    seen: set[str] = set()
    rep = 0
    i = 0
    while i < len(words) - n + 1:
        gram = "".join(words[i : i + n])
        if gram in seen:
            rep += len(gram)
            i += n
        else:
            seen.add(gram)
            i += 1
    return rep / max(text_len, 1)


def c4(text: str) -> tuple[str | None, str]:
    kept = []
    n_sent = 0
    for line in text.splitlines():
        line = line.strip()
        ws = line.split()
        if any(len(w) > 1000 for w in ws):
            continue
        if len(ws) < 3:
            continue
        low = line.lower()
        if "lorem ipsum" in low:
            return "c4_lorem_ipsum", text
        if "javascript" in low:
            continue
        if "{" in line:
            return "c4_curly_bracket", text
        if any(p in low for p in POLICY):
            continue
        n_sent += max(1, len(re.findall(r"[.!?](?:\s|$)", line)))
        kept.append(line)
    if n_sent < 5:
        return "c4_too_few_sentences", text
    return None, "\n".join(kept)


def fineweb(text: str) -> str | None:
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if not lines:
        return "fineweb_punct_lines"
    if sum(ln.endswith(END_PUNCT) for ln in lines) / len(lines) < 0.12:
        return "fineweb_punct_lines"
    if sum(len(ln) <= 30 for ln in lines) / len(lines) > 0.67:
        return "fineweb_short_lines"
    _, c = _dups(lines)
    if c / max(len(text.replace("\n", "")), 1) > 0.01:
        return "fineweb_dup_line_chars"
    if text.count("\n") / max(len(words_of(text)), 1) > 0.3:
        return "fineweb_newline_ratio"
    return None


def first_quality_reason(body: str) -> str | None:
    """The first quality reason that fires on `body` (None: the page passes)."""
    r = gopher_quality(body) or gopher_repetition(body)
    if r:
        return r
    r, cleaned = c4(body)
    if r:
        return r
    return fineweb(cleaned)
