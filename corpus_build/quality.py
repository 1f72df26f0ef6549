"""Stage 5 of the corpus builder (docs/design.md §2): the quality profiles, the filters they build and the
run of those filters on a body, first drop wins.

The rules live by concern: the text rules (Gopher quality + repetition, C4, FineWeb, and the tokenizers they
share) in quality_text.py, the page rule (is this page an article) in quality_page.py. This module is the
import path every caller uses: it re-exports their public names.
"""

from __future__ import annotations

from forecast_env.corpus_build.quality_page import (
    COLLECTION_TYPES,
    PAGE_FEATURES,
    PAGE_MODEL,
    PageRule,
    PageSignalsLike,
    page_features,
    strip_article_metadata,
)
from forecast_env.corpus_build.quality_text import (
    POLICY_SUBSTRINGS,
    STOP_WORDS,
    C4Filter,
    DocumentFilter,
    FilterResult,
    FineWebFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
    sent_tokenize,
    word_tokenize,
)
from forecast_env.errors import ConfigError

__all__ = [
    "COLLECTION_TYPES",
    "DEFAULT_PROFILE",
    "LINE_CLEANUP_KEYS",
    "PAGE_DEFAULTS",
    "PAGE_FEATURES",
    "PAGE_MODEL",
    "POLICY_SUBSTRINGS",
    "PROFILES",
    "PROFILE_NAMES",
    "STOP_WORDS",
    "C4Filter",
    "DocumentFilter",
    "FilterResult",
    "FineWebFilter",
    "GopherQualityFilter",
    "GopherRepetitionFilter",
    "PageRule",
    "PageSignalsLike",
    "active_profile",
    "apply_filters",
    "build_filters",
    "check_shared_cleanup",
    "page_features",
    "profile_verdicts",
    "resolve_quality",
    "sent_tokenize",
    "strip_article_metadata",
    "word_tokenize",
]

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
#: tuned on the tuning sets that benchmarks/RESULTS.md names and measured on held-out pages.
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
#: The page rule's thresholds (`PageRule`, tuned on the tuning sets of
#: benchmarks/log/2026-12-02-issue25-page-rule.md). Only `news` has the section: `paper` judges text alone, as the paper's corpus did.
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
