"""Arrow schemas of every table that crosses a stage, and the fixed reason codes.

Defined once here and imported everywhere: a stage talks to the next through Parquet files whose
schema is one of these, so each stage can be run, tested and rerun alone.
"""

from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")
STR_LIST = pa.list_(pa.string())

# ---------------------------------------------------------------------------------------------
# Corpus (docs/design.md §2)
# ---------------------------------------------------------------------------------------------

#: (rule, days): one rule of `corpus_build.timestamps.MOVE_RULES` and how far it moved the day.
VISIBLE_MOVES = pa.list_(pa.struct([("rule", pa.string()), ("days", pa.int32())]))

#: One row per kept article, `WS/corpus/articles/YYYY-MM.parquet`, sorted by (day, doc_id).
ARTICLES = pa.schema(
    [
        ("doc_id", pa.string()),  # stable: sha1 of WARC-Record-ID (else URL + crawl time), 16 hex
        ("url", pa.string()),
        ("canonical_url", pa.string()),  # <link rel=canonical>, null when absent
        ("title", pa.string()),
        ("summary", pa.string()),
        ("body", pa.string()),
        ("t_pub", TS),
        ("t_mod", TS),
        ("t_crawl", TS),
        ("t", TS),  # assigned: t_pub, else t_mod, else t_crawl
        ("t_source", pa.string()),  # pub | mod | crawl
        ("t_rule", pa.string()),  # the cascade rule that gave `t` (e.g. jsonld_datePublished)
        ("t_pub_rule", pa.string()),
        ("t_mod_rule", pa.string()),
        ("visible_at", TS),  # visibility time v (docs/design.md §2.timestamps, timestamps.visibility)
        ("visible_source", pa.string()),  # pub | mod | crawl: which timestamp gave v
        ("visible_moves", VISIBLE_MOVES),  # rules that moved the day away from the paper's rule
        ("day", pa.date32()),  # UTC day of visible_at: the day every later stage uses
        ("lang_score", pa.float32()),
        ("leak_flag", pa.bool_()),
        ("leak_reason", pa.string()),
        ("market_quote", pa.bool_()),  # quotes a betting/prediction market's odds (hidden by default)
        ("warc_file", pa.string()),
        ("warc_offset", pa.int64()),
    ]
)

#: Every dropped record, `WS/corpus/dropped/*.parquet`.
DROPPED = pa.schema(
    [
        ("doc_id", pa.string()),  # null when the record never got one (read stage)
        ("url", pa.string()),
        ("warc_file", pa.string()),
        ("warc_offset", pa.int64()),
        ("stage", pa.string()),  # one of CORPUS_STAGES
        ("reason", pa.string()),  # one of CORPUS_REASONS[stage]
        ("detail", pa.string()),  # free text (e.g. the measured value), may be null
        ("dup_of", pa.string()),  # dedup stage: doc_id of the earlier article, else null
        ("text_head", pa.string()),  # `corpus build --keep-dropped-text`: first 500 chars of its text, else null
    ]
)

#: A part's dropped rows (the per-WARC stages' output, corpus_build/pipeline.py): the store's columns plus
#: `profile`, the quality profile a row holds for. A part records every profile's verdicts, so switching
#: `quality.profile` re-extracts no WARC: a quality drop is one row per profile that drops the record,
#: and a later stage's drop of a record only some profiles kept is one row per keeping profile; null =
#: the row holds for every profile. The merge keeps the active profile's rows (`pipeline.profile_view`).
PART_DROPPED = pa.schema([*DROPPED, ("profile", pa.string())])

#: Characters of a dropped record's text kept in `text_head` (`corpus build --keep-dropped-text`).
DROPPED_TEXT_CHARS = 500

CORPUS_STAGES = ("read", "extract", "lang", "quality", "time", "dedup")

#: Fixed reason codes per corpus stage. Quality codes are prefixed by their filter family.
CORPUS_REASONS: dict[str, tuple[str, ...]] = {
    "read": ("http_status", "non_html", "empty_payload", "undecodable", "no_target_uri"),
    "extract": ("no_body", "parse_error"),  # parse_error: the page raised in a later per-record stage
    "lang": ("not_english", "not_english_page"),  # not_english_page: the language gate, before the body
    "quality": (
        # Gopher quality
        "gopher_short_doc", "gopher_long_doc", "gopher_mean_word_length", "gopher_symbol_ratio",
        "gopher_ellipsis_ratio", "gopher_bullet_lines", "gopher_ellipsis_lines", "gopher_alpha_words",
        "gopher_stop_words",
        # Gopher repetition
        "gopher_dup_para_frac", "gopher_dup_para_char_frac", "gopher_dup_line_frac",
        "gopher_dup_line_char_frac", "gopher_top_2_gram", "gopher_top_3_gram", "gopher_top_4_gram",
        "gopher_dup_5_gram", "gopher_dup_6_gram", "gopher_dup_7_gram", "gopher_dup_8_gram",
        "gopher_dup_9_gram", "gopher_dup_10_gram",
        # C4
        "c4_lorem_ipsum", "c4_curly_bracket", "c4_too_few_sentences",
        # FineWeb
        "fineweb_punct_lines", "fineweb_short_lines", "fineweb_dup_line_chars", "fineweb_newline_ratio",
        # the news profile's page rule (corpus_build/quality_page.py PageRule): not an article page
        "page_listing", "page_error", "page_login", "page_cookie_wall",
    ),
    "time": ("before_corpus_start", "after_corpus_end"),
    "dedup": ("dup_canonical_url", "dup_title", "dup_minhash"),
}

#: Files that could not be read whole (truncated gzip member, unreadable file).
FILE_ERRORS = pa.schema(
    [("warc_file", pa.string()), ("error", pa.string()), ("records_read", pa.int64()),
     ("kind", pa.string())]  # corpus_build.warc.FAULT_KINDS, or stream.TRANSFER_KINDS for a file not had
)

# ---------------------------------------------------------------------------------------------
# Events (docs/design.md §4)
# ---------------------------------------------------------------------------------------------

#: One row per kept or screened event, `WS/events/events.parquet`.
EVENTS = pa.schema(
    [
        ("event_id", pa.string()),  # "pm-<gamma id>" or "q-<id>" for imported questions
        ("source", pa.string()),  # polymarket | questions
        ("slug", pa.string()),
        ("question", pa.string()),
        ("description", pa.string()),  # full text as in the snapshot; cut per date when shown
        ("options", STR_LIST),
        ("type", pa.string()),  # binary | multi
        ("category", pa.string()),
        ("tags", STR_LIST),
        ("t_start", TS),
        ("t_close", TS),  # actual close: max closedTime (else endDate); only cuts whole bins
        ("start_day", pa.date32()),
        ("close_day", pa.date32()),
        ("t_end", TS),  # scheduled end: max endDate; the split, T_Q and the bins come from it
        ("end_day", pa.date32()),
        ("t_all", pa.date32()),  # day the last leg started: the first eligible day
        ("d_known", pa.date32()),  # first day an option's own price stayed >= 0.97 to its close; null: never
        ("cut", pa.date32()),  # min(d_known, close day - 1): offered bins lie wholly before it
        ("cut_by", pa.string()),  # d_known | close | cross_question: which rule set the cut
        ("steps_total", pa.int32()),  # T_Q of the uncut schedule
        ("steps_offered", pa.int32()),  # bins before the cut (a prefix)
        ("late_leg_days", pa.int32()),  # grid days before t_all removed by the late-leg rule
        ("option_seed", pa.int64()),  # seed of the option shuffle (null: binary, outcomes order)
        ("label", pa.string()),
        ("split", pa.string()),  # train | eval | none
        ("volume", pa.float64()),
        ("rho", pa.float64()),  # fraction of faithful days
        ("max_unfaithful_run", pa.int32()),
        ("mid_share", pa.float64()),  # share of faithful observed days with m(Y) in [0.05, 0.95]
        ("total_variation", pa.float64()),
        ("screen_verdict", pa.string()),  # Sufficient | Partial | Insufficient
        ("screen_leak", pa.bool_()),
        # cross-question exposure (docs/design.md §4): the first day another visible question presupposes this
        # event's outcome (null: never), which question, and the words that triggered it; it joins the cut
        ("exposure_day", pa.date32()),
        ("exposed_by", pa.string()),
        ("exposure_words", pa.string()),
    ]
)

#: One row per (event, option): the market leg behind each option.
LEGS = pa.schema(
    [
        ("event_id", pa.string()),
        ("option", pa.string()),
        ("option_index", pa.int32()),
        ("market_id", pa.string()),
        ("condition_id", pa.string()),
        ("token_id", pa.string()),  # the YES token of the leg (binary: token of this outcome)
        ("leg_start", TS),  # startDate
        ("leg_close", TS),  # closedTime, else endDate
        ("leg_end", TS),  # endDate, else closedTime
        ("first_trade", TS),
        ("start_day", pa.date32()),  # the option's start: first-trade day in negRiskAugmented bundles
        ("market_index", pa.int32()),  # position in Gamma's markets[] (the offered order is shuffled)
        ("neg_risk_other", pa.bool_()),  # the bundle's "Other" option
    ]
)

#: Daily market belief per (event, day, option).
BELIEFS = pa.schema(
    [
        ("event_id", pa.string()),
        ("day", pa.date32()),
        ("option", pa.string()),
        ("price", pa.float64()),  # scalar market probability: the leg's own UTC-day mean YES price
        ("price_close", pa.float64()),  # the leg's last YES price of the UTC day
        ("belief", pa.float64()),  # normalized over options priced that day; null when unpriced
        ("complete", pa.bool_()),  # every option priced that day
        ("n_obs", pa.int32()),
    ]
)

#: Daily trade count and share volume per (event, option leg, day).
TRADES_DAILY = pa.schema(
    [
        ("event_id", pa.string()),
        ("option", pa.string()),
        ("day", pa.date32()),
        ("n_trades", pa.int32()),
        ("shares", pa.float64()),
    ]
)

#: Forecast schedule, one row per (event, step).
SCHEDULE = pa.schema(
    [
        ("event_id", pa.string()),
        ("step", pa.int32()),  # 1-based
        ("steps_total", pa.int32()),
        ("forecast_date", pa.date32()),
        ("options", STR_LIST),  # every option of the event (the option set never changes)
        ("score", pa.float64()),  # 0.5 * movement + 0.5 * activity, max-normalized within the bin
        ("bin_first", pa.date32()),  # the bin the date was picked from
        ("bin_last", pa.date32()),
    ]
)

#: Corpus-side screen verdicts with their evidence.
SCREEN = pa.schema(
    [
        ("event_id", pa.string()),
        ("judge", pa.string()),  # offline | llm:<model>
        ("tau_star", pa.date32()),
        ("queries", STR_LIST),
        ("evidence_doc_ids", STR_LIST),
        ("verdict", pa.string()),
        ("leak", pa.bool_()),
        ("reasons", pa.string()),
    ]
)

#: Excluded events (one row per event, its first failing stage) with stage and reason code.
EXCLUDED = pa.schema(
    [
        ("event_id", pa.string()),
        ("stage", pa.string()),
        ("reason", pa.string()),
        ("detail", pa.string()),
    ]
)

#: ForecastBench items (docs/forecastbench.md), `WS/events/forecastbench.parquet`: one row per row of every
#: imported resolution set (combination and unresolved rows included), with what became of it.
FORECASTBENCH_ITEMS = pa.schema(
    [
        ("question_pk", pa.string()),  # ForecastBench's key: due_source_id (market), due_source_id_horizon (dataset)
        ("kind", pa.string()),  # market | dataset | null (a source ForecastBench does not score)
        ("due_date", pa.date32()),  # the round's forecast due date
        ("freeze_date", pa.date32()),  # the round's freeze day: the environment's forecast date (news up to it)
        ("source", pa.string()),  # polymarket | manifold | metaculus | infer | acled | dbnomics | fred | ...
        ("id", pa.string()),  # the id as published (a combination question's: its JSON list)
        ("combo", pa.bool_()),
        ("horizon", pa.int32()),  # resolution date - due date, in days (market items too; the key ignores it)
        ("resolution_date", pa.date32()),
        ("resolved", pa.bool_()),
        ("resolved_to", pa.float64()),  # 0/1 when resolved; an interim market value otherwise
        ("freeze_value", pa.float64()),  # market questions: the market's belief on the freeze day
        ("market_value_due", pa.float64()),  # the market's belief on the due date, where the workspace has it
        ("event_id", pa.string()),  # the environment event it was imported as (null: not imported)
        ("forecast_date", pa.date32()),  # the schedule date that answers it (null: not offered)
        ("status", pa.string()),  # scored | pending | combo | no_question | unknown_source | duplicate | cut | excluded
        ("detail", pa.string()),
    ]
)

#: The order in which the events build applies its stages (the funnel's rows).
EVENT_STAGES = ("parse", "layout", "label", "span", "activity", "signal", "split", "schedule", "screen")

EVENT_REASONS: dict[str, tuple[str, ...]] = {
    "parse": ("bad_json", "missing_field", "bad_timestamp", "bad_price", "no_price_history", "duplicate"),
    "layout": ("multi_market_not_negrisk", "no_markets", "negrisk_single_market"),
    "label": ("unresolved", "multiple_yes", "no_yes", "not_binary", "conflicting", "no_resolution_row"),
    "span": ("too_short", "same_day"),
    "activity": ("low_faithful_share", "long_unfaithful_run"),
    "signal": ("nearly_certain", "flat_prices"),
    "screen": ("insufficient", "partial", "leakage", "judge_error"),
    "split": ("crossing_split", "outside_splits"),
    "schedule": ("no_forecast_dates", "late_legs", "outcome_known_early", "exposed_early"),
}

# ---------------------------------------------------------------------------------------------
# Runs (docs/design.md §5 and §7)
# ---------------------------------------------------------------------------------------------

#: One row per scored (or missing) forecast, `WS/runs/<run_id>/forecasts.parquet`.
FORECASTS = pa.schema(
    [
        ("run_id", pa.string()),
        ("agent", pa.string()),
        ("event_id", pa.string()),
        ("rollout", pa.int32()),
        ("step", pa.int32()),
        ("steps_total", pa.int32()),
        ("forecast_date", pa.date32()),
        ("options", STR_LIST),
        ("probs", pa.list_(pa.float64())),  # normalized, aligned with `options`
        ("raw_report", pa.string()),  # JSON of what the agent sent
        ("fallback", pa.string()),  # null | reason the uniform forecast was used
        ("missing", pa.bool_()),  # infrastructure failure: recorded, never scored
        ("label", pa.string()),
        ("brier", pa.float64()),
        ("accuracy", pa.float64()),
        ("market_prob", pa.float64()),  # scalar market probability of the label that day (day mean)
        ("log_vs_market", pa.float64()),
        ("market_prob_close", pa.float64()),  # the same from the day's last price
        ("log_vs_market_close", pa.float64()),
        ("n_calls", pa.int32()),
        ("n_search", pa.int32()),
        ("n_open", pa.int32()),
        ("memory", pa.bool_()),
        ("show_market", pa.bool_()),  # the off-by-default ablation, recorded on every row
        ("hidden_flags", STR_LIST),  # article flags hidden from search/open_article (default: leak_flag, market_quote)
    ]
)

#: One row per tool call.
TOOL_CALLS = pa.schema(
    [
        ("run_id", pa.string()),
        ("agent", pa.string()),
        ("event_id", pa.string()),
        ("rollout", pa.int32()),
        ("step", pa.int32()),
        ("call_index", pa.int32()),
        ("tool", pa.string()),
        ("args_json", pa.string()),
        ("result_doc_ids", STR_LIST),
        ("error", pa.string()),
        ("latency_ms", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("cost_usd", pa.float64()),
    ]
)

#: Notebook (evidence ledger) entries as they stood at the end of each forecast date.
NOTEBOOK = pa.schema(
    [
        ("run_id", pa.string()),
        ("agent", pa.string()),
        ("event_id", pa.string()),
        ("rollout", pa.int32()),
        ("step", pa.int32()),  # the step at which this snapshot was taken
        ("entry_id", pa.int32()),
        ("claim", pa.string()),
        ("date_observed", pa.string()),  # as the agent wrote it (may be invalid)
        ("doc_ids", STR_LIST),
        ("created_step", pa.int32()),
        ("status", pa.string()),  # active | superseded
        ("superseded_reason", pa.string()),
        ("question_ids", STR_LIST),  # world mode: the questions an entry concerns (null in episode mode)
    ]
)

#: World mode (docs/design.md §5): one row per (agent, rollout, day), `WS/runs/<run_id>/world_days.parquet`.
WORLD_DAYS = pa.schema(
    [
        ("run_id", pa.string()),
        ("agent", pa.string()),
        ("world_id", pa.string()),
        ("rollout", pa.int32()),
        ("date", pa.date32()),
        ("day", pa.int32()),  # 1-based
        ("listed", pa.int32()),
        ("standing", pa.int32()),  # listed questions with a standing forecast at the day's end
        ("scored", pa.int32()),  # (question, date) rows scored that day
        ("brier", pa.float64()),  # their mean
        ("n_calls", pa.int32()),
        ("budget", pa.int32()),
        ("budget_exhausted", pa.bool_()),
        ("skipped", pa.string()),  # infrastructure failure that ended the day, else null
    ]
)

#: World mode: one row per (agent, rollout, question), `WS/runs/<run_id>/world_questions.parquet`.
WORLD_QUESTIONS = pa.schema(
    [
        ("run_id", pa.string()),
        ("agent", pa.string()),
        ("world_id", pa.string()),
        ("rollout", pa.int32()),
        ("event_id", pa.string()),
        ("first_day", pa.date32()),  # first and last listed day
        ("last_day", pa.date32()),
        ("cut", pa.date32()),
        ("scored", pa.int32()),
        ("brier", pa.float64()),  # mean over its scheduled dates (as in episode mode)
        ("eligible_days", pa.int32()),  # listed days before the cut
        ("days_with_standing", pa.int32()),
        ("time_weighted_brier", pa.float64()),  # mean over the eligible days of the day's-end forecast
    ]
)


def empty_table(schema: pa.Schema) -> pa.Table:
    """An empty table with `schema` (for stages that produced nothing)."""
    return schema.empty_table()
