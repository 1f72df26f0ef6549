"""The project's error hierarchy: every user-facing failure is a `ForecastEnvError`.

Messages say what was wrong, where (file, record, key) and what to do. The CLI prints them in one
line and exits 2 (`--debug` shows the traceback); a full disk exits `DISK_FULL_EXIT` instead.
"""

from __future__ import annotations

import errno as _errno


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


#: The exit status of a command stopped by a full disk (ENOSPC, EDQUOT) or a file-size limit (EFBIG);
#: 2 stays bad input. The one definition: the CLI, the docs and the tests read it from here.
DISK_FULL_EXIT = 5

_DISK_FULL_ERRNOS = {_errno.ENOSPC: "no space left on device", _errno.EDQUOT: "disk quota exceeded",
                     _errno.EFBIG: "file too large"}
# what libraries that drop errno (polars, faiss, pyarrow's nested errors) still say, lower-cased
_DISK_FULL_TEXTS = {"no space left on device": _errno.ENOSPC, f"os error {_errno.ENOSPC}": _errno.ENOSPC,
                    f"errno {_errno.ENOSPC}": _errno.ENOSPC, "disk quota exceeded": _errno.EDQUOT,
                    f"os error {_errno.EDQUOT}": _errno.EDQUOT, "file too large": _errno.EFBIG,
                    f"os error {_errno.EFBIG}": _errno.EFBIG}


class DiskFullError(ForecastEnvError):
    """A write failed because the disk is full, over quota or past a file-size limit (exit `DISK_FULL_EXIT`)."""

    @classmethod
    def at(cls, path: object, exc: BaseException, code: int | None = None) -> DiskFullError:
        """The error for a failed write of `path` caused by `exc` (a full disk), with the fix."""
        import os
        import shutil

        code = code or disk_full_errno(exc) or _errno.ENOSPC
        where = os.fspath(path) if isinstance(path, (str, os.PathLike)) else str(path)
        free = ""
        probe = where
        while probe and not os.path.isdir(probe):
            parent = os.path.dirname(probe)
            probe = parent if parent != probe else ""
        if probe:
            try:
                usage = shutil.disk_usage(probe)
                free = f"; {usage.free:,} of {usage.total:,} bytes free there"
            except OSError:
                free = ""
        if code == _errno.EFBIG:
            return cls(f"file too large: could not write {where} (a file-size limit: `ulimit -f`, or the file "
                       f"system's largest file{free}); raise the limit or move the workspace to another disk, then "
                       "rerun the same command: it resumes from the last finished step, nothing written is damaged")
        return cls(f"disk full: could not write {where} ({_DISK_FULL_ERRNOS[code]}{free}); free space on that "
                   "disk or move the workspace to a larger one, then rerun the same command: it resumes from the "
                   "last finished step, and nothing already written is damaged")


def disk_full_errno(exc: BaseException | None) -> int | None:
    """ENOSPC, EDQUOT or EFBIG if `exc` or an exception it came from is one, else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFullError):
            return _errno.ENOSPC
        if isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS:
            return exc.errno
        text = str(exc).lower()
        for needle, code in _DISK_FULL_TEXTS.items():
            if needle in text:
                return code
        exc = exc.__cause__ or exc.__context__
    return None


class QuestionsError(ForecastEnvError):
    """Question generation or resolution cannot proceed (no corpus, a missing recording in replay, bad dates)."""
