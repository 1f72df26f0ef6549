"""English news prose from the scenario pools: event news, previews and unrelated (distractor) news.

Sentences are drawn without replacement inside one article, so an article never repeats a line or
a long phrase (the Gopher repetition and FineWeb duplicate-line filters drop such pages).
"""

from __future__ import annotations

import random
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
