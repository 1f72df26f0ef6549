"""Polymarket-shaped JSON for the sample world, in the cache layout the events builder reads.

OUT/polymarket/gamma/events-<offset>.json      Gamma /events?closed=true pages (50 events each)
OUT/polymarket/clob/prices-history/<token>.json CLOB /prices-history {"history": [{"t", "p"}]}
OUT/polymarket/data/trades/<conditionId>.json   Data API /trades, all pages merged

Quirks of the real responses are kept: `outcomes`, `outcomePrices`, `clobTokenIds` and
`umaResolutionStatuses` are JSON-encoded strings, market `volume` is a string, `negRisk` is
sometimes null or absent, timestamps come in four formats.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from forecast_env.synth import grammar as g
from forecast_env.synth.world import UTC, Event, Leg, hex_id

PAGE = 50

TAGS = {
    "politics": [("2", "Politics", "politics"), ("1101", "Elections", "elections")],
    "sports": [("1", "Sports", "sports"), ("1201", "Championships", "championships")],
    "business": [("107", "Business", "business"), ("1301", "Mergers", "mergers")],
    "science": [("74", "Science", "science"), ("1401", "Space", "space")],
    "entertainment": [("53", "Entertainment", "entertainment"), ("1501", "Awards", "awards")],
}


def fmt_ts(dt: datetime, style: int) -> str:
    """One of the four timestamp formats seen in Gamma responses."""
    dt = dt.astimezone(UTC)
    if style == 0:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"
    if style == 1:
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    if style == 2:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return dt.strftime("%Y-%m-%d %H:%M:%S+00")


def _terminal(rng: random.Random, yes: bool) -> str:
    eps = 10 ** rng.uniform(-7.5, -3.2)
    return f"{1 - eps:.10f}" if yes else f"{eps:.10f}"


def _prices_json(rng: random.Random, first_yes: bool) -> str:
    if rng.random() < 0.1:
        return json.dumps(["1", "0"] if first_yes else ["0", "1"])
    a = _terminal(rng, first_yes)
    b = f"{1 - float(a):.10f}"
    return json.dumps([a, b])


def _slug(text: str) -> str:
    out = "".join(c.lower() if c.isalnum() else "-" for c in text)
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-")[:80]


def _leg_price_path(ev: Event, j: int) -> np.ndarray:
    """Daily latent YES price of leg `j` (binary: of the first outcome)."""
    return ev.probs[:, 0] if ev.type == "binary" else ev.probs[:, j]


def price_history(ev: Event, j: int, leg: Leg, seed: int) -> list[dict]:
    rng = np.random.default_rng(g.stable_int(seed, "prices", ev.gamma_id, j))
    path = _leg_price_path(ev, j)
    noise = 0.0 if ev.plant == "flat" else 0.003 if ev.plant == "nearly_certain" else 0.012
    out = []
    for i, d in enumerate(ev.days):
        if np.isnan(path[i]):
            continue
        day0 = datetime(d.year, d.month, d.day, tzinfo=UTC)
        lo = max(day0, leg.start).timestamp()
        hi = min(day0 + timedelta(days=1), leg.close).timestamp()
        if hi - lo < 600:
            continue
        c = int(rng.choice(7, p=[0.03, 0.1, 0.2, 0.25, 0.2, 0.12, 0.1]))
        for t in np.sort(rng.uniform(lo, hi, c)):
            f = (t - day0.timestamp()) / 86400.0
            nxt = path[i + 1] if i + 1 < len(path) and not np.isnan(path[i + 1]) else path[i]
            p = path[i] + (nxt - path[i]) * f * 0.5 + rng.normal(0, noise) if noise else path[i]
            out.append({"t": int(t), "p": round(float(np.clip(p, 0.001, 0.999)), 4)})
    return out


def trades(ev: Event, seed: int) -> dict[str, list[dict]]:
    """Data API trade rows per condition id."""
    rng = np.random.default_rng(g.stable_int(seed, "trades", ev.gamma_id))
    wallets = ["0x" + hex_id(40, seed, "wallet", i) for i in range(64)]
    out: dict[str, list[dict]] = {}
    for j, leg in enumerate(ev.legs):
        rows: list[dict] = []
        path = _leg_price_path(ev, j)
        realized = ev.type == "binary" or j == ev.winner
        for i, d in enumerate(ev.days):
            if np.isnan(path[i]):
                continue
            day0 = datetime(d.year, d.month, d.day, tzinfo=UTC)
            lo = max(day0, leg.start).timestamp()
            hi = min(day0 + timedelta(days=1), leg.close).timestamp()
            if hi - lo < 600:
                continue
            good = bool(ev.faithful[i]) if realized else True
            plan: list[tuple[int, float]] = []  # (outcome index, size)
            if ev.type == "binary":
                r = ev.winner
                if good:
                    n = 5 + int(rng.poisson(5))
                    sizes = rng.lognormal(3.6, 0.9, n)
                    sizes *= max(1.0, 160.0 / sizes.sum())
                    plan += [(r, s) for s in sizes]
                    plan += [(1 - r, s) for s in rng.lognormal(3.2, 1.0, int(rng.poisson(4)))]
                else:
                    plan += [(r, s) for s in rng.uniform(2, 30, int(rng.integers(0, 2)))]
                    plan += [(1 - r, s) for s in rng.uniform(2, 30, int(rng.integers(0, 2)))]
            elif realized:
                if good:
                    n = 4 + int(rng.poisson(5))
                    sizes = rng.lognormal(3.4, 0.9, n)
                    sizes *= max(1.0, 90.0 / sizes.sum())
                    plan += [(int(rng.random() < 0.2), s) for s in sizes]
                else:
                    plan += [(0, s) for s in rng.uniform(2, 20, int(rng.integers(0, 3)))]
            else:
                plan += [(int(rng.random() < 0.25), s)
                         for s in rng.lognormal(3.0, 1.0, int(rng.poisson(3)))]
            ts = np.sort(rng.uniform(lo, hi, len(plan)))
            for (oi, size), t in zip(plan, ts):
                p_yes = float(path[i])
                p = p_yes if oi == 0 else 1 - p_yes
                p = float(np.clip(p + rng.normal(0, 0.01), 0.001, 0.999))
                outcome = (ev.options[oi] if ev.type == "binary" else ["Yes", "No"][oi])
                rows.append({
                    "proxyWallet": wallets[int(rng.integers(0, len(wallets)))],
                    "side": "BUY" if rng.random() < 0.6 else "SELL",
                    "asset": leg.tokens[oi],
                    "conditionId": leg.condition_id,
                    "size": round(float(size), 2),
                    "price": round(p, 3),
                    "timestamp": int(t),
                    "title": leg.question,
                    "outcome": outcome,
                    "outcomeIndex": oi,
                    "transactionHash": "0x" + hex_id(64, seed, "tx", leg.condition_id, i, len(rows)),
                })
        rows.sort(key=lambda r: (-r["timestamp"], r["transactionHash"]))
        out[leg.condition_id] = rows
    return out


def gamma_event(ev: Event, seed: int, volumes: dict[str, float]) -> dict:
    rng = g.sub_rng(seed, "gamma", ev.gamma_id)
    negrisk = ev.type == "multi" and ev.plant != "not_negrisk"
    slug = _slug(ev.facts.title) + "-" + ev.gamma_id[-3:]
    desc = ev.facts.description + ev.clarification
    markets = []
    neg_id = "0x" + hex_id(64, seed, "negrisk", ev.gamma_id) if negrisk else ""
    for j, leg in enumerate(ev.legs):
        style = rng.randrange(4)
        if ev.type == "binary":
            outcomes = ev.options
            if ev.plant == "unresolved":
                prices = json.dumps(["0.5", "0.5"])
            else:
                prices = _prices_json(rng, ev.winner == 0)
            if ev.plant == "bad_json":
                prices = prices[:-1]  # cut the closing bracket: not valid JSON
        else:
            outcomes = ["Yes", "No"]
            prices = _prices_json(rng, leg.yes_final)
        m: dict = {
            "id": leg.market_id,
            "question": leg.question,
            "conditionId": leg.condition_id,
            "slug": _slug(leg.question)[:60] + "-" + leg.market_id[-3:],
            "description": desc if ev.type == "binary" else (
                f"{ev.facts.description} This market covers the option \"{leg.option}\"."),
            "groupItemTitle": leg.option if ev.type == "multi" else "",
            "startDate": fmt_ts(leg.start, style),
            "endDate": fmt_ts(leg.end, rng.choice([1, 1, 0])),
            "closedTime": fmt_ts(leg.close, rng.choice([3, 3, 0, 2])),
            "closed": True,
            "active": True,
            "volume": f"{volumes.get(leg.condition_id, 0.0):.{rng.choice([2, 3, 4, 6])}f}",
            "umaResolutionStatuses": json.dumps(["proposed", "disputed"] if ev.plant == "unresolved"
                                                else ["proposed", "resolved"]),
            "outcomes": json.dumps(outcomes),
            "outcomePrices": prices,
            "clobTokenIds": json.dumps(list(leg.tokens)),
        }
        r = rng.random()
        if negrisk:
            m["negRisk"] = True
            m["negRiskMarketID"] = neg_id
            if ev.extra.get("null_negrisk") and j == 0:
                m["negRisk"] = None
            elif ev.extra.get("null_negrisk") and j == 1:
                del m["negRisk"]
            elif r < 0.1:
                m["negRisk"] = None
            elif r < 0.15:
                del m["negRisk"]
        else:
            m["negRisk"] = False
            if ev.extra.get("null_negrisk") or r < 0.15:
                m["negRisk"] = None
            elif r < 0.25:
                del m["negRisk"]
        if ev.plant == "missing_field":
            del m["conditionId"]
        markets.append(m)
    cat = ev.scenario.category
    return {
        "id": ev.gamma_id,
        "ticker": slug,
        "slug": slug,
        "title": ev.facts.title,
        "description": desc,
        "startDate": fmt_ts(min(lg.start for lg in ev.legs) - timedelta(minutes=rng.randint(1, 50)),
                            rng.randrange(3)),
        "creationDate": fmt_ts(ev.start - timedelta(hours=1), 2),
        "endDate": fmt_ts(max(lg.end for lg in ev.legs), 1),
        "closedTime": fmt_ts(max(lg.close for lg in ev.legs), 3),
        "active": True,
        "closed": True,
        "archived": False,
        "enableNegRisk": negrisk,
        "negRiskAugmented": ev.augmented,
        "volume": round(sum(volumes.get(lg.condition_id, 0.0) for lg in ev.legs), 4),
        "tags": [{"id": i, "label": lab, "slug": s} for i, lab, s in TAGS[cat]],
        "markets": markets,
    }


def write_polymarket(out: Path, events: list[Event], seed: int) -> dict:
    """Write the Gamma pages, price histories and trades of `events`; returns counts."""
    root = out / "polymarket"
    (root / "gamma").mkdir(parents=True, exist_ok=True)
    (root / "clob" / "prices-history").mkdir(parents=True, exist_ok=True)
    (root / "data" / "trades").mkdir(parents=True, exist_ok=True)
    n_hist = n_trades = 0
    gamma = []
    for ev in sorted(events, key=lambda e: int(e.gamma_id)):
        rows = trades(ev, seed)
        volumes = {cid: sum(r["size"] * r["price"] for r in rs) * 7.3 for cid, rs in rows.items()}
        for cid, rs in rows.items():
            if ev.plant == "missing_field":
                continue
            _dump(root / "data" / "trades" / f"{cid}.json", rs)
            n_trades += len(rs)
        for j, leg in enumerate(ev.legs):
            hist = price_history(ev, j, leg, seed)
            _dump(root / "clob" / "prices-history" / f"{leg.tokens[0]}.json", {"history": hist})
            other = [{"t": h["t"], "p": round(1 - h["p"], 4)} for h in hist]
            _dump(root / "clob" / "prices-history" / f"{leg.tokens[1]}.json", {"history": other})
            n_hist += 2
        gamma.append(gamma_event(ev, seed, volumes))
    for off in range(0, len(gamma), PAGE):
        _dump(root / "gamma" / f"events-{off}.json", gamma[off : off + PAGE])
    return {"events": len(gamma), "price_histories": n_hist, "trades": n_trades,
            "gamma_pages": (len(gamma) + PAGE - 1) // PAGE}


def _dump(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=None, separators=(",", ":")),
                    encoding="utf-8")
