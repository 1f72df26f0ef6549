"""Cross-question exposure plants (docs/design.md §4 "Cross-question exposure"): follow-up questions whose
texts give away other, still-open questions' answers, and neutral ones that must not count.

Added only by presets with `exposure_plants` set (`siblings`: the phrasings the build's cue list was
designed on; `siblings_heldout`: phrasings held out from it, to report the detector on), so the other
sample worlds are unchanged. Each plant is a new binary Yes/No event (a follow-up) built on a good
event (its base); `truth.json["exposures"]` lists them:

* `winner_followup` - the follow-up's title names the base bundle's WINNER with a settled cue
  ("After X's win in ..., will ...?"), visible from its first day, which lies inside the base's schedule;
* `settled_yesno`   - the follow-up's title states a Yes/No base's outcome ("After the parliament
  passed the Act, will ...?");
* `series_recount`  - the follow-up's description gains a dated paragraph recounting the base's outcome
  ("Update (2026-04-12): ... did not pass ..."), shown from that date on;
* `neutral`         - the follow-up names a base option without presupposing anything ("..., with X in
  attendance?", "If X wins ..., will ...?"): never exposure;
* `late`            - a winner follow-up that opens after the base's last scheduled date: exposure, but
  no date to cut.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta

from forecast_env.synth import grammar as g
from forecast_env.synth.presets import Preset
from forecast_env.synth.scenarios import SCENARIOS
from forecast_env.synth.world import (
    EVAL,
    TRAIN,
    Event,
    Leg,
    _rand_time,
    faithful_mask,
    hex_id,
    latent_path,
    token_id,
)

#: The phrasing banks: "design" is what envs/events/exposure.py's cue list was written against; "held_out" is not.
WINNER_TEMPLATES = {
    "design": ["After {w}'s win in {subj}, {q}", "{Q}, now that {w} has won {subj}?",
               "Will {q_rest} after {w} won {subj}?"],
    "held_out": ["With {w} confirmed as the winner of {subj}, {q}", "Following {w}'s victory in {subj}, {q}",
                 "{w} took {subj}: {q}"],
}
SETTLED_TEMPLATES = {
    "design": ["After {past}, {q}", "Now that {past}, {q}"],
    "held_out": ["In the wake of news that {past}, {q}", "{Past}. {Q}"],
}
RECOUNT_TEMPLATES = {
    "design": "Update ({d}): {Past} on {when}; this market is unaffected.",
    "held_out": "Update ({d}): Reports confirm {past}, ahead of this market's own deadline.",
}
NEUTRAL_TEMPLATES = ["{Q}, with {w} in attendance?", "If {w} wins {subj}, {q}", "Will {q_rest}, as {w} campaigns?"]

#: For each Yes/No scenario: the base's event stated as happened / as not happened.
PAST = {
    "bill": ("the {country} parliament passed the {bill}", "the {country} parliament did not pass the {bill}"),
    "merger": ("{company} completed its acquisition of {target}", "{company} did not complete its acquisition of {target}"),
    "launch": ("the {mission} probe launched", "the {mission} probe did not launch"),
    "trial": ("{company} reported positive results for {drug}", "{company} did not report positive results for {drug}"),
    "boxoffice": ("{film} topped the box office on its opening weekend",
                  "{film} did not top the box office on its opening weekend"),
}


@dataclass(frozen=True)
class PlantSpec:
    kind: str
    base: Event
    start_day: date
    n_days: int


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text else text


def _upper_first(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


def _window(split: str) -> tuple[date, date]:
    lo, hi = TRAIN if split == "train" else EVAL
    return lo + timedelta(days=2), hi - timedelta(days=3)


def _followup(seed: int, n: int, spec: PlantSpec) -> Event:
    """A good binary Yes/No event (Yes/No scenario) opening on `spec.start_day`: the follow-up's body."""
    erng = g.sub_rng(seed, "exposure-plant", n)
    import numpy as np

    nrng = np.random.default_rng(g.stable_int(seed, "exposure-plant-np", n))
    yesno = [s for s in SCENARIOS if s.kind == "yesno"]
    sc = yesno[n % len(yesno)]
    start = _rand_time(erng, spec.start_day, 1, 15)
    close_day = spec.start_day + timedelta(days=spec.n_days - 1)
    close = _rand_time(erng, close_day, 16, 22)
    facts = sc.make(erng, close, 2)
    facts.phrasing = spec.base.facts.phrasing
    winner = erng.randrange(2)
    probs = latent_path(nrng, spec.n_days, 2, winner, [0, 0])
    faithful = faithful_mask(nrng, spec.n_days, None, 0)
    from datetime import UTC, datetime

    gid = str(100_000 + n)
    leg = Leg(facts.options[0], facts.leg_questions[0], str(3_000_000 + n), "0x" + hex_id(64, seed, "xcond", n),
              (token_id(seed, "xq", n, 0), token_id(seed, "xq", n, 1)),
              start + timedelta(minutes=erng.randint(0, 50)), close,
              datetime(close_day.year, close_day.month, close_day.day, 23, 0, tzinfo=UTC))
    return Event(gid, sc, facts, "binary", winner, [leg], start, close, None, spec.base.split,
                 [spec.start_day + timedelta(days=i) for i in range(spec.n_days)], probs, faithful)


def _set_title(ev: Event, title: str) -> None:
    ev.facts.title = title
    ev.facts.leg_questions = [title]
    ev.legs[0].question = title


def _q_parts(ev: Event) -> dict[str, str]:
    q = ev.facts.title  # "Will ... by <when>?"
    rest = q[len("Will "):-1] if q.startswith("Will ") and q.endswith("?") else q.rstrip("?")
    return {"q": _lower_first(q), "Q": q.rstrip("?"), "q_rest": rest}


def _past(base: Event) -> tuple[str, str]:
    yes, no = PAST[base.scenario.name]
    slots = base.facts.slots
    return yes.format(**slots), no.format(**slots)


def plant_exposures(events: list[Event], preset: Preset, seed: int) -> list[dict]:
    """Append the follow-up events to `events`; return the truth rows (`truth.json["exposures"]`)."""
    bank = preset.exposure_plants
    rng = random.Random(g.stable_int(seed, "exposure-plants", preset.name))
    goods = sorted((e for e in events if e.plant is None and e.split in ("train", "eval")), key=lambda e: int(e.gamma_id))
    named = [e for e in goods if e.type == "multi" or e.facts.kind == "named"]
    yesno = [e for e in goods if e.facts.kind == "yesno" and e.scenario.name in PAST]
    truth: list[dict] = []
    n = 0

    def room(base: Event, start: date, n_days: int) -> bool:
        lo, hi = _window(base.split)
        return lo <= start and start + timedelta(days=n_days - 1) <= hi

    def add(kind: str, base: Event, start: date, n_days: int, text: dict) -> Event | None:
        nonlocal n
        if not room(base, start, n_days):
            return None
        f = _followup(seed, n, PlantSpec(kind, base, start, n_days))
        n += 1
        events.append(f)
        row = {"kind": kind, "bank": bank, "exposed": base.event_id, "by": f.event_id, **text}
        truth.append(row)
        return f

    for i, base in enumerate(named):
        w = base.label
        subj = base.facts.slots["subj"]
        mid = base.days[0] + timedelta(days=len(base.days) // 2)
        kind = ("winner_followup", "neutral", "late")[i % 3]
        if kind == "late":
            start = base.days[-1] + timedelta(days=1)  # after the base's last eligible day (t_end - 2 < close)
        else:
            start = mid
        f = add(kind, base, start, rng.randint(14, 20), {})
        if f is None:
            continue
        parts = _q_parts(f)
        if kind == "neutral":
            name = base.options[(base.winner + 1) % len(base.options)] if i % 2 else w
            tpl = NEUTRAL_TEMPLATES[(i // 3) % len(NEUTRAL_TEMPLATES)]
            _set_title(f, tpl.format(w=name, subj=subj, **parts))
            truth[-1].update(expect="none", named=name, template=tpl, title=f.facts.title)
        else:
            tpls = WINNER_TEMPLATES[bank]
            tpl = tpls[(i // 3) % len(tpls)]
            _set_title(f, tpl.format(w=w, subj=subj, **parts))
            truth[-1].update(expect="cut" if kind == "winner_followup" else "no_cut", named=w, template=tpl,
                             title=f.facts.title, **{"from": start.isoformat()})
    for i, base in enumerate(yesno):
        mid = base.days[0] + timedelta(days=len(base.days) // 2)
        yes, no = _past(base)
        past = yes if base.label == "Yes" else no
        if i % 2 == 0:
            f = add("settled_yesno", base, mid, rng.randint(14, 20), {})
            if f is None:
                continue
            tpls = SETTLED_TEMPLATES[bank]
            tpl = tpls[(i // 2) % len(tpls)]
            _set_title(f, tpl.format(past=past, Past=_upper_first(past), **_q_parts(f)))
            truth[-1].update(expect="cut", template=tpl, title=f.facts.title, **{"from": mid.isoformat()})
        else:
            start = base.days[0] + timedelta(days=2)
            n_days = rng.randint(16, 22)
            f = add("series_recount", base, start, n_days, {})
            if f is None:
                continue
            d = min(mid, start + timedelta(days=n_days - 4))  # inside the follow-up's listing window
            para = RECOUNT_TEMPLATES[bank].format(d=d.isoformat(), past=past, Past=_upper_first(past),
                                                  when=d.strftime("%B %-d"))
            f.facts.description = f.facts.description + "\n\n" + para
            truth[-1].update(expect="cut", template=RECOUNT_TEMPLATES[bank], paragraph=para,
                             **{"from": d.isoformat()})
    return truth
