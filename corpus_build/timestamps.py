"""Stage 6 of the corpus builder: timestamps and the visibility time (docs/design.md §2.timestamps).

`assign_timestamps` walks the fixed-priority cascades of `extract.Extracted` (publication `t_p`,
modification `t_m`) and keeps the first value that `forecast_env.timeparse` reads with a year inside
[min_year, max_year]; the assigned time is t = t_p, else t_m, else the crawl time t_c. Then it
computes the visibility time v, whose UTC day is the article's `day` in every later stage, under
one of three rules (`timestamps.visibility`):

* ``conservative`` (default): values without an offset are read as the latest instant they can
  denote (naive: +12 h; date-only: the next UTC day); a t_m that cannot have happened by t_c + 1 day
  in any zone (its earliest reading is later) is bogus and its cascade continues; v = max of the
  available {t_p, t_m} (else t_c), never later than t_c itself (the page existed, as stored, when
  it was crawled).
* ``crawl``: the same readings, v = max(t_p, t_m, t_c) (live pages change without a new t_m).
* ``publication``: the paper's rule, v = t with naive values read as UTC.

`Timestamps.moves` says which rules moved the UTC day away from the paper's rule and by how many
days (the corpus funnel sums them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from forecast_env.corpus_build.extract import Extracted, url_date
from forecast_env.errors import ConfigError
from forecast_env.timeparse import ParsedTime, parse_time, to_utc

__all__ = ["MOVE_RULES", "VISIBILITY_RULES", "Timestamps", "assign_timestamps", "check_visibility"]

#: `timestamps.visibility` values (docs/design.md §2.timestamps).
VISIBILITY_RULES = ("conservative", "crawl", "publication")
#: The rules that can move an article's day away from the paper's, in the order they apply.
MOVE_RULES = ("bogus_modified", "naive_time", "date_only", "modified", "crawl", "crawl_cap")
#: A t_m later than the crawl by more than this cannot be a modification of the crawled page.
BOGUS_MODIFIED_SLACK = timedelta(days=1)


@dataclass(frozen=True)
class Timestamps:
    """An article's timestamps, which rule gave each, its visibility time and day."""

    t_pub: datetime | None  # as read under the visibility rule (aware UTC)
    t_pub_rule: str | None
    t_mod: datetime | None
    t_mod_rule: str | None
    t_crawl: datetime
    t: datetime  # assigned: t_pub, else t_mod, else t_crawl
    t_source: str  # "pub" | "mod" | "crawl"
    t_rule: str  # rule that gave t ("crawl" for the crawl fallback)
    visible_at: datetime  # v(d)
    visible_source: str  # "pub" | "mod" | "crawl": which timestamp gave v
    day: date  # UTC day of v
    moves: tuple[tuple[str, int], ...] = ()  # (rule, days) for every rule that changed the day


def check_visibility(rule: str) -> str:
    """`rule` if it is a known `timestamps.visibility` value, else a ConfigError naming the choices."""
    if rule not in VISIBILITY_RULES:
        raise ConfigError(f"timestamps.visibility = {rule!r} is not known; choose one of "
                          f"{', '.join(VISIBILITY_RULES)} (configs/corpus.yaml)")
    return rule


def _cascade(candidates: Sequence[tuple[str, str]], min_year: int, max_year: int,
             latest_allowed: datetime | None = None) -> tuple[ParsedTime | None, str | None]:
    """The first candidate that reads with a year in range (and, given `latest_allowed`, that can
    denote an instant no later than it)."""
    for rule, raw in candidates:
        parsed = parse_time(raw)
        if parsed is None or not min_year <= parsed.instant.year <= max_year:
            continue
        if latest_allowed is not None and parsed.as_earliest() > latest_allowed:
            continue
        return parsed, rule
    return None, None


def _day(dt: datetime) -> date:
    return dt.date()  # every instant here is aware UTC


def assign_timestamps(
    ext: Extracted,
    url: str,
    http_last_modified: str | None,
    crawl_time: datetime,
    min_year: int = 2010,
    max_year: int = 2030,
    visibility: str = "conservative",
) -> Timestamps:
    """Run the publication and modification cascades and compute the visibility time."""
    check_visibility(visibility)
    pub_candidates = list(ext.pub_candidates)
    if not any(rule == "url_date" for rule, _ in pub_candidates):
        u = url_date(url)
        if u:
            pub_candidates.append(("url_date", u))
    mod_candidates = list(ext.mod_candidates)
    if http_last_modified:
        mod_candidates.append(("http_last_modified", http_last_modified))
    t_crawl = to_utc(crawl_time)

    pub, pub_rule = _cascade(pub_candidates, min_year, max_year)
    # the paper's reading: naive = UTC, every t_m accepted
    mod_paper, mod_rule_paper = _cascade(mod_candidates, min_year, max_year)
    t_paper = pub.as_api() if pub else mod_paper.as_api() if mod_paper else t_crawl
    if visibility == "publication":
        source = "pub" if pub else "mod" if mod_paper else "crawl"
        rule = (pub_rule if pub else mod_rule_paper if mod_paper else None) or "crawl"  # a read time has its rule
        return Timestamps(
            t_pub=pub.as_api() if pub else None, t_pub_rule=pub_rule,
            t_mod=mod_paper.as_api() if mod_paper else None, t_mod_rule=mod_rule_paper,
            t_crawl=t_crawl, t=t_paper, t_source=source, t_rule=rule,
            visible_at=t_paper, visible_source=source, day=_day(t_paper),
        )

    mod, mod_rule = _cascade(mod_candidates, min_year, max_year, latest_allowed=t_crawl + BOGUS_MODIFIED_SLACK)
    moves: list[tuple[str, int]] = []
    current = _day(t_paper)

    def step(rule: str, instant: datetime) -> None:
        nonlocal current
        d = _day(instant)
        if d != current:
            moves.append((rule, (d - current).days))
            current = d

    # 1. the bogus t_m is gone: the cascade continued (only changes t when there is no t_p)
    base = pub if pub else mod
    step("bogus_modified", base.as_api() if base else t_crawl)
    # 2. values without an offset read as their latest instant
    t_pub = pub.as_article() if pub else None
    t_mod = mod.as_article() if mod else None
    t = t_pub if t_pub is not None else t_mod if t_mod is not None else t_crawl
    if base is not None:
        step("date_only" if base.date_only else "naive_time", t)
    source = "pub" if pub else "mod" if mod else "crawl"
    rule = (pub_rule if pub else mod_rule if mod else None) or "crawl"  # a read time has its rule
    # 3. a page modified after publication is visible as modified
    v, v_source = t, source
    if t_pub is not None and t_mod is not None and t_mod > t_pub:
        v, v_source = t_mod, "mod"
        step("modified", v)
    # 4. the crawl bounds v: from above (conservative), from below (crawl)
    if visibility == "crawl" and t_crawl > v:
        v, v_source = t_crawl, "crawl"
        step("crawl", v)
    elif visibility == "conservative" and v > t_crawl:
        v, v_source = t_crawl, "crawl"
        step("crawl_cap", v)
    return Timestamps(
        t_pub=t_pub, t_pub_rule=pub_rule, t_mod=t_mod, t_mod_rule=mod_rule, t_crawl=t_crawl,
        t=t, t_source=source, t_rule=rule, visible_at=v, visible_source=v_source, day=_day(v),
        moves=tuple(moves),
    )
