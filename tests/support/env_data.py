"""A small hand-made workspace for the environment tests: articles, index, events, schedule, beliefs.

Built with the real stages' public writers (atomic_write_table, build_index), so the environment
runs over a real index; only the content is hand-written. Shared by test_env, test_tools and
test_play (and the environment benchmark's fallback world).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from forecast_env import schema
from forecast_env.store import Workspace, atomic_write_table

#: Market prices chosen so that their digits are easy to search for in observations.
PRICE_DIGITS = "0.4137"
FUTURE_WORD = "zanzibarresult"  # appears only in articles dated after every forecast date

TOPICS = [
    ("Senate budget vote", "The senate will vote on the budget bill; senators debate spending and taxes."),
    ("Freedonia election", "Alice Smith, Bob Jones and Carol White campaign in the Freedonia election."),
    ("Harbor weather", "Storms and rain over the harbor; the weather service issues a warning."),
    ("Chip factory", "A chip factory expands production; analysts expect more semiconductor exports."),
]


def _article(i: int, day: date, title: str, text: str, leak: bool = False) -> dict:
    t = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    body = " ".join([text] * 6) + f" Report number {i} from {day.isoformat()}."
    return {
        "doc_id": f"doc{i:04d}", "url": f"https://news.example/{day.isoformat()}/{i}", "canonical_url": None,
        "title": f"{title} update {i}", "summary": text, "body": body, "t_pub": t, "t_mod": None,
        "t_crawl": t, "t": t, "t_source": "pub", "t_rule": "jsonld_datePublished", "t_pub_rule": "jsonld_datePublished",
        "t_mod_rule": None, "day": day, "lang_score": 0.99, "leak_flag": leak,
        "leak_reason": "updated_stamp" if leak else None, "warc_file": "hand.warc.gz", "warc_offset": i,
    }


def write_articles(ws: Workspace) -> list[dict]:
    rows = []
    i = 0
    for d in range(1, 21):  # 2026-03-01 .. 2026-03-20
        day = date(2026, 3, d)
        for title, text in TOPICS[: 2 + d % 3]:
            rows.append(_article(i, day, title, text))
            i += 1
    rows.append(_article(i, date(2026, 3, 4), "Senate budget vote", "Leaked: the senate passed the budget.", leak=True))
    i += 1
    for d in (25, 28):  # after every forecast date: must never reach an agent
        rows.append(_article(i, date(2026, 3, d), "Senate budget vote",
                             f"The senate passed the budget bill {FUTURE_WORD}; Carol White won the election."))
        i += 1
    rows.sort(key=lambda r: (r["day"], r["doc_id"]))
    atomic_write_table(ws.articles_dir / "2026-03.parquet", pa.Table.from_pylist(rows), schema.ARTICLES)
    return rows


def _ts(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


#: Scheduled ends, first eligible days and cuts of the hand-made events (world mode reads them).
END_DAYS = {"pm-1": date(2026, 3, 20), "pm-2": date(2026, 3, 18), "pm-3": date(2026, 3, 14), "pm-4": date(2026, 3, 14)}
T_ALL = {"pm-2": date(2026, 3, 4)}  # its last leg started on March 4: listed from then
CUTS = {"pm-4": date(2026, 3, 10)}  # outcome known on the 10th: listed to the 12th, unscored from the 10th


def write_events(ws: Workspace) -> None:
    events = [
        ("pm-1", "Will the senate pass the budget bill by March 20?", ["Yes", "No"], "binary", "Yes", "eval",
         [(date(2026, 3, 5), None), (date(2026, 3, 10), None), (date(2026, 3, 15), None)]),
        ("pm-2", "Who will win the Freedonia election?", ["Alice Smith", "Bob Jones", "Carol White"], "multi",
         "Carol White", "eval",
         # a schedule listing options in another order (or fewer of them) does not change what is offered
         [(date(2026, 3, 6), ["Carol White", "Alice Smith"]), (date(2026, 3, 11), None), (date(2026, 3, 16), None)]),
        ("pm-3", "Will the harbor close for storms?", ["Yes", "No"], "binary", "No", "train",
         [(date(2026, 3, 7), None), (date(2026, 3, 12), None)]),
        ("pm-4", "Will the chip factory double exports?", ["Yes", "No"], "binary", "No", "eval",
         [(date(2026, 3, 9), None)]),
    ]
    ev_rows, sched_rows, belief_rows = [], [], []
    for eid, q, opts, typ, label, split, dates in events:
        desc = f"This market resolves according to official sources. {q}"
        if eid == "pm-1":
            desc += "\n\nUpdate 2026-03-18: the vote was moved to March 19."
        ev_rows.append({
            "event_id": eid, "source": "polymarket", "slug": eid, "question": q, "description": desc,
            "options": opts, "type": typ, "category": "politics", "tags": [], "t_start": _ts(date(2026, 3, 1)),
            "t_close": _ts(date(2026, 3, 20)), "start_day": date(2026, 3, 1), "close_day": date(2026, 3, 20),
            # world mode lists a question from max(start_day, t_all) to end_day - 2 and scores it before the cut
            "t_end": _ts(END_DAYS[eid]), "end_day": END_DAYS[eid], "t_all": T_ALL.get(eid, date(2026, 3, 1)),
            "cut": CUTS.get(eid), "steps_total": len(dates), "steps_offered": len(dates),
            "label": label, "split": split, "volume": 1000.0,
        })
        for step, (d, offered) in enumerate(dates, start=1):
            sched_rows.append({"event_id": eid, "step": step, "steps_total": len(dates), "forecast_date": d,
                               "options": offered or opts, "score": 0.5})
        for day_i in range(1, 21):
            day = date(2026, 3, day_i)
            for k, opt in enumerate(opts):
                if eid == "pm-2" and opt == "Bob Jones" and day_i < 8:
                    price = None
                else:
                    price = round(0.4137 if (k == 0 and day_i % 2) else 0.2 + 0.01 * day_i + 0.1 * k, 4)
                    if typ == "binary" and k == 1:
                        price = round(1 - belief_rows[-1]["price"], 4)
                close = None if price is None else round(min(0.99, price + 0.1), 4)  # the day's last price
                belief_rows.append({"event_id": eid, "day": day, "option": opt, "price": price,
                                    "price_close": close, "belief": price, "complete": True, "n_obs": 3})
    atomic_write_table(ws.events_table("events"), pa.Table.from_pylist(ev_rows), schema.EVENTS)
    atomic_write_table(ws.events_table("schedule"), pa.Table.from_pylist(sched_rows), schema.SCHEDULE)
    atomic_write_table(ws.events_table("beliefs"), pa.Table.from_pylist(belief_rows), schema.BELIEFS)
    for name, sch in (("legs", schema.LEGS), ("trades_daily", schema.TRADES_DAILY), ("screen", schema.SCREEN),
                      ("excluded", schema.EXCLUDED)):
        atomic_write_table(ws.events_table(name), schema.empty_table(sch))


def build_workspace(root: str | Path, index: bool = True) -> Path:
    """Write the hand-made workspace at `root` (and index it with the default embedding model)."""
    ws = Workspace.at(root, create=True)
    write_articles(ws)
    write_events(ws)
    if index:
        from forecast_env.corpus_build.index import build_index

        build_index(ws.root, progress=False)
    return ws.root


def days_between(a: date, b: date) -> list[date]:
    return [a + timedelta(days=i) for i in range((b - a).days + 1)]
