"""The on-disk Polymarket cache: its layout, pure field parsers, and read access for later stages.

Layout of a cache folder DIR (written by `PolymarketClient`, the sample-world generator, or by hand):

    DIR/gamma/events-<offset>.json            one JSON list per Gamma /events page (offset of the page)
    DIR/clob/prices-history/<token_id>.json   {"history": [{"t": unix_seconds, "p": price}, ...]}
                                               (whole lifetime, windows merged, sorted by t, unique t)
    DIR/data/trades/<conditionId>.json        one JSON list of all trade rows of the market
                                               (pages merged, deduplicated)
    DIR/fetch_state.json                      what the downloader has completed (resumability)

Everything after ingestion runs offline from this folder; `PolymarketCache` is how it is read.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from forecast_env.errors import EventsError

log = logging.getLogger(__name__)

GAMMA_DIR = "gamma"
PRICES_DIR = "clob/prices-history"
TRADES_DIR = "data/trades"
STATE_FILE = "fetch_state.json"

_PAGE_RE = re.compile(r"^events-(\d+)\.json$")
# Token ids are long decimal strings and condition ids 0x-hex: anything else could escape the folder.
_SAFE_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,200}$")


def parse_json_string_field(value: Any) -> list | None:
    """A Gamma list field (`outcomes`, `outcomePrices`, `clobTokenIds`) as a list, or None if unusable.

    Gamma sends these as JSON-encoded strings (`'["Yes", "No"]'`); an already-decoded list is
    accepted as is. None, empty strings, invalid JSON and JSON that is not a list give None.
    """
    if isinstance(value, list):
        return value
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, (bytes, bytearray)):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        decoded = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return decoded if isinstance(decoded, list) else None


def is_safe_id(value: Any) -> bool:
    """True when `value` is a string usable as a cache file name (token id, condition id)."""
    return isinstance(value, str) and _SAFE_ID_RE.fullmatch(value) is not None


def _id_sort_key(event: dict) -> tuple[int, int, str]:
    raw = event.get("id")
    text = "" if raw is None else str(raw)
    if text.isdigit():
        return (0, int(text), text)
    return (1, 0, text)


class PolymarketCache:
    """Read access to (and the paths of) a Polymarket cache folder; see the module docstring.

    An unreadable Gamma page raises `EventsError` (the listing itself is suspect). An unreadable
    price or trade file raises too when `strict`; otherwise it reads as absent (None), is logged,
    and its path is kept in `unreadable`, so that the event builder excludes that one event.
    """

    def __init__(self, directory: str | os.PathLike[str], strict: bool = False) -> None:
        self.dir = Path(directory)
        self.strict = strict
        #: Price/trade files that could not be read (non-strict mode).
        self.unreadable: list[Path] = []

    # -- paths ---------------------------------------------------------------------------------
    @property
    def gamma_dir(self) -> Path:
        return self.dir / GAMMA_DIR

    @property
    def prices_dir(self) -> Path:
        return self.dir / PRICES_DIR

    @property
    def trades_dir(self) -> Path:
        return self.dir / TRADES_DIR

    @property
    def state_path(self) -> Path:
        return self.dir / STATE_FILE

    def events_page_path(self, offset: int) -> Path:
        return self.gamma_dir / f"events-{int(offset)}.json"

    def prices_path(self, token_id: str) -> Path:
        return self.prices_dir / f"{self._checked_id(token_id, 'token id')}.json"

    def trades_path(self, condition_id: str) -> Path:
        return self.trades_dir / f"{self._checked_id(condition_id, 'condition id')}.json"

    @staticmethod
    def _checked_id(value: Any, what: str) -> str:
        if not is_safe_id(value):
            raise EventsError(f"invalid Polymarket {what} {value!r}: expected letters, digits, '_' or '-'")
        return value

    # -- reading -------------------------------------------------------------------------------
    def page_offsets(self) -> list[int]:
        """Offsets of the cached Gamma /events pages, ascending."""
        if not self.gamma_dir.is_dir():
            return []
        offsets = []
        for path in self.gamma_dir.iterdir():
            match = _PAGE_RE.match(path.name)
            if match:
                offsets.append(int(match.group(1)))
        return sorted(offsets)

    def read_page(self, offset: int) -> list:
        """One cached Gamma /events page (a list; EventsError if it is not one)."""
        path = self.events_page_path(offset)
        data = self._read_json(path)
        if not isinstance(data, list):
            raise EventsError(
                f"{path}: a Gamma /events page must be a JSON list, got {type(data).__name__}; "
                "delete the file and rerun `forecast-env events fetch`"
            )
        return data

    def events(self) -> Iterator[Any]:
        """All cached events, de-duplicated by id (the page with the highest offset wins), sorted by id.

        Entries without an id, and entries that are not JSON objects at all, come last, so that the
        event builder counts them and excludes them with a reason.
        """
        by_id: dict[str, dict] = {}
        no_id: list[dict] = []
        for offset in self.page_offsets():
            for event in self.read_page(offset):
                if not isinstance(event, dict):
                    no_id.append(event)  # the builder excludes it with a parse reason
                    continue
                raw = event.get("id")
                if raw is None or str(raw) == "":
                    no_id.append(event)
                else:
                    by_id[str(raw)] = event
        yield from sorted(by_id.values(), key=_id_sort_key)
        yield from no_id

    def prices(self, token_id: str) -> list[dict] | None:
        """The cached price history `[{"t": unix_seconds, "p": price}, ...]` of a token; None if absent."""
        if not is_safe_id(token_id):
            return None
        path = self.prices_path(token_id)
        if not path.exists():
            return None
        try:
            data = self._read_json(path)
            history = data.get("history") if isinstance(data, dict) else data
            if not isinstance(history, list):
                raise EventsError(f'{path}: expected {{"history": [...]}}; delete the file and refetch it')
        except EventsError as exc:
            self._unreadable(path, exc)
            return None
        return history

    def trades(self, condition_id: str) -> list[dict] | None:
        """The cached trade rows of a market (condition id); None if absent."""
        if not is_safe_id(condition_id):
            return None
        path = self.trades_path(condition_id)
        if not path.exists():
            return None
        try:
            data = self._read_json(path)
            if not isinstance(data, list):
                raise EventsError(
                    f"{path}: expected a JSON list of trade rows; delete the file and refetch it"
                )
        except EventsError as exc:
            self._unreadable(path, exc)
            return None
        return data

    def _unreadable(self, path: Path, exc: EventsError) -> None:
        if self.strict:
            raise exc
        log.warning("%s", exc)
        self.unreadable.append(path)

    def state(self) -> dict:
        """The downloader's fetch_state.json (an empty dict when there is none)."""
        if not self.state_path.exists():
            return {}
        data = self._read_json(self.state_path)
        return data if isinstance(data, dict) else {}

    @staticmethod
    def _read_json(path: Path) -> Any:
        try:
            with open(path, "rb") as fh:
                return json.loads(fh.read())
        except FileNotFoundError as exc:
            raise EventsError(
                f"{path}: missing from the Polymarket cache; run `forecast-env events fetch`"
            ) from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise EventsError(
                f"{path}: not valid JSON ({exc}); delete the file and rerun "
                "`forecast-env events fetch` to download it again"
            ) from exc
