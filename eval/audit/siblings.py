"""Audit check 6, `siblings`: does a question visible on a forecast date give away another's answer?
(docs/design.md §8 check 6; the rule it audits is §4 "Cross-question exposure").

The build cuts each event's schedule at its exposure day (`envs/events/exposure.py`). This check is written
independently of that rule (as check 4 is of the leakage screen): its own tokenizer, its own cue
patterns and, unlike the build, it reads the labels.

* **Direct count**: over the scheduled (q, D) of the audited split, the share where a question q'
  visible on D (every kept event of the workspace, listed from its first eligible day to `t_end` - 2)
  names q's WINNING option with a presupposing or settled cue in its text as shown on D (title,
  description cut as of D, option labels), or, for a Yes/No question, states q's event as happened
  (label Yes) or as not happened (label No). FAIL above `max_sibling_share` (1%), with examples.
  Beside it, how much more often visible texts name the winner than a losing option, with a cue and
  at all (prominence: a favourite is named more often, which is public information, not a leak).
* **Probe**: check 2's conditional-logit frame (rows = (event, date, option), fitted on train,
  compared on the audited split by the event-clustered bootstrap of the paired Brier difference).
  Reference = check 2's reference + how often each option is named at all by the texts visible on D;
  probe = reference + features of those texts that use no cue list (the option named in a sentence
  with a past-tense verb, in a subordinate clause of a title, in a dated update paragraph; a Yes/No
  question's key words with a past verb, with and without a negation). FAIL when the whole 95%
  interval lies below `-margin`; INCONCLUSIVE when its half-width exceeds `max_half_width`.
  Its power is shown on a simulated table large enough to tell (`probe_power`).

Verdict: PASS when the count passes and the probe does not FAIL; otherwise FAIL. The check also
reports the label balance of the dates the build's rule cut against the dates it kept.
"""

from __future__ import annotations

import html
import json
import math
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, TypeVar, cast

import numpy as np
import polars as pl

from forecast_env.eval.audit.inputs import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    AuditInputs,
    AuditSettings,
    CheckResult,
    as_day,
)
from forecast_env.eval.audit.structure import (
    ProbeSettings,
    _group_brier,
    _group_starts,
    _valid_groups,
    _vocabulary,
    build_design,
    fit_conditional_logit,
    structure_rows,
)
from forecast_env.eval.report.bootstrap import bootstrap_means

# ---------------------------------------------------------------------------------------------
# the audit's own text handling (written apart from envs/events/exposure.py)
# ---------------------------------------------------------------------------------------------

_HTML = re.compile(r"<[^<>]*>")
_WORDS = re.compile(r"\w+", re.UNICODE)
_SENT_END = re.compile(r"(?<=[a-z0-9\)\"'])[.?!](?=\s+[A-Za-z\"'(]|\s*$)|\n+|;")


def normalize(text: str) -> str:
    """Markup removed, entities decoded, accents stripped, lower case: what the audit searches."""
    t = text or ""
    if "<" in t:
        t = _HTML.sub(" ", t)
    if "&" in t:
        t = html.unescape(t)
    if not t.isascii():
        t = "".join(c for c in unicodedata.normalize("NFKD", t) if not unicodedata.combining(c))
        t = re.sub(r"[\u2018\u2019]", "'", t)
    return t.replace("`", "'").lower()


def split_sentences(text: str) -> list[str]:
    """Sentences of a normalized text (a period after a lone letter, "u.s.", does not end one)."""
    return [s.strip() for s in _SENT_END.split(text) if s and s.strip()]


#: The audit's settled / presupposing patterns around a name (its own list, not the build's).
_BEFORE = [
    re.compile(r"(?:president|prime minister|premier|governor|mayor|chancellor|senator|speaker|ceo|chief executive|"
               r"chair(?:man|woman)?|leader|coach|pope|minister)[\s-]+elect\W*$"),
    re.compile(r"\b(?:new|incoming|newly (?:elected|appointed|named|crowned)|reigning|victorious)\s+"
               r"(?:[a-z]+\s+){0,2}$"),
    re.compile(r"\b(?:winners?|champions?|victor|nominee|titleholder)\s*[,:]?\s*(?:the\s+)?$"),
]
_AFTER = [
    re.compile(r"^'s\s+(?:[a-z-]+\s+){0,2}(?:win|victory|triumph|election|appointment|title|success|crowning)\b"),
    re.compile(r"^\s*,?\s*(?:who\s+|which\s+)?(?:has\s+|have\s+|had\s+)?(?:already\s+)?"
               r"(?:won|clinched|secured|captured|took|claimed|triumphed|prevailed)\b"),
    re.compile(r"^\s*,?\s*(?:was|were|has been|have been|had been|is now|now)\s+(?:officially\s+)?"
               r"(?:elected|appointed|named|crowned|declared|confirmed|chosen|selected|sworn)\b"),
    re.compile(r"^\s*,\s*(?:the\s+)?(?:new|incoming|winner|champion|victor|reigning)\b"),
]
_CONDITION = re.compile(r"\b(?:if|whether|unless|should|in case|assuming|suppose)\b")
_PAST_WORD = re.compile(r"\b[a-z]{3,}ed\b|\b(?:won|lost|fell|rose|took|made|held|beat|left|sold|met|ran|hit|came|went)\b")
_NEGATION = re.compile(r"\b(?:not|never|no longer|failed to|didn't|didnt|wasn't|weren't|fails to)\b")
_DEADLINE = re.compile(r"\s+(?:by|before|until|through|in)\s+(?:the\s+end\s+of\s+)?(?:[a-z]+\.?\s+\d{1,2}(?:st|nd|rd|th)?"
                       r"(?:,?\s*\d{4})?|\d{4}|[a-z]+\s+\d{4}|q[1-4]\s+\d{4})\s*\??\s*$")
_STOPWORDS = frozenset({"the", "and", "for", "will", "with", "from", "that", "this", "than", "its", "into", "over",
                        "under", "which", "who", "what", "when", "where", "whether", "their", "there", "have", "has",
                        "had", "been", "being", "are", "was", "were", "does", "did", "any", "all", "more", "less",
                        "most", "next", "new", "yes", "not", "end"})
_GENERIC = frozenset({"yes", "no", "other", "none", "others", "tie", "draw", "field"})


def cued(sentence: str, start: int, end: int) -> str | None:
    """The settled/presupposing words around sentence[start:end] (a name), else None."""
    before, after = sentence[max(0, start - 48): start], sentence[end: end + 48]
    if _CONDITION.search(before[-32:]):
        return None
    for p in _BEFORE:
        m = p.search(before)
        if m:
            return (m.group(0) + sentence[start:end]).strip()
    for p in _AFTER:
        m = p.match(after)
        if m:
            return (sentence[start:end] + m.group(0)).strip()
    return None


def key_words(question: str) -> list[str]:
    """A Yes/No question's content words (deadline removed), in order. Short numbers stay: they tell
    one event of a series from another ("the Tern-6 probe" is not "the Tern-2 probe")."""
    q = normalize(question).strip()
    q = _DEADLINE.sub("", q)
    return list(dict.fromkeys(w for w in _WORDS.findall(q)
                              if (len(w) >= 3 or w.isdigit()) and w not in _STOPWORDS))


def _prefix(w: str) -> str:
    return w[:4] if len(w) >= 5 else w


#: Irregular past forms and the present a Yes/No question asks with.
#: (Not "hit" or "beat": their past is their present, and a question asking "Will X hit ...?" again states nothing.)
_IRREGULAR_PAST = {"won": "win", "lost": "lose", "fell": "fall", "rose": "rise", "took": "take", "held": "hold",
                   "sold": "sell", "met": "meet", "left": "leave", "ran": "run", "made": "make", "became": "become"}


def word_prefixes(toks: Sequence[str]) -> set[str]:
    """The words' prefixes, an irregular past also as its present's ("won" holds "win")."""
    return {_prefix(t) for t in toks} | {_prefix(_IRREGULAR_PAST[t]) for t in toks if t in _IRREGULAR_PAST}


def stated_outcome(sentence: str, words: Sequence[str], toks: Sequence[str] | None = None,
                   prefixes: set[str] | None = None) -> str | None:
    """"Yes" / "No" when `sentence` states the event of a question with key `words` as happened / not
    happened (all key words present by their first letters, a past verb of one of them), else None.
    `toks` / `prefixes`: the sentence's words and their prefixes, when already known."""
    if toks is None:
        toks = _WORDS.findall(sentence)
    pref = prefixes if prefixes is not None else word_prefixes(toks)
    if not all(_prefix(w) in pref for w in words):
        return None
    for i, w in enumerate(words):  # a number counts only right after the word it follows in the question
        if i and w.isdigit() and not any(toks[j + 1] == w and _prefix(toks[j]) == _prefix(words[i - 1])
                                         for j in range(len(toks) - 1)):
            return None
    if _CONDITION.search(sentence):
        return None
    verbs = {_prefix(w) for w in words}
    # the past verb must be the event's own ("launched" for "launch", "won" for "win"): a "won" in another
    # clause ("will the probe launch, now that X has won ...?") states nothing about this event
    past = any(t.endswith("ed") and _prefix(t) in verbs for t in toks) or \
        any(_IRREGULAR_PAST.get(t) in words for t in toks)
    negated = bool(_NEGATION.search(sentence))
    if negated and any(t in words for t in toks):
        return "No"
    return "Yes" if past else None


# ---------------------------------------------------------------------------------------------
# what is visible, and what each visible text says
# ---------------------------------------------------------------------------------------------


@dataclass
class Visible:
    """One kept event as a visible question: its listing window and its text versions."""

    event_id: str
    first_day: date
    last_day: date
    versions: list[tuple[date, str, str, list[str]]] = field(default_factory=list)  # (from, title, desc, options)

    def version_on(self, d: date) -> int | None:
        if not (self.first_day <= d <= self.last_day):
            return None
        k = None
        for i, (d0, *_rest) in enumerate(self.versions):
            if d0 <= d:
                k = i
        return k


def visible_questions(events: pl.DataFrame, buffer_days: int = 2) -> dict[str, Visible]:
    """Every kept event as a visible question, with a text version for each day its description changes."""
    from forecast_env.envs.events.descriptions import description_as_of, find_date

    out: dict[str, Visible] = {}
    for r in events.iter_rows(named=True):
        start = as_day(r.get("start_day") or r.get("t_start"))
        t_all = as_day(r.get("t_all"))
        end = as_day(r.get("end_day") or r.get("t_end"))
        if start is None or end is None:
            continue
        first = max(start, t_all) if t_all else start
        last = end - timedelta(days=buffer_days)
        desc = r.get("description") or ""
        days = {first}
        for line in desc.split("\n"):
            f = find_date(line[:80])
            if f is not None and first < f[0] <= last:
                days.add(f[0])
        v = Visible(r["event_id"], first, last)
        prev = None
        for d in sorted(days):
            text = description_as_of(desc, d)
            if text != prev:
                v.versions.append((d, r.get("question") or "", text, list(r.get("options") or [])))
                prev = text
        out[r["event_id"]] = v
    return out


@dataclass(frozen=True)
class Mention:
    """Question `by` (text version `version`) names option `option` of event `event_id`."""

    event_id: str
    option: str
    by: str
    version: int
    cue: str | None  # the settled/presupposing words, None: a plain mention
    past_sentence: bool  # named in a sentence with a past-tense verb
    subordinate_title: bool  # named in a title clause set off by a comma or colon
    update_paragraph: bool  # named in a dated / "Update" paragraph of the description


@dataclass(frozen=True)
class Statement:
    """Question `by` (version) states Yes/No event `event_id` as `outcome` in `words`."""

    event_id: str
    by: str
    version: int
    outcome: str
    words: str


_UPDATE_PARA = re.compile(r"^\s*[\*\_#>\-\[(]*(?:update|clarification|edit|correction|note|addendum)\b|\d{4}-\d{2}-\d{2}")


def find_mentions(visible: Mapping[str, Visible], events: pl.DataFrame) -> tuple[list[Mention], list[Statement],
                                                                                dict[str, str]]:
    """Every mention of an event's option (or statement of a Yes/No event) in another visible text.

    Names are found through an index of their first word (no all-pairs scan). Returns the mentions,
    the statements, and the events skipped with the reason (empty or duplicate option names)."""
    by_name: dict[tuple[str, ...], list[tuple[str, str]]] = defaultdict(list)  # name words -> (event, option)
    yesno_by_word: dict[str, list[tuple[str, list[str], frozenset[str]]]] = defaultdict(list)
    skipped: dict[str, str] = {}
    df_count: dict[str, int] = defaultdict(int)
    keys: list[tuple[str, list[str]]] = []
    for r in events.iter_rows(named=True):
        opts = list(r.get("options") or [])
        names = [normalize(o).strip() for o in opts]
        if set(names) <= {"yes", "no"}:
            kw = key_words(r.get("question") or "")
            if len(kw) >= 2:
                keys.append((r["event_id"], kw))
                for w in set(kw):
                    df_count[w] += 1
            else:
                skipped[r["event_id"]] = "yes/no question with too few key words"
            continue
        if any(not n for n in names):
            skipped[r["event_id"]] = "an empty option name"
        if len(set(names)) < len(names):
            skipped[r["event_id"]] = "identical option names"
        for o, name in zip(opts, names):
            ws = tuple(_WORDS.findall(name))
            if not ws or name in _GENERIC or names.count(name) > 1:
                continue
            by_name[ws].append((r["event_id"], o))
    lengths = sorted({len(k) for k in by_name}, reverse=True)
    for eid, kw in keys:
        yesno_by_word[min(kw, key=lambda w: (df_count[w], w))].append((eid, kw, frozenset(_prefix(w) for w in kw)))

    mentions: list[Mention] = []
    statements: list[Statement] = []
    for v in visible.values():
        for k, (_d0, title, desc, options) in enumerate(v.versions):
            parts = [("title", normalize(title)), ("options", " ; ".join(normalize(o) for o in options))]
            for para in (desc or "").split("\n\n"):
                parts.append(("update" if _UPDATE_PARA.search(para[:40]) else "description", normalize(para)))
            seen: set[tuple[str, str, str | None, bool, bool, bool]] = set()
            stated: set[str] = set()
            for where, text in parts:
                for sent in split_sentences(text):
                    toks = list(_WORDS.finditer(sent))
                    words = [t.group(0) for t in toks]
                    past = bool(_PAST_WORD.search(sent))
                    taken_to = 0  # a longer name holds the shorter ones inside it ("Alan Brandt" holds "Brandt")
                    for i in range(len(words)):
                        for n in lengths:
                            hits = by_name.get(tuple(words[i: i + n])) if i + n <= len(words) else None
                            if not hits:
                                continue
                            if i + n <= taken_to:
                                break
                            taken_to = i + n
                            s, e = toks[i].start(), toks[i + n - 1].end()
                            cue = cued(sent, s, e) if where != "options" else None
                            sub = where == "title" and bool(re.search(r"[,:]", sent[:s] + sent[e:]))
                            for eid, opt in hits:
                                if eid == v.event_id:
                                    continue
                                key = (eid, opt, cue, past, sub, where == "update")
                                if key not in seen:
                                    seen.add(key)
                                    mentions.append(Mention(eid, opt, v.event_id, k, cue,
                                                            past and where != "options", sub, where == "update"))
                            break
                    if where == "options":
                        continue
                    if not past and not _NEGATION.search(sent):
                        continue  # no past verb and no negation: nothing is stated as settled
                    prefixes = word_prefixes(words)
                    for w in set(words):
                        for eid, kw, kw_pref in yesno_by_word.get(w, ()):
                            if eid == v.event_id or eid in stated or not kw_pref <= prefixes:
                                continue
                            out = stated_outcome(sent, kw, words, prefixes)
                            if out is not None:
                                stated.add(eid)
                                statements.append(Statement(eid, v.event_id, k, out, sent[:160]))
    return mentions, statements, skipped


# ---------------------------------------------------------------------------------------------
# the direct count
# ---------------------------------------------------------------------------------------------


def _on(visible: Mapping[str, Visible], by: str, version: int, d: date) -> bool:
    v = visible.get(by)
    return v is not None and v.version_on(d) == version


_Item = TypeVar("_Item", "Mention", "Statement")


def _by_event(items: Sequence[_Item]) -> dict[str, list[_Item]]:
    """Mentions or statements grouped by the event they are about, in their order."""
    out: dict[str, list[_Item]] = defaultdict(list)
    for it in items:
        out[it.event_id].append(it)
    return out


def direct_count(events: pl.DataFrame, schedule: pl.DataFrame, visible: Mapping[str, Visible],
                 mentions: Sequence[Mention], statements: Sequence[Statement]) -> dict[str, Any]:
    """The share of scheduled (q, D) whose winner a visible text names with a cue; the winner/loser ratios."""
    label = dict(zip(events["event_id"].to_list(), events["label"].to_list()))
    options = dict(zip(events["event_id"].to_list(), [list(o or []) for o in events["options"].to_list()]))
    by_event = _by_event(mentions)
    st_by_event = _by_event(statements)
    n = exposed = 0
    win_cued = lose_cued = win_named = lose_named = 0.0
    n_multi = 0
    yes_no_stated = {"right": 0, "wrong": 0}
    examples: list[dict[str, Any]] = []
    for eid, d in schedule.select("event_id", "forecast_date").iter_rows():
        if eid not in label:
            continue
        n += 1
        lab = label[eid]
        opts = options[eid]
        hit: dict[str, str | None] | None = None
        if set(o.lower() for o in opts) <= {"yes", "no"}:
            for s in st_by_event.get(eid, ()):
                if _on(visible, s.by, s.version, d):
                    right = s.outcome.lower() == str(lab).lower()
                    yes_no_stated["right" if right else "wrong"] += 1
                    if right and hit is None:
                        hit = {"by": s.by, "words": s.words, "stated": s.outcome}
        else:
            n_multi += 1
            losers = [o for o in opts if o != lab]
            on = [m for m in by_event.get(eid, ()) if _on(visible, m.by, m.version, d)]
            cued_opts = {m.option for m in on if m.cue}
            named_opts = {m.option for m in on}
            win_cued += lab in cued_opts
            win_named += lab in named_opts
            if losers:
                lose_cued += sum(o in cued_opts for o in losers) / len(losers)
                lose_named += sum(o in named_opts for o in losers) / len(losers)
            if lab in cued_opts:
                m = next(m for m in on if m.cue and m.option == lab)
                hit = {"by": m.by, "words": m.cue, "option": lab}
        if hit is not None:
            exposed += 1
            if len(examples) < 8:
                examples.append({"event_id": eid, "date": str(d), **hit})

    def ratio(a: float, b: float) -> float | None:
        return None if n_multi == 0 else round((a + 0.5) / (b + 0.5), 3)

    return {"scheduled_dates": n, "exposed_dates": exposed, "share": exposed / n if n else 0.0,
            "multi_option_dates": n_multi, "winner_cued_dates": int(win_cued), "loser_cued_dates": round(lose_cued, 2),
            "winner_vs_loser_cued": ratio(win_cued, lose_cued),
            "winner_named_dates": int(win_named), "loser_named_dates": round(lose_named, 2),
            "winner_vs_loser_named": ratio(win_named, lose_named),
            "yes_no_statements": yes_no_stated, "examples": examples}


# ---------------------------------------------------------------------------------------------
# the probe (check 2's frame)
# ---------------------------------------------------------------------------------------------

#: The probe's sibling features (option-specific; no cue list).
SIBLING_FEATURES = ("past_sentence", "subordinate_title", "update_paragraph", "stated_yes_pattern")


def sibling_features(rows: pl.DataFrame, visible: Mapping[str, Visible], mentions: Sequence[Mention],
                     statements: Sequence[Statement]) -> pl.DataFrame:
    """`rows` (check 2's rows) with `prominence` (log1p of the visible texts naming the option on the
    date) and the probe's features (log1p counts; for Yes/No questions, statements of the event with a
    past verb: "stated_yes_pattern" on the option the statement's polarity points to)."""
    by_event = _by_event(mentions)
    st_by_event = _by_event(statements)
    cols: dict[str, list[float]] = {c: [] for c in ("prominence", *SIBLING_FEATURES)}
    for eid, d, opt in rows.select("event_id", "forecast_date", "option").iter_rows():
        on = [m for m in by_event.get(eid, ()) if m.option == opt and _on(visible, m.by, m.version, d)]
        cols["prominence"].append(math.log1p(len({m.by for m in on})))
        cols["past_sentence"].append(math.log1p(len({m.by for m in on if m.past_sentence})))
        cols["subordinate_title"].append(math.log1p(len({m.by for m in on if m.subordinate_title})))
        cols["update_paragraph"].append(math.log1p(len({m.by for m in on if m.update_paragraph})))
        st = [s for s in st_by_event.get(eid, ()) if _on(visible, s.by, s.version, d)
              and s.outcome.lower() == str(opt).lower()]
        cols["stated_yes_pattern"].append(math.log1p(len(st)))
    return rows.with_columns(*(pl.Series(k, v, dtype=pl.Float64) for k, v in cols.items()))


def run_sibling_probe(rows: pl.DataFrame, train_split: str, eval_split: str, st: ProbeSettings) -> dict[str, Any]:
    """Reference (check 2's + prominence) vs probe (+ the sibling features): fit on train, bootstrap on eval."""
    rows, dropped = _valid_groups(rows)
    train = rows.filter(pl.col("split") == train_split).sort(["event_id", "forecast_date", "position"])
    test = rows.filter(pl.col("split") == eval_split).sort(["event_id", "forecast_date", "position"])
    n_tr = train["event_id"].n_unique() if train.height else 0
    n_te = test["event_id"].n_unique() if test.height else 0
    out: dict[str, Any] = {"train_events": n_tr, "eval_events": n_te, "choice_sets_dropped": dropped}
    if n_tr < 2 or n_te < 2:
        out.update(verdict=INCONCLUSIVE, reason=f"too few events to fit and compare (train {n_tr}, {eval_split} {n_te})")
        return out
    vocab = _vocabulary(train, st)

    def mats(df: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, Any]:
        des = build_design(df, vocab)
        prom = df["prominence"].to_numpy()[:, None]
        ref = np.hstack([des.reference, prom])
        sib = np.column_stack([df[c].to_numpy() for c in SIBLING_FEATURES])
        return ref, np.hstack([ref, sib]), des

    rtr, ptr, dtr = mats(train)
    rte, pte, dte = mats(test)
    ref = fit_conditional_logit(rtr, dtr.y, dtr.groups, st.l2)
    prb = fit_conditional_logit(ptr, dtr.y, dtr.groups, st.l2)
    b_ref = _group_brier(ref.predict(rte, dte.groups), dte.y, dte.groups)
    b_prb = _group_brier(prb.predict(pte, dte.groups), dte.y, dte.groups)
    ev = dte.events[_group_starts(dte.groups)]
    per = (pl.DataFrame({"event_id": ev.tolist(), "ref": b_ref, "probe": b_prb})
           .group_by("event_id", maintain_order=True).agg(pl.col("ref").mean(), pl.col("probe").mean()).sort("event_id"))
    est = bootstrap_means((per["probe"] - per["ref"]).to_numpy(), draws=st.draws, seed=st.seed)
    half = (est.hi - est.lo) / 2.0
    if est.hi < -st.margin:
        verdict, reason = FAIL, (f"sibling features beat the reference by {-est.value:.3f} Brier, 95% CI "
                                 f"[{est.lo:.3f}, {est.hi:.3f}] wholly below -{st.margin}")
    elif half > st.max_half_width:
        verdict, reason = INCONCLUSIVE, f"95% CI half-width {half:.3f} > {st.max_half_width}: too few events ({n_te})"
    else:
        verdict, reason = PASS, f"probe - reference = {est.value:+.4f} [{est.lo:+.4f}, {est.hi:+.4f}]"
    weights = prb.beta[-len(SIBLING_FEATURES):]
    # a Float64 column's mean is a float (polars types Series.mean() as any scalar)
    out.update(verdict=verdict, reason=reason, brier_reference=float(cast(float, per["ref"].mean())),
               brier_probe=float(cast(float, per["probe"].mean())), difference=est.value, ci_low=est.lo,
               ci_high=est.hi, half_width=half,
               sibling_weights={c: round(float(w), 4) for c, w in zip(SIBLING_FEATURES, weights)})
    return out


def simulated_rows(n_events: int, leak_share: float, seed: int = 0) -> pl.DataFrame:
    """A simulated rows table (train and eval halves, 3 options, 3 dates per event): on `leak_share` of
    the dates a visible text names the winner in a past-tense sentence (losers only as often as noise);
    every option's prominence is random, the favourite's a little higher (public information)."""
    rng = np.random.default_rng(seed)
    rows: dict[str, list[Any]] = defaultdict(list)
    for e in range(n_events):
        split = "train" if e < n_events // 2 else "eval"
        win = int(rng.integers(3))
        for step in range(3):
            d = date(2026, 1, 1) + timedelta(days=7 * step + e % 7)
            leak = rng.random() < leak_share
            for pos in range(3):
                rows["event_id"].append(f"sim-{e:05d}")
                rows["split"].append(split)
                rows["forecast_date"].append(d)
                rows["step"].append(step + 1)
                rows["steps_total"].append(3)
                rows["k"].append(3)
                rows["position"].append(pos)
                rows["option"].append(f"opt{pos}")
                rows["question"].append("Who will win the simulated contest?")
                rows["description_chars"].append(200)
                rows["days_to_deadline"].append(30 - 7 * step)
                rows["y"].append(int(pos == win))
                rows["prominence"].append(math.log1p(rng.poisson(1.5 + (pos == win))))
                noise = rng.random() < 0.03
                rows["past_sentence"].append(math.log1p(int((leak and pos == win) or noise)))
                rows["subordinate_title"].append(0.0)
                rows["update_paragraph"].append(0.0)
                rows["stated_yes_pattern"].append(0.0)
    return pl.DataFrame(rows)


def probe_power(st: ProbeSettings, n_events: int = 600) -> dict[str, Any]:
    """The probe's verdicts on a simulated table with and without a planted leak (its power and size)."""
    out: dict[str, Any] = {"events": n_events}
    for name, share in (("leak_30pct", 0.3), ("no_leak", 0.0)):
        res = run_sibling_probe(simulated_rows(n_events, share, seed=st.seed), "train", "eval", st)
        out[name] = {"verdict": res["verdict"], "difference": round(float(res.get("difference", 0.0)), 4),
                     "ci": [round(float(res.get("ci_low", 0.0)), 4), round(float(res.get("ci_high", 0.0)), 4)]}
    return out


# ---------------------------------------------------------------------------------------------
# label balance of the build's cut
# ---------------------------------------------------------------------------------------------


def cut_label_balance(inputs: AuditInputs, events: pl.DataFrame, schedule: pl.DataFrame) -> dict[str, Any]:
    """Yes share of the binary dates the cross-question rule cut vs those it kept (report.json's cuts)."""
    try:
        cuts = json.loads((inputs.workspace.events_dir / "report.json").read_text()).get("cuts") or {}
    except (OSError, ValueError):
        cuts = {}
    kept_per = dict(schedule.group_by("event_id").len().iter_rows())
    cut_dates = {"Yes": 0, "No": 0, "named": 0}
    kept_dates = {"Yes": 0, "No": 0, "named": 0}
    for r in events.iter_rows(named=True):
        lab = r["label"] if r["label"] in ("Yes", "No") else "named"
        kept_dates[lab] += int(kept_per.get(r["event_id"], 0))
        cut_dates[lab] += int((cuts.get(r["event_id"]) or {}).get("steps_cut_by_exposure") or 0)

    def share(x: Mapping[str, int]) -> float | None:
        n = x["Yes"] + x["No"]
        return None if n == 0 else round(x["Yes"] / n, 4)

    return {"dates_cut": cut_dates, "dates_kept": kept_dates, "yes_share_cut": share(cut_dates),
            "yes_share_kept": share(kept_dates),
            "events_excluded_by_rule": int(inputs.excluded.filter(pl.col("reason") == "exposed_early").height)}


# ---------------------------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------------------------


def check_siblings(inputs: AuditInputs, settings: AuditSettings) -> CheckResult:
    """Check 6 (see the module docstring)."""
    from forecast_env.eval.audit.schedule import built_schedule_config

    buffer = int(built_schedule_config(inputs).get("buffer_days", 2))
    events = inputs.events
    visible = visible_questions(events, buffer)
    mentions, statements, skipped = find_mentions(visible, events)
    split_ids = inputs.split_events["event_id"].to_list()
    sched = inputs.schedule.filter(pl.col("event_id").is_in(split_ids))
    count = direct_count(inputs.split_events, sched, visible, mentions, statements)
    max_share = float(getattr(settings, "max_sibling_share", 0.01))
    count_ok = count["share"] <= max_share

    describe: Callable[[str | None, date], str] | None = None
    try:
        from forecast_env.envs.events.descriptions import description_as_of

        describe = description_as_of
    except ImportError:  # pragma: no cover - the build's description cut is part of the package
        pass
    rows = structure_rows(events, inputs.schedule, describe)
    rows = sibling_features(rows, visible, mentions, statements)
    fit_split, test_split = ("eval", "train") if inputs.split == "train" else ("train", "eval")
    st = ProbeSettings(draws=settings.draws, seed=settings.seed, margin=settings.margin,
                       max_half_width=settings.max_half_width, l2=settings.l2)
    probe = run_sibling_probe(rows, fit_split, test_split, st)
    power = probe_power(st)
    balance = cut_label_balance(inputs, inputs.split_events, sched)

    figures: dict[str, Any] = {"visible_questions": len(visible), "mentions": len(mentions),
                               "statements": len(statements), "skipped": dict(sorted(skipped.items())[:20]),
                               "skipped_events": len(skipped), "max_share": max_share,
                               **{f"count_{k}": v for k, v in count.items() if k != "examples"},
                               "probe": {k: v for k, v in probe.items()}, "fit_split": fit_split,
                               "compared_on": test_split, "probe_power": power, "label_balance": balance}
    failures = []
    if not count_ok:
        failures.append(f"count: {count['exposed_dates']} of {count['scheduled_dates']} dates "
                        f"({count['share']:.2%}) have their winner named by a visible question")
    if probe["verdict"] == FAIL:
        failures.append(f"probe: {probe['reason']}")
    ratio = count["winner_vs_loser_cued"]
    ratio_txt = f"; winner/loser cued-naming ratio {ratio}" if ratio is not None else ""
    if failures:
        verdict, reason = FAIL, "; ".join(failures) + ratio_txt
    else:
        verdict, reason = PASS, (f"{count['exposed_dates']} of {count['scheduled_dates']} dates "
                                 f"({count['share']:.2%} <= {max_share:.0%}) exposed by a visible question{ratio_txt}; "
                                 f"probe {probe['verdict']} ({probe['reason']})")
    return CheckResult("siblings", verdict, reason, figures, failures, count["examples"])
