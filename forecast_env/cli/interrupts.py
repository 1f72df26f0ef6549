"""Ctrl-C and SIGTERM on the command line: one line on stderr, a documented exit status, resumable state.

Inside `catching_signals()` SIGTERM raises `Interrupted` (a `KeyboardInterrupt`, as Ctrl-C's SIGINT
does), so a long command unwinds the way it does for Ctrl-C: atomic writes in flight delete their
temporary files, worker processes are stopped (`executor.map_unordered`), and everything finished
before (parts, months, episodes, downloaded files) stays for the rerun to skip. `main` then prints
`interrupted_line(...)` and returns `SIGINT_EXIT` (130) or `SIGTERM_EXIT` (143), the shell's
128 + signal number.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import Any

#: Exit status after Ctrl-C (SIGINT): 128 + 2.
SIGINT_EXIT = 130
#: Exit status after SIGTERM: 128 + 15.
SIGTERM_EXIT = 143


class Interrupted(KeyboardInterrupt):
    """A signal asked the command to stop (`signum`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def catching_signals() -> Iterator[None]:
    """Turn SIGTERM into `Interrupted` while the block runs (main thread only; restored after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_line(exc: KeyboardInterrupt, argv: Sequence[str]) -> tuple[str, int]:
    """The one stderr line and the exit status for a command stopped by `exc`."""
    signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
    words = []
    for word in argv:
        if word.startswith("-"):
            break
        words.append(word)
    what = " ".join(["forecast-env", *words])
    name = signal.Signals(signum).name
    status = SIGTERM_EXIT if signum == signal.SIGTERM else SIGINT_EXIT
    return (f"interrupted: {what} stopped by {name}; finished work is kept: rerun the same command to resume",
            status)


__all__ = ["SIGINT_EXIT", "SIGTERM_EXIT", "Interrupted", "catching_signals", "interrupted_line"]
