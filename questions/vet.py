"""Vetting a generated question without trusting the model that wrote it (docs/design.md §4 "Questions
generated from the corpus").

Every check reads only texts, dates and the corpus as of a date; none asks a model. Each returns a
`Drop("vet", reason, detail)` for a question that must leave the funnel (or None / an empty dict):

* `post_D_text` (`post_d_text`): the question, its options, description and criteria carry a fact from
  after its date D. Two detectors: (a) audit check 4's text detector (`eval/audit/text.py` `detect`: a
  clause reporting as past something dated after D, an update stamp after D, an option next to
  resolution language; a dated participle in a sentence that defines the resolution, "resolves on the
  results announced on <R>", "a completion announced after <R> does not count", is not a report); (b) a
  corpus test: a distinctive term of the texts (a proper name, an option
  label, a number of 3+ digits that is not a year) whose first appearance in the corpus lies after D. A
  term is searched (BM25) as of D and, when no visible article contains it, as of the corpus's last
  day; the question is dropped when it occurs, as a whole word or phrase, only in articles visible after
  D. A term nowhere in the corpus proves nothing and is kept, and so is every term of a question dated
  before the corpus begins.
* `public_at_D` (`public_at_d`): the answer was public on D. The corpus is searched as of D with the
  question, each valid evidence quote of the winning votes and the winning option with the question's
  key words (and the cited articles themselves are read as of D); an article visible on or before D makes the answer public when it holds such a quote
  verbatim (whitespace and case normalized), or when the cross-question exposure rule
  (`envs/events/exposure.py`), reading the article as a visible text, finds it exposes the question
  (a Yes/No question: its event stated as settled, either way; a question with named options: the
  winning option named with a settled cue in a sentence that also names at least half of the question's
  own event words: "X won an endorsement" settles no election; a cue naming another option is not the
  answer made public). The article is read as visible from its own day and the question as asked by
  then: the rule reads a text older than the question as history, and every article before D is older.
* `duplicate` (`find_duplicates`): near-duplicate question texts across dates and seeds (embedding
  cosine, or exact word 3-shingle Jaccard); in each cluster (union-find) the earliest (by D, then qid)
  stays.
* `exposed` (`find_exposed`): one draft's text gives away another's answer, among the drafts and with
  the market events of the workspace (`find_exposures`, the events build's rule); a draft exposed on or
  before D + 1 day has nothing left to forecast; later exposures are returned for the events build,
  which cuts those schedules itself.
* `balance` (`rebalance`): per split, a Yes/No label above `max_majority_share` is subsampled (seeded)
  down to that share.
"""

from __future__ import annotations

import random
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from forecast_env.config import load_config
from forecast_env.envs.events.exposure import (
    RESOLUTION_WORDS,
    STOP,
    Exposure,
    QuestionText,
    _stored_visible,
    find_exposures,
    fold,
    stem,
    tokens,
)
from forecast_env.envs.events.exposure import sentences as exposure_sentences
from forecast_env.envs.events.tables import SOURCE_PREFIX
from forecast_env.errors import ArticleUnavailableError
from forecast_env.eval.audit.text import _GENERIC as EVENT_NOUNS
from forecast_env.eval.audit.text import detect, question_cues
from forecast_env.questions.records import Draft, Drop
from forecast_env.questions.text import normalize, quote_in
from forecast_env.retrieval.searcher import Searcher
from forecast_env.store import Workspace

__all__ = ["distinctive_terms", "find_duplicates", "find_exposed", "first_seen_after", "market_question_texts",
           "post_d_text", "public_at_d", "question_text", "rebalance", "shingle_jaccard", "shingles",
           "winning_evidence"]

STAGE = "vet"
#: BM25 hits read per term when looking for its first appearance
TERM_HITS = 20
_YES_NO = frozenset({"yes", "no"})
#: Words of a sentence that defines how a question resolves ("... announced on <R> counts")
_RESOLUTION_WORDS = RESOLUTION_WORDS | {"count"}
#: Capitalized words that are never a name: calendar words, question words, sentence openers
_NOT_NAMES = frozenset((
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "today", "tomorrow",
    "yesterday", "will", "who", "which", "what", "when", "where", "whether", "why", "how", "does", "did", "do",
    "is", "are", "was", "were", "can", "could", "would", "should", "has", "have", "had", "yes", "no", "the", "a",
    "an", "this", "that", "these", "those", "if", "in", "on", "at", "by", "for", "of", "to", "from", "as", "and",
    "or", "but", "it", "its", "i", "utc", "et", "gmt", "q1", "q2", "q3", "q4",
))
#: Lower-case words allowed inside a multi-word name ("Bank of England"; not "and": "X and Y" are two names)
_JOINERS = frozenset(("of", "&", "de", "du", "la", "le", "van", "von", "der", "da", "di", "del"))
_SENT_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
_WORD = re.compile(r"[A-Za-z\u00C0-\u024F0-9][\w'’&.-]*")
_POSSESSIVE = re.compile(r"['’]s$")
_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w,])|(?<![\w.,])\d{3,}(?![\w])")


# ---------------------------------------------------------------------------------------------
# post_D_text
# ---------------------------------------------------------------------------------------------


def _names(text: str) -> list[str]:
    """Capitalized words and runs of them in `text`, a run's leading sentence opener left out."""
    out: list[str] = []
    for sent in _SENT_SPLIT.split(text or ""):
        matches = list(_WORD.finditer(sent))
        words = [_POSSESSIVE.sub("", m.group(0)).rstrip(".'’-") for m in matches]
        # a name runs over words separated by spaces only: a comma, a colon or a dash ends it
        joined = [k > 0 and not sent[matches[k - 1].end():matches[k].start()].strip() for k in range(len(words))]
        cap = [w[:1].isupper() and w.lower() not in _NOT_NAMES for w in words]
        i = 0
        while i < len(words):
            if not cap[i]:
                i += 1
                continue
            j = i + 1
            while j < len(words) and joined[j]:
                if cap[j]:
                    j += 1
                elif words[j].lower() in _JOINERS and j + 1 < len(words) and joined[j + 1] and cap[j + 1]:
                    j += 2
                else:
                    break
            run = words[i:j]
            # the first word of a sentence is capitalized whatever it is: alone it is no evidence of a name
            if (len(run) > 1 or i > 0) and len(" ".join(run)) >= 3:
                out.append(" ".join(run))
                if any(w.lower() in _JOINERS for w in run):  # "CEO of Nexora": "Nexora" may be new on its own
                    parts = " ".join(w if w.lower() not in _JOINERS else "|" for w in run).split("|")
                    out += [p.strip() for p in parts if len(p.strip()) >= 3]
            i = j
    return out


def distinctive_terms(draft: Draft, max_terms: int = 12) -> list[str]:
    """The draft's distinctive terms in order: option labels (not Yes/No), proper names, numbers of 3+ digits
    that are not years; a term inside an earlier one is left out."""
    texts = [draft.question, draft.description, draft.criteria]
    found = [o.strip() for o in draft.options if o.strip().lower() not in _YES_NO]
    for t in texts:
        found += _names(t)
    for t in texts:
        for m in _NUMBER.finditer(t or ""):
            digits = m.group(0).replace(",", "")
            if not (len(digits) == 4 and 1900 <= int(digits) <= 2099):
                found.append(m.group(0))
    out: list[str] = []
    for term in found:
        key = " ".join(tokens(fold(term)))
        if not key or any(re.search(rf"(?<!\w){re.escape(key)}(?!\w)", " ".join(tokens(fold(o)))) for o in out):
            continue
        out.append(term)
        if len(out) >= max_terms:
            break
    return out


def _phrase(term: str) -> re.Pattern[str]:
    """A whole-word, case- and accent-insensitive pattern of `term` over folded text."""
    words = tokens(fold(term))
    return re.compile(r"(?<!\w)" + r"\W+".join(re.escape(w) for w in words) + r"(?!\w)")


def _holds(searcher: Searcher, pattern: re.Pattern[str], doc_id: str, title: str, summary: str, as_of: date) -> bool:
    """Whether the article (its title and summary, else its text opened as of `as_of`) contains the pattern."""
    if pattern.search(fold(f"{title}\n{summary}")):
        return True
    try:
        art = searcher.open_article(doc_id, as_of)
    except ArticleUnavailableError:
        return False
    return bool(pattern.search(fold(art.body)))


def _quiet_search(searcher: Searcher, query: str, as_of: date, k: int, mode: str) -> list[Any]:
    # a date outside the corpus is expected here (a draft dated before it): no hits, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return searcher.search(query, as_of=as_of, k=k, mode=mode)


def first_seen_after(term: str, searcher: Searcher, day: date, k: int = TERM_HITS) -> date | None:
    """The first day an article contains `term` when none visible on or before `day` does; None otherwise
    (seen by `day`, nowhere in the corpus, or `day` before the corpus begins)."""
    pattern = _phrase(term)
    if searcher.first_day is None or searcher.last_day is None or day < searcher.first_day or not tokens(fold(term)):
        return None  # before the corpus begins it cannot tell what was known
    for h in _quiet_search(searcher, term, day, k, "bm25"):
        if _holds(searcher, pattern, h.doc_id, h.title, h.summary, day):
            return None
    if searcher.last_day <= day:
        return None
    later: list[date] = []
    for h in _quiet_search(searcher, term, searcher.last_day, k, "bm25"):
        if _holds(searcher, pattern, h.doc_id, h.title, h.summary, searcher.last_day):
            if h.day <= day:
                return None  # it was there by D after all (ranked below the first search's hits)
            later.append(h.day)
    return min(later) if later else None


def _defines_resolution(sentence: str) -> bool:
    """Whether a sentence says how the question resolves (the exposure rule's resolution words, and "count")."""
    return bool(_RESOLUTION_WORDS & set(tokens(fold(sentence))))


def post_d_text(draft: Draft, searcher: Searcher, max_terms: int = 12) -> Drop | None:
    """Drop `post_D_text` when the draft's texts report something after D or name a term the corpus first
    shows after D."""
    d = draft.date
    cues = question_cues(draft.question, draft.options, draft.kind, d)
    # the question naming its own options is no resolution statement: its own text is read without cues
    for where, text, c in (("question", draft.question, None), ("options", "; ".join(draft.options), None),
                           ("description", draft.description, cues), ("criteria", draft.criteria, cues)):
        for f in detect(text or "", d, c):
            if where in ("description", "criteria") and f.kind == "post_date_fact" and _defines_resolution(f.sentence):
                continue  # "resolves on the results announced on <R>" defines the answer's source, reports nothing
            return Drop(STAGE, "post_D_text", f"{where}: {f.kind} ({f.detail}): {f.sentence[:240]!r}")
    for term in distinctive_terms(draft, max_terms):
        first = first_seen_after(term, searcher, d)
        if first is not None:
            return Drop(STAGE, "post_D_text", f"term {term!r} first appears in the corpus on {first.isoformat()}, "
                                              f"after D {d.isoformat()}")
    return None


# ---------------------------------------------------------------------------------------------
# public_at_D
# ---------------------------------------------------------------------------------------------


def winning_evidence(draft: Draft) -> list[tuple[str, str]]:
    """(doc id, quote) of the valid evidence of the valid votes that chose the resolved answer, and the
    retrospective route's own answer quote when it is that answer."""
    out: list[tuple[str, str]] = []
    if draft.resolved is None:
        return out
    for v in draft.votes:
        if v.valid and v.answer == draft.resolved:
            out += [(e.doc_id, e.quote) for e in v.evidence if e.problem is None and e.quote]
    if draft.answer == draft.resolved and draft.answer_quote and draft.source_id:
        out.append((draft.source_id, draft.answer_quote))
    return list(dict.fromkeys(out))


def _key_words(question: str, n: int = 8) -> list[str]:
    words = [w for w in tokens(fold(question)) if w not in STOP and w not in _NOT_NAMES and w != "'s" and len(w) > 1]
    return list(dict.fromkeys(words))[:n]


def _event_stems(draft: Draft) -> set[str]:
    """Stems of the question's own event words: content words that are no option's, no generic event noun
    ("final", "winner", "2026") and no "win"."""
    option_words = {w for o in draft.options for w in tokens(fold(o))}
    return {stem(w) for w in tokens(fold(draft.question))
            if len(w) > 2 and not w.isdigit() and w not in STOP and w not in _NOT_NAMES and w not in option_words
            and w not in EVENT_NOUNS and stem(w) != "win"}


def _names_event(draft: Draft, e: Exposure, title: str, body: str) -> bool:
    """Whether a sentence holding the exposure's words also names at least half of the question's event words
    ("Falk won an endorsement" settles no election; "Falk won the presidential election" does)."""
    want = _event_stems(draft)
    if not want:
        return True
    cue = set(e.words.split())
    for sent in [*exposure_sentences(title), *exposure_sentences(body)]:
        if cue <= set(sent) and 2 * len(want & {stem(w) for w in sent}) >= len(want):
            return True
    return False


def _exposed_by_article(draft: Draft, doc_id: str, day: date, title: str, body: str) -> Exposure | None:
    """The exposure rule with the article as a visible text from its day; the draft counts as asked by then
    (every article before D is older than the question: the rule would read it as history)."""
    asked = min(draft.date, day)
    q = QuestionText(draft.qid, draft.question, draft.description, tuple(draft.options), draft.date,
                     max(draft.resolution_date, draft.date), asked)
    a = QuestionText(doc_id, title, body, (), day, draft.date, day)
    e = find_exposures([q, a]).exposures.get(draft.qid)
    if e is None or e.by != doc_id or e.day > draft.date:
        return None
    if draft.kind == "multi" and (draft.resolved not in e.options or not _names_event(draft, e, title, body)):
        return None  # a settled cue on another option, or on another contest, is not the answer made public
    return e


def public_at_d(draft: Draft, searcher: Searcher, k: int = 10, mode: str = "hybrid") -> Drop | None:
    """Drop `public_at_D` when an article visible on or before D already states the resolved answer."""
    if draft.resolved is None or draft.resolved not in draft.options:
        return None
    d = draft.date
    evidence = winning_evidence(draft)
    quotes = list(dict.fromkeys(q for _, q in evidence))
    keys = _key_words(draft.question)
    queries = [draft.question, *quotes]
    if draft.kind == "multi":
        queries.append(" ".join([draft.resolved, *keys]))
    elif keys:
        queries.append(" ".join(keys))
    seen: dict[str, date] = {}
    for doc_id, _ in evidence:  # a cited article itself visible on D: no search needed
        try:
            seen.setdefault(doc_id, searcher.open_article(doc_id, d).day)
        except ArticleUnavailableError:
            pass
    for q in dict.fromkeys(x for x in queries if x and x.strip()):
        for h in _quiet_search(searcher, q[:1000], d, k, mode):
            if h.day <= d:
                seen.setdefault(h.doc_id, h.day)
    for doc_id, day in sorted(seen.items(), key=lambda x: (x[1], x[0])):
        try:
            art = searcher.open_article(doc_id, d)
        except ArticleUnavailableError:
            continue
        text = f"{art.title}\n{art.summary}\n{art.body}"
        for quote in quotes:
            if quote_in(quote, text):
                return Drop(STAGE, "public_at_D", f"{doc_id} ({art.day.isoformat()}, on or before D {d.isoformat()}) "
                                                  f"holds the evidence quote {normalize(quote)[:160]!r}")
        e = _exposed_by_article(draft, doc_id, art.day, art.title, art.body or art.summary)
        if e is not None:
            return Drop(STAGE, "public_at_D", f"{doc_id} ({art.day.isoformat()}, on or before D {d.isoformat()}) "
                                              f"states it ({e.rule}/{e.where}: {e.words[:160]!r})")
    return None


# ---------------------------------------------------------------------------------------------
# duplicates
# ---------------------------------------------------------------------------------------------


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def shingles(text: str, n: int = 3) -> frozenset[tuple[str, ...]]:
    """Word n-shingles of the folded text (the whole text when it has fewer than n words)."""
    words = tokens(fold(text))
    if len(words) < n:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i:i + n]) for i in range(len(words) - n + 1))


def shingle_jaccard(a: frozenset[Any], b: frozenset[Any]) -> float:
    """|a & b| / |a | b| (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _jaccard_pairs(sets: Sequence[frozenset[Any]], threshold: float, block: int = 1024
                   ) -> Iterable[tuple[int, int, float]]:
    """(i, j, Jaccard) for i < j at or above `threshold`, exact, from sparse intersection counts in row blocks."""
    from scipy import sparse

    vocab: dict[Any, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for i, s in enumerate(sets):
        for sh in s:
            rows.append(i)
            cols.append(vocab.setdefault(sh, len(vocab)))
    n = len(sets)
    if not vocab:
        return
    m = sparse.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(n, len(vocab)))
    sizes = np.asarray(m.sum(axis=1)).ravel()
    mt = m.T.tocsc()
    for lo in range(0, n, block):
        inter = (m[lo:lo + block] @ mt).tocoo()
        i = inter.row + lo
        j = inter.col
        keep = j > i
        i, j, c = i[keep], j[keep], inter.data[keep].astype(np.float64)
        jac = c / (sizes[i] + sizes[j] - c)
        for a, b, v in zip(i[jac >= threshold], j[jac >= threshold], jac[jac >= threshold]):
            yield int(a), int(b), float(v)


def _cosine_pairs(vectors: np.ndarray, threshold: float, block: int = 1024) -> Iterable[tuple[int, int, float]]:
    """(i, j, cosine) for i < j at or above `threshold`, by matrix products in row blocks."""
    n = len(vectors)
    for lo in range(0, n, block):
        sims = vectors[lo:lo + block] @ vectors.T
        ii, jj = np.nonzero(sims >= threshold)
        for a, b in zip(ii, jj):
            if b > a + lo:
                yield int(a + lo), int(b), float(sims[a, b])


def find_duplicates(drafts: Sequence[Draft], embed: Callable[[list[str]], np.ndarray], cosine: float = 0.85,
                    jaccard: float = 0.6) -> dict[str, Drop]:
    """Drop `duplicate` for every draft of a near-duplicate cluster but its earliest (by D, then qid)."""
    if len(drafts) < 2:
        return {}
    order = sorted(range(len(drafts)), key=lambda i: (drafts[i].date, drafts[i].qid))
    ds = [drafts[i] for i in order]
    texts = [normalize(d.question) for d in ds]
    vec = np.asarray(embed(texts), dtype=np.float32)
    if vec.ndim != 2 or len(vec) != len(ds):
        raise ValueError(f"embed returned shape {vec.shape} for {len(ds)} texts; expected one row per text")
    vec = vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)
    sets = [shingles(t) for t in texts]
    uf = _UnionFind(len(ds))
    link: dict[int, tuple[int, str]] = {}  # a later draft -> the earlier one it was first joined to, and how
    for pairs, what in ((_cosine_pairs(vec, cosine), "cosine"), (_jaccard_pairs(sets, jaccard), "jaccard")):
        for a, b, v in pairs:
            uf.union(a, b)
            link.setdefault(b, (a, f"{what} {v:.3f}"))
    out: dict[str, Drop] = {}
    for i, d in enumerate(ds):
        root = uf.find(i)  # the smallest index of the cluster: the earliest draft
        if root == i:
            continue
        kept = ds[root]
        cos = float(vec[i] @ vec[root])
        jac = shingle_jaccard(sets[i], sets[root])
        via = ""
        if i in link and link[i][0] != root:
            via = f"; joined through {ds[link[i][0]].qid} ({link[i][1]})"
        out[d.qid] = Drop(STAGE, "duplicate", f"near-duplicate of {kept.qid} (D {kept.date.isoformat()}, kept as the "
                                              f"earliest): cosine {cos:.3f}, word 3-shingle Jaccard {jac:.3f} "
                                              f"(exact){via}")
    return out


# ---------------------------------------------------------------------------------------------
# cross-question exposure
# ---------------------------------------------------------------------------------------------


def question_text(draft: Draft) -> QuestionText:
    """The draft as a visible question: listed from D to R, asked on D."""
    return QuestionText(draft.qid, draft.question, draft.description, tuple(draft.options), draft.date,
                        max(draft.resolution_date, draft.date), draft.date)


def market_question_texts(workspace: str | Path, buffer_days: int | None = None) -> list[QuestionText]:
    """The workspace's stored market events (not the generated ones) as visible questions, as the events
    build reads them."""
    if buffer_days is None:
        buffer_days = int(load_config("events")["schedule"]["buffer_days"])
    out, _ = _stored_visible(Workspace.at(workspace), SOURCE_PREFIX["questions"], buffer_days)
    return out


def find_exposed(drafts: Sequence[Draft], others: Sequence[QuestionText] = ()
                 ) -> tuple[dict[str, Drop], dict[str, Exposure]]:
    """Drop `exposed` for drafts another visible question exposes by D + 1; later exposures returned apart."""
    report = find_exposures([question_text(d) for d in drafts] + list(others))
    drops: dict[str, Drop] = {}
    later: dict[str, Exposure] = {}
    for d in drafts:
        e = report.exposures.get(d.qid)
        if e is None:
            continue
        if e.day <= d.date + timedelta(days=1):
            drops[d.qid] = Drop(STAGE, "exposed", f"exposed on {e.day.isoformat()} by {e.by} "
                                                  f"({e.rule}/{e.where}: {e.words[:160]!r})")
        else:
            later[d.qid] = e
    return drops, later


# ---------------------------------------------------------------------------------------------
# label balance
# ---------------------------------------------------------------------------------------------


def _position(d: Draft) -> int | None:
    return d.options.index(d.resolved) if d.resolved is not None and d.resolved in d.options else None


def _share(counts: Counter[str]) -> float | None:
    total = sum(counts.values())
    return max(counts.values()) / total if total else None


def rebalance(drafts: Sequence[Draft], split_of: Callable[[Draft], str | None], max_majority_share: float = 0.6,
              seed: int = 0) -> tuple[dict[str, Drop], dict[str, Any]]:
    """Drop `balance`: per split, a seeded sample of the majority Yes/No label down to `max_majority_share`."""
    if not 0.5 <= max_majority_share <= 1.0:
        raise ValueError(f"max_majority_share = {max_majority_share}: give a share from 0.5 to 1.0 (1.0: report only)")
    by_split: dict[str, list[Draft]] = {}
    for d in drafts:
        s = split_of(d)
        if s is not None and d.kind == "binary" and d.resolved in d.options:
            by_split.setdefault(s, []).append(d)
    drops: dict[str, Drop] = {}
    splits: dict[str, Any] = {}
    for s in sorted(by_split):
        group = by_split[s]
        counts = Counter(str(d.resolved) for d in group)
        before = _share(counts)
        rec: dict[str, Any] = {"n": len(group), "labels_before": dict(sorted(counts.items())),
                               "majority_share_before": before}
        major, n_major = max(counts.items(), key=lambda x: (x[1], x[0]))
        n_minor = len(group) - n_major
        if max_majority_share < 1.0 and before is not None and before > max_majority_share:
            if n_minor == 0:
                rec["one_label"] = True  # subsampling cannot balance a split with one label: reported, kept
            else:
                keep = int(np.floor(max_majority_share * n_minor / (1.0 - max_majority_share) + 1e-9))
                pool = sorted((d for d in group if d.resolved == major), key=lambda d: d.qid)
                gone = random.Random(f"{seed}:{s}").sample(pool, n_major - keep)
                for d in sorted(gone, key=lambda d: d.qid):
                    drops[d.qid] = Drop(STAGE, "balance", f"split {s}: {major} held {n_major} of {len(group)} "
                                                          f"({before:.0%} > {max_majority_share:.0%}); seeded "
                                                          f"subsample (seed {seed}) keeps {keep}")
        after = Counter(str(d.resolved) for d in group if d.qid not in drops)
        rec.update(labels_after=dict(sorted(after.items())), majority_share_after=_share(after),
                   dropped=len(group) - sum(after.values()))
        splits[s] = rec
    pos_before = Counter(p for p in map(_position, drafts) if p is not None)
    pos_after = Counter(p for d in drafts if d.qid not in drops and (p := _position(d)) is not None)
    report = {"max_majority_share": max_majority_share, "seed": seed, "splits": splits,
              "answer_position_before": {str(k): v for k, v in sorted(pos_before.items())},
              "answer_position_after": {str(k): v for k, v in sorted(pos_after.items())}}
    return drops, report
