"""Polymarket ingestion: the downloader (`PolymarketClient`) and the on-disk cache (`PolymarketCache`).

Every later stage reads the cache only, so event construction runs offline.
"""

from forecast_env.envs.events.polymarket.cache import (
    PolymarketCache,
    parse_json_string_field,
)
from forecast_env.envs.events.polymarket.client import HTTPStatusFailure, PolymarketClient

__all__ = [
    "HTTPStatusFailure",
    "PolymarketCache",
    "PolymarketClient",
    "parse_json_string_field",
]
