"""Polymarket-shaped JSON for the sample world, in the cache layout the events builder reads.

OUT/polymarket/gamma/events-<offset>.json      Gamma /events?closed=true pages (50 events each)
OUT/polymarket/clob/prices-history/<token>.json CLOB /prices-history {"history": [{"t", "p"}]}
OUT/polymarket/data/trades/<conditionId>.json   Data API /trades, all pages merged

Quirks of the real responses are kept: `outcomes`, `outcomePrices`, `clobTokenIds` and
`umaResolutionStatuses` are JSON-encoded strings, market `volume` is a string, `negRisk` is
sometimes null or absent, timestamps come in four formats.

What real Polymarket does to event construction is planted on some good events (`plan_plants`):
a `negRiskAugmented` bundle's late leg is a renamed placeholder (startDate = the bundle's start,
first trade later); a losing leg is the bundle's `negRiskOther` "Other" option; a deadline question
closes well before its scheduled endDate; an outcome is public days before the close (its leg's
prices >= 0.97 from some day); an undated clarification is appended to a description. For every
event `schedule_truth` states, from the generated JSON alone, what the schedule must be
(`truth.json` -> events -> id -> "schedule").
"""

from __future__ import annotations

import json
import random
from datetime import date, datetime, timedelta
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
    """CLOB points of leg `j`'s YES token (binary: the first outcome's token)."""
    rng = np.random.default_rng(g.stable_int(seed, "prices", ev.gamma_id, j))
    known = ev.extra.get("known_from")  # planted: the outcome is public from this day index on
    winner_high = (ev.winner == 0) if ev.type == "binary" else (j == ev.winner)
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
            if known is not None and i >= known:
                p = rng.uniform(0.975, 0.995) if winner_high else rng.uniform(0.003, 0.02)
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
    desc = ev.facts.description + ev.clarification + ev.extra.get("undated_clarification", "")
    end_shift = timedelta(days=ev.extra.get("end_shift_days", 0))
    other = ev.extra.get("other_leg")
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
            "groupItemTitle": ("Other" if j == other else leg.option) if ev.type == "multi" else "",
            # a renamed placeholder of an augmented bundle was listed when the bundle opened
            "startDate": fmt_ts(ev.start if ev.augmented and leg.late else leg.start, style),
            "endDate": fmt_ts(leg.end + end_shift, rng.choice([1, 1, 0])),
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
        if j == other:
            m["negRiskOther"] = True
        elif negrisk:
            m["negRiskOther"] = False
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
        "endDate": fmt_ts(max(lg.end for lg in ev.legs) + end_shift, 1),
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
    plan_plants(events, seed)
    for ev in sorted(events, key=lambda e: int(e.gamma_id)):
        rows = trades(ev, seed)
        volumes = {cid: sum(r["size"] * r["price"] for r in rs) * 7.3 for cid, rs in rows.items()}
        for cid, rs in rows.items():
            if ev.plant == "missing_field":
                continue
            _dump(root / "data" / "trades" / f"{cid}.json", rs)
            n_trades += len(rs)
        hists = []
        for j, leg in enumerate(ev.legs):
            hist = price_history(ev, j, leg, seed)
            hists.append(hist)
            _dump(root / "clob" / "prices-history" / f"{leg.tokens[0]}.json", {"history": hist})
            other = [{"t": h["t"], "p": round(1 - h["p"], 4)} for h in hist]
            _dump(root / "clob" / "prices-history" / f"{leg.tokens[1]}.json", {"history": other})
            n_hist += 2
        gamma.append(gamma_event(ev, seed, volumes))
        ev.extra["truth"] = {"schedule": schedule_truth(gamma[-1], hists, rows),
                             "undated_clarification": ev.extra.get("undated_clarification", "").strip() or None,
                             "other_option": ("Other", ev.legs[ev.extra["other_leg"]].option)
                             if "other_leg" in ev.extra else None}
    for off in range(0, len(gamma), PAGE):
        _dump(root / "gamma" / f"events-{off}.json", gamma[off : off + PAGE])
    return {"events": len(gamma), "price_histories": n_hist, "trades": n_trades,
            "gamma_pages": (len(gamma) + PAGE - 1) // PAGE}


def _dump(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=None, separators=(",", ":")),
                    encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Event-side plants and what the schedule must do with them
# ---------------------------------------------------------------------------------------------

_UNDATED = [
    "Clarification: if the official count is delayed, this market resolves on the certified result.",
    "Update: the resolution source now also includes the official gazette.",
    "Additional context: an announcement made after the deadline does not count toward resolution.",
]


def _window_end(ev: Event) -> date | None:
    return {"train": date(2026, 3, 1), "eval": date(2026, 6, 1)}.get(ev.split)


def plan_plants(events: list[Event], seed: int) -> None:
    """Choose the good events that carry each event-side plant (every fourth eligible one, at least one).

    Recorded in `ev.extra`: `end_shift_days` (endDate well after closedTime), `known_from` (day
    index from which the outcome is public), `other_leg` (a losing leg that is the "Other" option),
    `undated_clarification` (text appended to the description).
    """
    goods = sorted((e for e in events if e.plant is None), key=lambda e: int(e.gamma_id))

    def pick(cands: list[Event]) -> list[Event]:
        return cands[::4] if cands else []

    early = [e for e in goods if e.type == "binary" and len(e.days) >= 16 and _window_end(e) is not None
             and e.close.date() + timedelta(days=20) < _window_end(e)]  # type: ignore[operator]
    for e in pick(early):
        e.extra["end_shift_days"] = 18
    known = [e for e in goods if "end_shift_days" not in e.extra and len(e.days) >= 16]
    for e in pick(known[1:]):
        e.extra["known_from"] = len(e.days) - 4
    multi = [e for e in goods if e.type == "multi" and not e.augmented and len(e.legs) >= 3]
    for e in pick(multi):
        e.extra["other_leg"] = max(j for j in range(len(e.legs)) if j != e.winner)
    for n, e in enumerate(pick(goods[2:])):
        rng = g.sub_rng(seed, "undated", e.gamma_id)
        e.extra["undated_clarification"] = "\n\n" + _UNDATED[(n + rng.randrange(3)) % 3]


def _ts(raw: str) -> datetime:
    text = raw.replace("Z", "+00:00")
    if text.endswith("+00"):
        text += ":00"
    return datetime.fromisoformat(text).astimezone(UTC)


def schedule_truth(gamma: dict, hists: list[list[dict]], trade_rows: dict[str, list[dict]]) -> dict:
    """What the schedule of this Gamma event must be (docs/design.md §4), computed from its JSON alone.

    t_all: the last leg's start (first trade in a negRiskAugmented bundle); end_day: max endDate;
    close_day: max closedTime; d_known: the earliest day from which an option's own prices stay
    >= 0.97 up to its close; grid [max(start, t_all), end - 2] in T_Q array_split bins; offered:
    the bins wholly before min(d_known, close - 1). `expect`: offered | late_legs |
    no_forecast_dates | outcome_known_early (meaningful for events that pass the market filters).
    """
    markets = gamma["markets"]
    binary = len(markets) == 1
    starts, closes, ends = [], [], []
    for m in markets:
        start = _ts(m["startDate"])
        if gamma.get("negRiskAugmented") and not binary:
            rows = trade_rows.get(m["conditionId"], [])
            if rows:
                start = datetime.fromtimestamp(min(r["timestamp"] for r in rows), UTC)
        starts.append(start)
        closes.append(_ts(m["closedTime"]))
        ends.append(_ts(m["endDate"]))
    start_day = min(_ts(m["startDate"]) for m in markets).date()
    t_all = max(s.date() for s in starts)
    end_day, close_day = max(ends).date(), max(closes).date()
    series = []  # each option's own YES observations up to its leg's close
    for j, hist in enumerate(hists):
        c = closes[0 if binary else j].timestamp()
        obs = [(h["t"], h["p"]) for h in hist if h["t"] <= c]
        series.append(obs)
        if binary:
            series.append([(t, 1 - p) for t, p in obs])
            break
    firsts = []
    for obs in series:
        t_k = None
        for t, p in reversed(obs):
            if p < 0.97:
                break
            t_k = t
        if t_k is not None:
            firsts.append(t_k)
    d_known = datetime.fromtimestamp(min(firsts), UTC).date() if firsts else None
    first = max(start_day, t_all)
    n = (end_day - timedelta(days=2) - first).days + 1
    cut = close_day - timedelta(days=1) if d_known is None else min(d_known, close_day - timedelta(days=1))
    out = {"t_all": t_all.isoformat(), "end_day": end_day.isoformat(), "close_day": close_day.isoformat(),
           "d_known": d_known.isoformat() if d_known else None, "cut": cut.isoformat(),
           "steps_total": 0, "steps_offered": 0, "expect": "offered"}
    if n <= 0:
        late = (end_day - timedelta(days=2) - start_day).days + 1 > 0
        out["expect"] = "late_legs" if late else "no_forecast_dates"
        return out
    t_q = min(5, max(1, -(-n // 7)))
    size, extra = divmod(n, t_q)
    last, offered = first - timedelta(days=1), 0
    for b in range(t_q):
        last += timedelta(days=size + (1 if b < extra else 0))
        if last < cut and offered == b:
            offered += 1
    out.update(steps_total=t_q, steps_offered=offered)
    if offered == 0:
        out["expect"] = "outcome_known_early"
    return out
