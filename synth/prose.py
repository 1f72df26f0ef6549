"""English news prose from the scenario pools: event news, previews, outcome reports and unrelated (distractor) news.

Sentences are drawn without replacement inside one article, so an article never repeats a line or
a long phrase (the Gopher repetition and FineWeb duplicate-line filters drop such pages).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np

from forecast_env.synth import grammar as g
from forecast_env.synth.phrasing import BANK_B, CueDeck
from forecast_env.synth.scenarios import ANALYSIS, HEDGES, QUOTES, Facts, Scenario


@dataclass
class Text:
    title: str
    summary: str
    paragraphs: list[str]

    @property
    def body(self) -> str:
        return "\n".join(self.paragraphs)


LEADS = [
    "{Attention|Focus} {turned|shifted} {again|once more} to ${subj} {this week|on ${weekday}}, {as|while} {new details|fresh developments} {emerged|came to light}.",
    "{With|As} {the decision|the deadline} {approaching|drawing nearer}, ${subj} {dominated|led} {conversation|discussion} in ${city} {on ${weekday}|this week}.",
    "{The latest|New} {developments|twists} in ${subj} {have|has} {kept|left} {observers|followers} {guessing|on edge} {about what comes next|about the outcome}.",
    "{Weeks of|Months of} {speculation|uncertainty} over ${subj} {showed no sign of ending|continued} {on ${weekday}|this week}.",
]

PREVIEW_LEADS = [
    "{Here is|This is} {what to know|a guide to what matters} {ahead of|before} ${subj}, {which is|now} {scheduled|set} for ${when}.",
    "{All eyes|Attention} {will be|is} on ${city} {as|while} {preparations|the countdown} for ${subj} {continue|enter the final stretch} before ${when}.",
    "{Organizers|Officials} {confirmed|set out} {the timetable|the schedule} for ${subj} {on ${weekday}|this week}, {with|and} {the key date|the decisive day} {fixed|set} for ${when}.",
]

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _fill(rng: random.Random, tpl: str, slots: dict[str, str], opt: str = "", rival: str = "") -> str:
    s = dict(slots)
    s["opt"] = opt
    s["rival"] = rival
    s["pct"] = str(rng.randint(31, 58))
    s["pct2"] = str(rng.randint(18, 40))
    s["n"] = str(rng.randint(3, 14))
    s["weekday"] = rng.choice(WEEKDAYS)
    return g.expand(tpl, rng, s)


def _take(rng: random.Random, pool: list[str], n: int) -> list[str]:
    return rng.sample(pool, min(n, len(pool)))


def event_article(
    rng: random.Random,
    sc: Scenario,
    facts: Facts,
    probs: np.ndarray,
    frac: float,
    preview: bool = False,
) -> Text:
    """A news article about an event whose evidence favours options drawn from `probs` (sharper late)."""
    slots = facts.slots
    opts = facts.options
    alpha = 1.0 + 2.5 * frac
    q = np.asarray(probs, dtype=float) ** alpha
    q = q / q.sum()

    def draw_opt() -> tuple[int, str, str]:
        k = rng.choices(range(len(opts)), weights=q.tolist())[0]
        others = [o for i, o in enumerate(opts) if i != k]
        return k, opts[k], rng.choice(others)

    sentences: list[str] = []
    n_evid = 2 + round(3 * frac) + rng.randint(0, 1)
    if preview:
        n_evid = max(1, n_evid - 2)
    if facts.phrasing == "b":  # the held-out phrasing bank (phrasing.py): its cues, not the scenario's pools
        deck = CueDeck(rng, BANK_B, yes_no=sc.kind == "yesno")
        for _ in range(n_evid):
            k, o, r = draw_opt()
            up = k == 0 if sc.kind == "yesno" else rng.random() < 0.6  # named: 3 in 5 favour o, 2 in 5 disfavour r
            sentences.append(_fill(rng, deck.draw(up), slots, o if up else r, o))
    elif sc.kind == "yesno":
        yes_pool = list(sc.yes)
        no_pool = list(sc.no)
        rng.shuffle(yes_pool)
        rng.shuffle(no_pool)
        for _ in range(n_evid):
            k, _, _ = draw_opt()
            pool = yes_pool if k == 0 else no_pool
            if pool:
                sentences.append(_fill(rng, pool.pop(), slots))
    else:
        pro_pool = list(sc.pro)
        rng.shuffle(pro_pool)
        for _ in range(n_evid):
            if not pro_pool:
                break
            _, o, r = draw_opt()
            sentences.append(_fill(rng, pro_pool.pop(), slots, o, r))
    n_an = rng.randint(5, 8)
    sentences += [_fill(rng, t, slots, *draw_opt()[1:]) for t in _take(rng, ANALYSIS, n_an)]
    sentences += [_fill(rng, t, slots) for t in _take(rng, QUOTES, rng.randint(1, 3))]
    if frac < 0.6 or rng.random() < 0.3:
        sentences += [_fill(rng, t, slots) for t in _take(rng, HEDGES, 1)]
    n_sched = rng.randint(2, 3) if preview else rng.randint(0, 1)
    sched = [_fill(rng, t, slots) for t in _take(rng, sc.schedule, n_sched)]
    rng.shuffle(sentences)
    background = [_fill(rng, t, slots) for t in _take(rng, sc.background, rng.randint(2, 4))]

    lead_pool = PREVIEW_LEADS if preview else LEADS
    lead = _fill(rng, rng.choice(lead_pool), slots)
    ordered = [lead] + background[:1] + (sched if preview else []) + sentences + background[1:]
    if not preview:
        ordered += sched
    ordered = _dedupe(ordered)
    paragraphs = _paragraphs(rng, ordered)

    _, o, r = draw_opt()
    if preview:
        title = _fill(rng, rng.choice([
            "{Preview|Explainer}: what to {expect|watch for} {from|in} ${subj_short} on ${when}",
            "{Countdown|Road} to ${when}: {key questions|what matters} {in|for} ${subj_short}",
            "{Everything|What} you need to know {before|ahead of} ${subj_short} on ${when}",
        ]), {**slots, "subj_short": slots["subj_short"]})
    else:
        headlines = BANK_B.headlines if facts.phrasing == "b" else sc.headlines
        title = _fill(rng, rng.choice(headlines), slots, o, r)
    summary = paragraphs[0].split(". ")[0].rstrip(".") + "."
    return Text(title, summary, paragraphs)


# ---------------------------------------------------------------------------------------------
# Outcome reports: news written after an event closed, stating its realised outcome
# ---------------------------------------------------------------------------------------------

# Per scenario: "head" (titles), "lead" (the outcome, stated plainly) and "restate" (the outcome again, in
# other words), under "yes" / "no" for Yes/No scenarios and "win" for named and multi ones (`${opt}` the
# winning option, `${rival}` another). Every "no" lead says the thing did not happen ("did not", "failed",
# "fell short", "fell through", "rejected", "voted down", "missed", "not"); no "yes" lead or restatement uses those words.
OUTCOMES: dict[str, dict[str, dict[str, list[str]]]] = {
    "election": {"win": {
        "head": ["${opt} wins ${country} presidential election",
                 "${country} election: ${opt} declared winner",
                 "{Official results|Final count} {confirm|show} ${opt} as ${country} president"],
        "lead": ["${opt} won the ${country} presidential election held on ${when}, {official results showed|the electoral commission announced}.",
                 "The electoral commission of ${country} declared ${opt} the winner of the presidential election {on ${weekday}|once the count was completed}.",
                 "Official results confirmed ${opt} as the winner of the ${country} presidential election, {ahead of|finishing ahead of} ${rival}.",
                 "${opt} was elected president of ${country} {in the vote on ${when}|after a long campaign}, {defeating|beating} ${rival} and the rest of the field."],
        "restate": ["{The result|The outcome} {makes|means} ${opt} the next president of ${country}.",
                    "${opt} {claimed|declared} victory {in a speech|before supporters} in ${city} {once the count was complete|as the final results came in}.",
                    "{The final count|The official tally} put ${opt} ahead of ${rival}, {election officials said|the commission said}."],
    }},
    "bill": {
        "yes": {
            "head": ["${country} parliament passes ${bill}", "${bill} {clears|passes} final vote in ${country}",
                     "Lawmakers approve ${bill} in ${country}"],
            "lead": ["The ${country} parliament passed the ${bill} in a final vote on ${when}.",
                     "Lawmakers in ${country} {approved|voted to approve} the ${bill} {on ${when}|in a final vote}, {clearing its last hurdle in parliament|ending months of debate}.",
                     "The ${bill} {passed|cleared} the ${country} parliament {on ${when}|in its final vote}, {officials confirmed|the speaker's office said}."],
            "restate": ["With {the vote|its passage}, the ${bill} {becomes law|heads for the president's signature} in ${country}.",
                        "{Supporters|Government ministers} {welcomed|hailed} the passage of the ${bill} as {an overdue reform|a major step} for ${country}.",
                        "The ${bill} is now law {after|following} {its approval by parliament|the successful final vote}."],
        },
        "no": {
            "head": ["${bill} fails in ${country} parliament", "${country} parliament {does not pass|fails to pass} ${bill}",
                     "${bill} falls short in ${country}"],
            "lead": ["The ${country} parliament did not pass the ${bill} by the ${when} deadline.",
                     "The ${bill} failed to pass the ${country} parliament, falling short in the final vote on ${when}.",
                     "Lawmakers in ${country} {rejected|voted down} the ${bill} {in a final vote on ${when}|on ${when}}."],
            "restate": ["The result means the ${bill} will not become law {this session|for now}.",
                        "{Supporters|Government ministers} said they were disappointed that the ${bill} {did not pass|failed to win a majority}.",
                        "{The defeat|The failed vote} sends the ${bill} back to {the drafting stage|committee}, and it is not law in ${country}."],
        },
    },
    "match": {"win": {
        "head": ["${opt} beat ${rival} to win ${league} final", "${league} final: ${opt} {win|triumph} in ${city}",
                 "${opt} {lift|claim} ${league} trophy"],
        "lead": ["The ${opt} won the ${league} final {on ${when}|in ${city}}, {beating|defeating} the ${rival}.",
                 "The ${opt} {beat|defeated} the ${rival} {on ${when}|in front of a sold-out crowd} to win the ${league} final.",
                 "{Official results|The league} confirmed the ${opt} as the winner of the ${league} final against the ${rival}."],
        "restate": ["{The victory|The win} {gives|hands} the ${opt} the ${league} {trophy|crown} for this season.",
                    "{Fans|Supporters} of the ${opt} {celebrated|filled the streets} in ${city} {late into the night|after the final whistle}.",
                    "For the ${rival}, {the defeat|the loss} {ends|closes} {a strong season|their campaign} at the final hurdle."],
    }},
    "champion": {"win": {
        "head": ["${opt} {crowned|confirmed as} ${league} champions", "${opt} {clinch|seal} ${league} title"],
        "lead": ["The ${opt} won the ${league} title, finishing ahead of the ${rival}.",
                 "The ${opt} {clinched|secured|sealed} the ${league} title {on ${when}|on the last matchday}.",
                 "{The league|Official standings} confirmed the ${opt} as {champions|the winners} of the ${league} {this season|after the final round}."],
        "restate": ["{It is|This is} the {first|second} title for the ${opt} in ${n} years.",
                    "{The ${rival}|Their closest rivals, the ${rival},} {finished|ended the season} {second|in second place} {behind the ${opt}|in the ${league}}.",
                    "{Fans|Supporters} of the ${opt} {celebrated|gathered} in ${city} {after the final round|as the title was confirmed}."],
    }},
    "merger": {
        "yes": {
            "head": ["${company} completes {acquisition|takeover} of ${target}", "${company}-${target} deal {closes|is done}"],
            "lead": ["${company} completed its acquisition of ${target} {on ${when}|this week}, {the companies said|according to a joint statement}.",
                     "${company} {closed|finalized} its {takeover|purchase} of ${target}, {completing the deal by the ${when} target date|the company confirmed}.",
                     "{The takeover|The acquisition} of ${target} by ${company} {was completed|closed} {on ${when}|after regulators cleared it}."],
            "restate": ["{With the deal closed|Now that the deal is complete}, ${target} {becomes|is} {part of|a unit of} ${company}.",
                        "${target} shares {were|have been} {delisted|removed from trading} {following|after} the completion of the ${company} {deal|takeover}."],
        },
        "no": {
            "head": ["${company} {deal for|takeover of} ${target} {fails to close|falls through}",
                     "${company} misses deadline on ${target} {deal|takeover}"],
            "lead": ["${company} did not complete its acquisition of ${target} by the ${when} deadline.",
                     "The {proposed|planned} takeover of ${target} by ${company} {failed to close|was not completed} by ${when}, {the companies said|according to a statement}.",
                     "{The deal|The acquisition} between ${company} and ${target} {fell through|was not completed} {before|ahead of} the ${when} target date."],
            "restate": ["${target} {remains|stays} independent {for now|for the time being}, {since|as} the deal did not close.",
                        "{Shares of|Stock in} ${target} {fell|dropped} {after|when} it became clear the ${company} deal {would not close|had not been completed} in time."],
        },
    },
    "ceo": {"win": {
        "head": ["${company} names ${opt} chief executive", "${opt} to lead ${company} as CEO",
                 "${company} board picks ${opt} as CEO"],
        "lead": ["${company} named ${opt} as its new chief executive {on ${weekday}|this week}, ending a months-long search.",
                 "${opt} was {named|appointed} chief executive of ${company}, {the board announced|the company said in a statement}.",
                 "{The board of ${company}|The ${company} board} {chose|appointed} ${opt} to lead the company, {ahead of|passing over} ${rival}."],
        "restate": ["${opt} {will take over|takes over} as chief executive {at the start of next month|in the coming weeks}, {the company said|according to the announcement}.",
                    "{The appointment|The decision} {ends|concludes} ${subj}.",
                    "{Investors|Analysts} {reacted calmly|welcomed the clarity} after ${company} {confirmed ${opt} as its next leader|announced ${opt} would be its new chief executive}."],
    }},
    "launch": {
        "yes": {
            "head": ["${mission} probe {lifts off|launches}", "${mission} {launch|liftoff} {succeeds|goes ahead}"],
            "lead": ["The ${mission} probe lifted off {on ${when}|from the coastal spaceport|as planned}, {the mission operator confirmed|mission managers said}.",
                     "The ${mission} {probe|spacecraft} launched {successfully|on schedule} {on ${when}|from the launch site near ${city}}.",
                     "{Mission managers|The mission operator} confirmed that the ${mission} probe {had launched|lifted off} {before the window closed|by ${when}}."],
            "restate": ["{The launch|Liftoff} {puts|places} the ${mission} {mission|probe} on course {for its science phase|to begin its journey}.",
                        "{Engineers|The mission team} said {all systems were|the spacecraft was} working normally after {launch|liftoff}."],
        },
        "no": {
            "head": ["${mission} probe {fails to launch|stays grounded} by deadline", "${mission} launch {scrubbed|called off}"],
            "lead": ["The ${mission} probe did not launch by ${when}, {the mission operator confirmed|mission managers said}.",
                     "{The launch of the ${mission} probe|The ${mission} launch} was {called off|scrubbed}, and the probe failed to lift off {by ${when}|before the window closed}.",
                     "The ${mission} {probe|spacecraft} failed to lift off {before the window closed|by ${when}} and {remains|stayed} on the ground."],
            "restate": ["{Mission managers|Officials} said a new launch date {had not yet been set|was not yet known}.",
                        "The ${mission} {probe|spacecraft} {remains|stays} on the ground {after|following} the missed launch window."],
        },
    },
    "trial": {
        "yes": {
            "head": ["${drug} trial {meets|hits} {primary endpoint|main goal}, ${company} says",
                     "${company} reports positive ${drug} results"],
            "lead": ["${company} reported {on ${weekday}|this week} that the late-stage trial of ${drug} met its primary endpoint.",
                     "The phase three trial of ${drug} met its {primary endpoint|main goal}, ${company} {said|announced}.",
                     "${company} announced positive results for ${drug}, saying the late-stage study met its {primary endpoint|main goal}."],
            "restate": ["{The positive result|The successful readout} {clears|opens} the way for ${company} to {seek|file for} approval of ${drug}.",
                        "{Doctors|Investigators} {involved in the study|who ran the trial} {called|described} the ${drug} results {encouraging|a clear success}."],
        },
        "no": {
            "head": ["${drug} trial {misses|fails to meet} {primary endpoint|main goal}",
                     "${company} says ${drug} study {fell short|failed}"],
            "lead": ["The late-stage trial of ${drug} failed to meet its primary endpoint, ${company} {said|announced}.",
                     "${company} did not report positive results for ${drug} by ${when}, saying the phase three study missed its main goal.",
                     "${company} said the phase three trial of ${drug} {did not meet|failed to meet|fell short of} its {primary endpoint|main goal}."],
            "restate": ["{The failed trial|The missed endpoint} is a blow to ${company}, which had {hoped|planned} to {seek|file for} approval of ${drug}.",
                        "${company} said it would {review|study} the ${drug} data but did not {give|offer} a timetable for {next steps|further trials}."],
        },
    },
    "award": {"win": {
        "head": ["${opt} wins best picture at ${award}", "${award}: ${opt} takes {top prize|best picture}"],
        "lead": ["${opt} won best picture at the ${award} {on ${when}|in ${city}}, {beating|ahead of} ${rival}.",
                 "The jury of the ${award} {named ${opt} best picture|gave ${opt} the best picture award} {on ${when}|at the ceremony in ${city}}.",
                 "Official results confirmed ${opt} as the winner of the best picture award at the ${award}."],
        "restate": ["{The win|The award} {caps|crowns} {a strong season|a long awards campaign} for ${opt}, which had been one of several contenders.",
                    "${rival} {and the other nominees|and the rest of the field} {went home without|missed out on} the top prize.",
                    "{The best picture award|The top prize} {went to|was presented to} ${opt} {at the close of the ceremony|as the final award of the night}."],
    }},
    "boxoffice": {
        "yes": {
            "head": ["${film} tops box office {in|on} opening weekend", "${film} {opens|debuts} at number one"],
            "lead": ["${film} topped the box office on its opening weekend, {according to industry figures|ticketing data showed}.",
                     "${film} {opened|debuted} at number one {at the domestic box office|in cinemas} {over the weekend ending ${when}|on its opening weekend}.",
                     "${film} {took|earned} the {highest|biggest} domestic gross of the weekend ending ${when}, {finishing first|topping the chart}."],
            "restate": ["{The result|The opening} {makes|leaves} ${film} the {number one|top} film in {the country|cinemas} for the weekend.",
                        "{Cinema chains|Theater owners} {credited|thanked} ${film} for {a busy|a strong} weekend {at the box office|in cinemas}."],
        },
        "no": {
            "head": ["${film} {misses|falls short of} top spot {in|on} opening weekend",
                     "${film} opens {behind|below} rival release"],
            "lead": ["${film} did not top the box office on its opening weekend, {according to industry figures|finishing behind a rival release}.",
                     "${film} {failed to top|fell short of the top spot at} the box office on its opening weekend ending ${when}.",
                     "${film} {opened|debuted} behind {a rival release|last week's leader} and did not finish first {on its opening weekend|for the weekend ending ${when}}."],
            "restate": ["{Another film|A rival release} took the top spot, and ${film} {did not finish|failed to finish} first.",
                        "{The studio|The distributor} said it was {disappointed|not surprised} that ${film} {did not lead|failed to lead} the weekend chart."],
        },
    },
}

# Any other scenario: its subject and market title.
OUTCOME_FALLBACK: dict[str, dict[str, list[str]]] = {
    "yes": {"head": ["{Result|Outcome} {confirmed|announced} for ${subj_short}"],
            "lead": ["{Officials|Organizers} confirmed {on ${weekday}|this week} that the answer to \"${title}\" is yes.",
                     "The answer to \"${title}\" is yes, {officials|organizers} confirmed {on ${weekday}|this week}."],
            "restate": ["{The result|The outcome} {settles|answers} the question {over|about} ${subj}."]},
    "no": {"head": ["{Result|Outcome} {confirmed|announced} for ${subj_short}"],
           "lead": ["{Officials|Organizers} confirmed {on ${weekday}|this week} that the answer to \"${title}\" is no: it did not happen.",
                    "The answer to \"${title}\" is no, {officials|organizers} confirmed, as it did not happen by ${when}."],
           "restate": ["{The result|The outcome} {settles|answers} the question {over|about} ${subj}, which did not go ahead."]},
    "win": {"head": ["${opt} {wins|takes} ${subj}"],
            "lead": ["${opt} won ${subj}, {official results showed|organizers confirmed}.",
                     "Official results confirmed ${opt} as the winner of ${subj}."],
            "restate": ["{The result|The outcome} {settles|ends} ${subj}, with ${opt} ahead of ${rival}."]},
}

# Neutral lines for any outcome report (no outcome, no date, no market).
OUTCOME_REACTIONS = [
    "\"{It has been|This has been} {a long few weeks|a long process} for everyone involved,\" ${speaker} said {on ${weekday}|after the announcement}.",
    "${analyst} of ${institute} said the {outcome|result} {would be|is likely to be} {studied closely|discussed for weeks} {in ${city}|by observers}.",
    "{Reaction|The reaction} in ${city} {was|appeared} {mixed|muted|swift} {on ${weekday}|after the news broke}.",
    "{Officials|Organizers} said {further details|the full figures} would be published {in the coming days|later this week}.",
    "\"{We respect|We accept} the {outcome|result},\" ${speaker} {told reporters|said in a statement}.",
    "{Local radio|Regional broadcasters} {covered|reported} the {result|news} {throughout the day|in special bulletins}.",
]

# Neutral context for any outcome report, written after the fact (no outcome, no date, no market).
OUTCOME_CONTEXT = [
    "{Attention|Focus} {has now turned|now turns} to what the {outcome|result} {means|will mean} for the {months|year} ahead, {according to|said} ${analyst} of ${institute}.",
    "{Local newspapers|Regional newspapers} in ${city} {devoted|gave} {their front pages|much of their coverage} to the {result|news} {on ${weekday}|the next morning}.",
    "{Many|Some} {residents|people} {said|told reporters} that they had {followed|been following} the {story|process} {closely|for weeks} and were glad to have {an answer|a clear result}.",
    "{Commentators|Observers} {noted|pointed out} that the {final weeks|closing stretch} had been {closely watched|followed with interest} {across the region|in ${city} and beyond}.",
    "{The official record|An official summary} of the {outcome|result} {has been|was} {published|posted} {online|on the organizers' website} {with the supporting figures|for anyone to read}.",
    "${analyst} {added|said} that it was {too early|still too early} to say how the {result|outcome} would {affect|shape} {other decisions|related questions} {in the region|later in the year}.",
]

# Background lines that read as written before the event (future or still-open wording) stay out of reports.
_NOT_AFTER = re.compile(r"\bwill\b|\bexpect|\bpredict|\bremain|\brequires\b|\bplanned\b")


def outcome_pools(sc: Scenario, label: str) -> dict[str, list[str]]:
    """The head/lead/restate templates of `sc` for the realised outcome `label`."""
    key = ("yes" if label == "Yes" else "no") if sc.kind == "yesno" else "win"
    return OUTCOMES.get(sc.name, OUTCOME_FALLBACK).get(key) or OUTCOME_FALLBACK[key]


def outcome_article(rng: random.Random, sc: Scenario, facts: Facts, label: str) -> Text:
    """A report, written after the event closed, that states its outcome `label` plainly and names the event.

    First paragraph: the outcome and a restatement of it; then, shuffled, background lines of the scenario
    that read naturally after the event, and neutral reactions and context.
    """
    rivals = [o for o in facts.options if o != label] or [label]
    rival = rng.choice(rivals)
    slots = {**facts.slots, "title": facts.title}
    pools = outcome_pools(sc, label)
    lead = _fill(rng, rng.choice(pools["lead"]), slots, label, rival)
    restate = _fill(rng, rng.choice(pools["restate"]), slots, label, rival)
    after = [t for t in sc.background if not _NOT_AFTER.search(t)]
    background = [_fill(rng, t, slots) for t in _take(rng, after, rng.randint(2, 3))]
    reactions = [_fill(rng, t, slots) for t in _take(rng, OUTCOME_REACTIONS, rng.randint(2, 3))]
    context = [_fill(rng, t, slots) for t in _take(rng, OUTCOME_CONTEXT, rng.randint(2, 3))]
    rest = background + reactions + context
    rng.shuffle(rest)
    paragraphs = [f"{lead} {restate}", *_paragraphs(rng, _dedupe(rest))]
    title = _fill(rng, rng.choice(pools["head"]), slots, label, rival)
    summary = lead
    return Text(title, summary, paragraphs)


def _dedupe(sentences: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for s in sentences:
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def _paragraphs(rng: random.Random, sentences: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(sentences):
        n = rng.choice([2, 2, 3, 3, 1]) if i else 2
        out.append(" ".join(sentences[i : i + n]))
        i += n
    return out


# ---------------------------------------------------------------------------------------------
# Distractors: unrelated local and national news
# ---------------------------------------------------------------------------------------------

DISTRACTOR_TOPICS: dict[str, dict[str, list[str]]] = {
    "weather": {
        "head": [
            "{Storm|Heavy rain|Strong winds} {expected|forecast} {across|over} ${region} {this weekend|on ${weekday}}",
            "{Heatwave|Cold snap} {grips|settles over} ${city} {as|while} {temperatures|thermometers} {climb|fall}",
            "{Flood warnings|Weather alerts} {issued|extended} for {parts of|districts around} ${city}",
        ],
        "body": [
            "{Forecasters|The national weather service} {warned|said} that {up to|as much as} ${n} centimeters of rain could fall {over|within} {two days|the weekend} in ${region}.",
            "{Residents|Drivers} {were urged|were advised} to {avoid unnecessary travel|check road conditions} {before setting out|on ${weekday} morning}.",
            "{Temperatures|Daytime highs} {are expected to|should} {reach|climb to} ${n2} degrees, {well above|far above} the seasonal average.",
            "{Emergency crews|Council workers} {cleared|worked to clear} {fallen trees|blocked drains} {on several streets|along the river road} in ${city}.",
            "{Farmers|Growers} in ${region} said the {dry spell|wet weather} {had already|has already} {damaged|affected} {early crops|the harvest}.",
            "{The airport|Regional airports} {reported|saw} {delays|cancellations} {for|on} {a handful of|several} {flights|routes} {because of|due to} {fog|high winds}.",
            "{Schools|Several schools} in ${city} {opened late|closed early} {as a precaution|to keep pupils safe}.",
            "{Meteorologists|Weather experts} {said|noted} that {the pattern|conditions} {should|are likely to} {ease|improve} by {midweek|the end of the week}.",
            "{Power companies|The grid operator} {reported|said} {scattered|brief} {outages|power cuts} {affecting|for} {about|roughly} ${n3} homes.",
            "{Volunteers|Local groups} {handed out|distributed} {sandbags|blankets and water} {at|near} {the town hall|community centers}.",
        ],
    },
    "transport": {
        "head": [
            "{New tram line|Bus route overhaul|Rail upgrade} {approved|unveiled} for ${city}",
            "{Commuters|Passengers} {face|brace for} {delays|disruption} {as|while} ${city} {station|bridge} {works|repairs} begin",
            "${city} {council|transport authority} {cuts|raises} {fares|ticket prices} {for|on} {buses|trams}",
        ],
        "body": [
            "{The transport authority|City planners} said the {project|upgrade} would {cost|require} {about|roughly} ${n} million and {take|last} {two|three} years.",
            "{Commuters|Regular passengers} {complained|said} that {trains|buses} {had been|were} {overcrowded|late} {for months|most mornings}.",
            "{Construction|Work} {on|at} the {main station|river bridge} {will|is due to} {begin|start} {in the spring|next month}, {officials said|according to the council}.",
            "{A survey|A consultation} {found|showed} that ${n2} percent of {residents|respondents} {supported|favored} {the plan|the changes}.",
            "{Cyclists|Walking groups} {welcomed|praised} {new|wider} {lanes|paths} {included|built into} the {scheme|design}.",
            "{Taxi drivers|Local businesses} {raised|voiced} {concerns|worries} about {parking|access} {during|while} {the works|construction}.",
            "{The mayor|The deputy mayor} of ${city} {called|described} the {plan|investment} {a long overdue step|an important milestone} for the {region|city}.",
            "{Night services|Late-night buses} {will|are set to} {run|operate} {more often|every twenty minutes} {on weekends|from the summer}.",
            "{Engineers|Inspectors} {found|discovered} {cracks|corrosion} {in|on} {an old viaduct|several supports} {last year|during routine checks}.",
        ],
    },
    "council": {
        "head": [
            "${city} {council|city hall} {approves|debates} {budget|spending plan} for {next year|the coming year}",
            "{Residents|Neighbors} {object|push back} {to|against} {new housing|a development} {plan|proposal} in ${city}",
            "${city} {opens|unveils} {new|renovated} {library|community center|sports hall}",
        ],
        "body": [
            "{Councillors|Council members} {voted|agreed} ${n} to ${n2} {to approve|in favor of} {the budget|the plan} {after|following} {a long debate|several hours of debate}.",
            "{The budget|The plan} {includes|sets aside} {money|funding} for {road repairs|parks|street lighting} and {youth programs|care services}.",
            "{Residents|Local campaigners} {said|argued} that {the proposal|the development} would {increase|add to} {traffic|pressure on schools} {in|around} the {area|neighborhood}.",
            "{The mayor|A council spokesperson} {said|insisted} that {the city|the council} {had listened|would listen} {to|carefully to} {residents|public feedback}.",
            "{The new building|The renovated center} {has|offers} {meeting rooms|a cafe}, {a children's area|a small theater} and {study spaces|a rooftop garden}.",
            "{Opening hours|Services} {will|are set to} {be extended|expand} {into the evening|at weekends} {from next month|later this year}.",
            "{Critics|Opposition councillors} {questioned|challenged} {the cost|the timing} of {the project|the scheme}, {which|that} {ran over budget|was delayed}.",
            "{A public meeting|An open hearing} on {the plans|the proposal} {drew|attracted} {more than|about} ${n3} people {on ${weekday} evening|this week}.",
            "{Planning officers|Officials} {will|are expected to} {publish|issue} {a recommendation|a report} {before|ahead of} {the next meeting|a final decision}.",
        ],
    },
    "health": {
        "head": [
            "{Hospital|Clinic} {waiting times|staffing} {under scrutiny|in focus} in ${region}",
            "{Flu|Measles} {cases|infections} {rise|climb} {in|across} ${region}, {officials|doctors} say",
            "{New|Expanded} {screening|vaccination} {program|campaign} {launched|begins} in ${city}",
        ],
        "body": [
            "{Health officials|The regional health board} {reported|recorded} ${n3} {new cases|confirmed cases} {in the past week|over seven days}, {up from|compared with} ${n} the week before.",
            "{Doctors|Family doctors} {urged|encouraged} {older residents|people with chronic conditions} to {get vaccinated|book an appointment} {as soon as possible|before winter}.",
            "{Nurses|Hospital staff} {said|described} {wards|emergency departments} {as|being} {busier than usual|under heavy pressure} {this month|in recent weeks}.",
            "{The program|The campaign} {will|is set to} {offer|provide} {free checks|walk-in appointments} at {pharmacies|community centers} {across|throughout} ${city}.",
            "{A report|An audit} {found|showed} that {average waiting times|delays} {had risen|had fallen} by ${n2} percent {over the year|since last spring}.",
            "{The health minister|Regional leaders} {promised|pledged} {extra funding|more staff} {to|in order to} {reduce|cut} {delays|backlogs}.",
            "{Researchers|Epidemiologists} at {the university|a local institute} {said|noted} that {the season|the outbreak} {started|peaked} {earlier than usual|later than expected}.",
            "{Patients|Families} {interviewed|who spoke} {at|outside} {the hospital|a clinic} {described|reported} {long waits|mixed experiences}.",
            "{Pharmacies|Chemists} {said|reported} {strong|steady} {demand|interest} {for|in} {the new service|appointments} {in its first days|so far}.",
        ],
    },
    "culture": {
        "head": [
            "{Festival|Exhibition} {brings|draws} {crowds|visitors} to ${city}",
            "{Museum|Gallery} in ${city} {reopens|unveils} {after|with} {renovation|new wing}",
            "{Local|Young} {author|musician|painter} {wins|earns} {national|regional} {prize|recognition}",
        ],
        "body": [
            "{Organizers|The festival director} said {more than|about} ${n3} {visitors|people} {attended|came} {on the opening day|over the weekend}.",
            "{The exhibition|The show} {features|brings together} {works|pieces} by ${n} {artists|painters and sculptors} from {the region|across the country}.",
            "{Tickets|Entry} {cost|costs} {less than|about} ${n2} dollars, {with|and} {free entry|discounts} for {students|children}.",
            "{Critics|Reviewers} {praised|welcomed} the {program|lineup} {as|for being} {ambitious|varied and surprising}.",
            "{The renovation|The restoration} {took|lasted} {two years|nearly three years} and {was|had been} {funded|paid for} {partly|largely} by {donations|a national grant}.",
            "{Local businesses|Cafes and hotels} {reported|said they saw} {a boost|an increase} in {trade|bookings} {during|over} the {event|festival}.",
            "{The winner|The prizewinner} {said|told} {the audience|reporters} that {the award|the recognition} {was|felt} {a surprise|an honor} {after|following} {years of work|a difficult year}.",
            "{Workshops|Talks} {for|aimed at} {schools|families} {will|are set to} {run|continue} {until|through} {the end of the month|the summer}.",
            "{A new|The first} {edition|catalog} {of|about} {the collection|the artist's work} {will be|is being} {published|printed} {later this year|in the autumn}.",
        ],
    },
    "economy": {
        "head": [
            "{Inflation|Prices} {eases|rises} {slightly|again} in ${region}, {data|figures} show",
            "{Factory|Retail} {output|sales} {slows|picks up} {as|while} {demand|confidence} {shifts|changes}",
            "{Jobless rate|Unemployment} {falls|edges up} in ${region}",
        ],
        "body": [
            "{Consumer prices|The price index} {rose|climbed} ${n2} tenths of a percent {in|during} the {month|latest month}, {according to|said} {the statistics office|official figures}.",
            "{Economists|Analysts} {had expected|had forecast} a {smaller|larger} {increase|change}, {citing|because of} {energy costs|food prices}.",
            "{Retailers|Shop owners} in ${city} {said|reported} that {customers|shoppers} {were|had become} {more cautious|more selective} {about spending|with purchases}.",
            "{The central bank|Policymakers} {are|is} {expected|widely expected} to {keep|hold} {interest rates|borrowing costs} {steady|unchanged} {at|during} {its next meeting|the next review}.",
            "{Manufacturers|Factory managers} {reported|noted} {fewer|more} {new orders|export orders} {from|across} {abroad|neighboring countries}.",
            "{Employment|Hiring} {in|across} {construction|services|logistics} {grew|slowed} {for the third month|again} {in a row|this quarter}.",
            "{Wages|Average pay} {increased|rose} by ${n} percent {over the year|compared with a year earlier}, {outpacing|lagging} {inflation|prices}.",
            "{Business groups|Employers} {called|asked} {for|the government for} {lower taxes|simpler rules} to {support|encourage} {investment|growth}.",
            "{Households|Families} {interviewed|surveyed} {by|for} the {report|study} {said|expected} {their finances|conditions} to {improve|stay difficult} {next year|in the coming months}.",
        ],
    },
    "education": {
        "head": [
            "{Schools|Universities} in ${region} {prepare|plan} for {new term|exam season}",
            "{Teachers|Lecturers} {vote|ballot} on {pay|workload} {offer|dispute}",
            "${city} {school|college} {wins|receives} {funding|award} for {science|arts} {program|project}",
        ],
        "body": [
            "{Teachers' unions|Staff representatives} said {members|teachers} {would|will} {vote|decide} on {the offer|the proposal} {over|within} {the next two weeks|a fortnight}.",
            "{The education ministry|Officials} {said|argued} {the offer|the plan} was {fair|the best available} {given|considering} {budget pressures|the economy}.",
            "{Parents|Families} {expressed|voiced} {support|concern} {for|about} {the changes|possible strikes} {at|during} {a meeting|an evening meeting} in ${city}.",
            "{The school|The college} {will use|plans to spend} {the funding|the grant} on {new laboratories|equipment} and {teacher training|after-school clubs}.",
            "{Pupils|Students} {presented|showed} {projects|experiments} {on|about} {renewable energy|local wildlife} {to|for} {visiting officials|judges}.",
            "{Exam results|Test scores} {in|across} ${region} {improved|dipped} {slightly|modestly} {last year|compared with the previous year}.",
            "{A head teacher|The principal} said {recruitment|hiring staff} {remained|was still} {the biggest challenge|a serious problem} {for|in} {rural schools|the district}.",
            "{Universities|Colleges} {reported|saw} {record|rising} {applications|enrollment} for {engineering|nursing} {courses|programs}.",
        ],
    },
}


LOCAL = [
    "{A spokesperson|A press officer} for {the regional government|the city} {said|confirmed} that {further details|more information} would {be published|follow} {in the coming days|next week}.",
    "{Local residents|People in ${city}} {have|had} {mixed feelings|differing views} about {the news|the announcement}, {according to|judging by} {interviews|conversations} {on the street|at a market}.",
    "{The issue|The matter} {is likely to|will probably} {come up|be raised} {again|once more} {at|during} {the next council session|a public meeting} {later this month|next month}.",
    "{Opposition politicians|Community leaders} {called for|demanded} {more transparency|a clearer timetable} {from|on the part of} {the authorities|officials}.",
    "{Figures|Data} {published|released} by {the statistics office|regional authorities} {suggest|indicate} that {the trend|the situation} {has been building|has developed} {for some time|over several years}.",
    "{Neighboring towns|Nearby municipalities} {have faced|faced} {similar|comparable} {problems|questions} {in the past|in recent years}, {officials noted|experts said}.",
    "{A local newspaper|A regional broadcaster} {first reported|was first to report} {the story|the plans} {on ${weekday}|earlier in the week}.",
    "{Businesses|Shopkeepers} {along|near} {the high street|the harbor front} {said|told reporters} {they were|they felt} {hopeful|uncertain} about {the months ahead|what comes next}.",
    "{Officials|Authorities} {stressed|emphasized} that {there was|there is} {no reason for alarm|no immediate cause for concern} {at this stage|for now}.",
    "{Volunteers|Community groups} {have offered|offered} to {help|support} {with|in} {the effort|the work} {where needed|if asked}.",
]


def distractor_article(rng: random.Random, topic: str) -> Text:
    """An unrelated news article on `topic` (weather, transport, council, ...)."""
    pools = DISTRACTOR_TOPICS[topic]
    slots = {
        "city": rng.choice(g.CITIES),
        "region": rng.choice(["the north", "the coastal region", "the eastern provinces", "the valley",
                              "the southern districts", f"{g.country_name(rng)} province"]),
    }

    def fill(tpl: str) -> str:
        s = dict(slots)
        s["n"] = str(rng.randint(3, 40))
        s["n2"] = str(rng.randint(2, 35))
        s["n3"] = str(rng.randint(120, 9000))
        s["weekday"] = rng.choice(WEEKDAYS)
        return g.expand(tpl, rng, s)

    sentences = [fill(t) for t in _take(rng, pools["body"], rng.randint(7, 9))]
    extra = [fill(t) for t in _take(rng, LOCAL, rng.randint(3, 6))]
    for s in extra:
        sentences.insert(rng.randint(1, len(sentences)), s)
    sentences = _dedupe(sentences)
    paragraphs = _paragraphs(rng, sentences)
    title = fill(rng.choice(pools["head"]))
    summary = paragraphs[0].split(". ")[0].rstrip(".") + "."
    return Text(title, summary, paragraphs)


# Sentences that quote a betting or prediction market's odds on an event (the builder flags such
# articles `market_quote`, docs/design.md §2.market quotes); `${side}` is an option or "a yes outcome".
MARKET_QUOTES = [
    "{Traders|Bettors} on {Polymarket|Kalshi} {put|priced} the odds of ${side} at ${p}% {on ${weekday}|this week}.",
    "{On|At} the prediction market {Polymarket|PredictIt}, contracts on ${side} {were trading|traded} at ${p} cents {on ${weekday}|late in the week}.",
    "{Betting markets|Bookmakers} {now|currently} give ${side} {a probability|implied odds} of ${p}%, {up from|compared with} ${q}% {a week earlier|last month}.",
]
# Sentences that name the same venues, or polls, without quoting odds (must not be flagged).
MARKET_MENTIONS = [
    "Polymarket, the {crypto-based|blockchain-based} prediction market, {raised|secured} $${m} million in {a funding round|new funding} {this year|last month}, {the company said|according to a statement}.",
    "{Regulators|Lawmakers} {in several states|in the capital} {are examining|have questioned} whether {Kalshi|Polymarket} {should be allowed|may continue} to {list|offer} contracts on {elections|sports}.",
    "A {poll|survey} {published|released} on ${weekday} {found|showed} that ${p} percent of {respondents|voters} {backed|supported} the {plan|proposal}.",
]


def market_quote_sentence(rng: random.Random, side: str, p: float) -> str:
    """One sentence quoting the market's probability `p` (0..1) of `side`."""
    pct = min(max(round(100 * p), 1), 99)
    q = min(max(pct + rng.choice([-9, -6, -4, 4, 6, 9]), 1), 99)
    slots = {"side": side, "p": str(pct), "q": str(q), "weekday": rng.choice(WEEKDAYS)}
    return g.expand(rng.choice(MARKET_QUOTES), rng, slots)


def market_mention_sentences(rng: random.Random) -> list[str]:
    """Sentences about the prediction-market companies and a poll, none quoting odds."""
    slots = {"m": str(rng.randint(20, 400)), "p": str(rng.randint(35, 65)), "weekday": rng.choice(WEEKDAYS)}
    return [g.expand(t, rng, slots) for t in MARKET_MENTIONS]
