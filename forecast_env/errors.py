"""The project's error hierarchy: every user-facing failure is a `ForecastEnvError`.

Messages say what was wrong, where (file, record, key) and what to do. The CLI prints them in one
line and exits 2 (`--debug` shows the traceback).
"""

from __future__ import annotations


class ForecastEnvError(Exception):
    """Base class of every error this project raises on purpose."""


class ConfigError(ForecastEnvError):
    """A configuration file, key or value is invalid."""


class WorkspaceError(ForecastEnvError):
    """The workspace lacks an artifact, or an artifact fails its manifest check."""


class CorpusError(ForecastEnvError):
    """The corpus build cannot proceed (no input files, unreadable workspace...)."""


class IndexMissingError(WorkspaceError):
    """A search was asked of a workspace that has no index."""


class QueryError(ForecastEnvError):
    """A search or open_article request is malformed (bad date, empty query, unknown mode)."""


class ArticleUnavailableError(ForecastEnvError):
    """An article that cannot be opened as of the date: unknown, not yet visible, or hidden.

    The three cases share this one type and one message, so a refusal tells nothing about whether
    the article exists (docs/design.md §3.hiding).
    """


#: Former names of `ArticleUnavailableError` (the same class; catching either catches every refusal).
FutureArticleError = ArticleUnavailableError
UnknownArticleError = ArticleUnavailableError


class EventsError(ForecastEnvError):
    """Event construction cannot proceed."""


class FetchError(ForecastEnvError):
    """A remote API could not be reached after retries."""


class EndpointError(ForecastEnvError):
    """An LLM endpoint failed after retries (the report is *missing*, not uniform)."""


class RunError(ForecastEnvError):
    """A benchmark run cannot proceed."""
