"""Hand-made Polymarket caches for the event-construction tests (small, exact, written in tmp_path)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any


def ts(d: date, hour: int = 12, minute: int = 0) -> int:
    return int(datetime(d.year, d.month, d.day, hour, minute, tzinfo=UTC).timestamp())


def iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclass
class HandCache:
    """Accumulates Gamma events, price histories and trades; `write(root)` lays out the cache."""

    events: list[dict] = field(default_factory=list)
    prices: dict[str, list[dict]] = field(default_factory=dict)
    trades: dict[str, list[dict]] = field(default_factory=dict)
    _n: int = 0

    def _token(self) -> str:
        self._n += 1
        return str(10**20 + self._n)

    def market(
        self,
        start: datetime,
        close: datetime,
        daily: list[float | None] | None,
        terminal: tuple[str, str] | None,
        *,
        outcomes: tuple[str, str] = ("Yes", "No"),
        title: str | None = None,
        question: str = "Will it happen?",
        neg_risk: Any = False,
        trades_per_day: tuple[int, float] = (6, 40.0),
        trade_outcome: int = 0,
        points_per_day: int = 2,
    ) -> dict:
        """One market whose first token has `daily[i]` as price on day i (two points around it)."""
        self._n += 1
        mid = str(700000 + self._n)
        cid = "0x" + f"{self._n:064x}"
        t0, t1 = self._token(), self._token()
        hist = []
        trades = []
        d0 = start.date()
        for i, p in enumerate(daily or []):
            d = d0 + timedelta(days=i)
            if p is None:
                continue
            if points_per_day == 1:
                hist.append({"t": ts(d, 12), "p": p})
            else:
                hist += [{"t": ts(d, 6), "p": p - 0.01}, {"t": ts(d, 18), "p": p + 0.01}]
            n, size = trades_per_day
            for j in range(n):
                trades.append({"asset": [t0, t1][trade_outcome], "conditionId": cid, "side": "BUY", "size": size,
                               "price": p, "timestamp": ts(d, 1 + j % 20, j), "outcome": outcomes[trade_outcome],
                               "outcomeIndex": trade_outcome, "transactionHash": f"0x{self._n}{i}{j}"})
        if daily is not None:
            self.prices[t0] = hist
        self.trades[cid] = trades
        m = {"id": mid, "conditionId": cid, "question": question, "description": "", "groupItemTitle": title or "",
             "startDate": iso(start), "endDate": iso(close), "closedTime": iso(close), "closed": True,
             "volume": "123.5", "outcomes": json.dumps(list(outcomes)), "clobTokenIds": json.dumps([t0, t1])}
        if terminal is not None:
            m["outcomePrices"] = json.dumps(list(terminal))
        if neg_risk != "absent":
            m["negRisk"] = neg_risk
        return m

    def event(self, gid: str, markets: list[dict], *, title: str = "Will it happen?", description: str = "About it.",
              neg_risk: bool = False, **extra: Any) -> dict:
        ev = {"id": gid, "slug": f"ev-{gid}", "title": title, "description": description,
              "startDate": markets[0].get("startDate") if markets else None, "enableNegRisk": neg_risk,
              "negRiskAugmented": False, "tags": [{"id": "2", "label": "Politics", "slug": "politics"}],
              "volume": 1000.0, "markets": markets, **extra}
        self.events.append(ev)
        return ev

    def write(self, root: Path) -> Path:
        (root / "gamma").mkdir(parents=True, exist_ok=True)
        (root / "clob" / "prices-history").mkdir(parents=True, exist_ok=True)
        (root / "data" / "trades").mkdir(parents=True, exist_ok=True)
        (root / "gamma" / "events-0.json").write_text(json.dumps(self.events))
        for tok, hist in self.prices.items():
            (root / "clob" / "prices-history" / f"{tok}.json").write_text(json.dumps({"history": hist}))
        for cid, rows in self.trades.items():
            (root / "data" / "trades" / f"{cid}.json").write_text(json.dumps(rows))
        return root


def wiggle(n: int, lo: float = 0.3, hi: float = 0.7) -> list[float]:
    """A price path that moves (so the signal filter passes)."""
    return [lo if i % 2 == 0 else hi for i in range(n)]


#: Market-side-only build (no corpus): no screen, activity 0 in the schedule.
MARKET_ONLY = {"screen": {"enabled": False}, "schedule": {"require_index": False}}
