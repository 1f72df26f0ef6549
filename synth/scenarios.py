"""Event scenarios of the fictional world: question, options, and the sentences news uses about them.

A scenario turns a random stream into the facts of one event (question, option labels, slots for
the prose) and carries sentence pools: `yes`/`no` for Yes/No questions, `pro` (with ``${opt}`` and
``${rival}``) for questions whose options are names, `background` and `schedule` (previews:
"the vote is scheduled for May 14", which is not leakage), and headline templates.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from forecast_env.synth import grammar as g


@dataclass
class Facts:
    """What one scenario instance says about its event."""

    title: str
    description: str
    options: list[str]
    kind: str  # yesno | named | multi
    slots: dict[str, str]
    leg_questions: list[str] = field(default_factory=list)
    phrasing: str = "a"  # the world's phrasing bank (phrasing.py): "a" these pools, "b" the held-out cues


def _date_words(d: datetime) -> str:
    return f"{d.strftime('%B')} {d.day}"


# ---------------------------------------------------------------------------------------------
# Shared sentence pools (any scenario)
# ---------------------------------------------------------------------------------------------

ANALYSIS = [
    "{Analysts|Observers|Commentators} {said|noted|argued} that {the outlook|the picture} for ${subj_short} {remained|was still} {hard to read|far from settled|uncertain} {this week|for now|at this stage}.",
    "${analyst}, {a senior fellow|a researcher|an economist} at ${institute}, {said|told reporters} that {small shifts|late developments|minor events} could still {change|reshape|tilt} ${subj_short}.",
    "{Several|A number of|Some} {local officials|party insiders|industry figures|former officials} {declined to comment|would not speak on the record} about {their expectations|the likely result}.",
    "{Social media|Online forums|Radio call-in shows} {were busy with|have been full of} {debate|speculation|arguments} about ${subj_short}, {though|but} {much of it|most of that chatter} {lacked evidence|was thinly sourced}.",
    "{Turnout|Interest|Public attention} {has been|was} {unusually high|higher than expected|steady} {in recent weeks|since the start of the month}, {according to|based on figures from} ${institute}.",
    "{Critics|Skeptics} {warned|cautioned} that {early signals|the latest numbers} {often|sometimes} {overstate|exaggerate} {momentum|real change}.",
    "${analyst} {added|pointed out} that {a similar contest|a comparable case} in ${city} {years ago|a decade ago} {had turned on|was decided by} {a handful of|a few} {late decisions|surprises}.",
    "{Newspapers|Editorial boards} in ${city} {have taken|took} {opposing|sharply different} {views|positions} on {the question|the matter}.",
    "{The mood|Sentiment} in ${city} {was described as|appeared} {tense|cautious|restless} {as|while} {the deadline|the decision} {approached|drew closer}.",
    "{Market watchers|Traders and bookmakers} {have moved|shifted} their {estimates|odds} {several times|back and forth} {over the past month|in recent weeks}.",
    "{Officials|Organizers} {said|insisted} that {all procedures|the process} would {follow|respect} {the published rules|established practice}.",
    "{There was|Observers reported} {little|no} {sign|evidence} of {irregularities|procedural problems} {so far|to date}.",
    "{Residents|Voters|Fans} {interviewed|who spoke} {in|around} ${city} {offered|gave} {a range of|mixed} {opinions|views}.",
    "{Some|Many} {experts|specialists} {expect|believe} {the final weeks|the closing stretch} {to matter most|will be decisive}.",
    "{The debate|The discussion} {has also|also} {touched on|turned to} {costs|funding|timing} and {the broader economy|regional priorities}.",
    "{A spokesperson|A press officer} for ${institute} said the {organization|group} would {publish|release} {a new report|further data} {soon|in the coming days}.",
]

QUOTES = [
    "\"{We are|We remain} {confident|optimistic} {about the path ahead|that our case is strong},\" ${speaker} said {on Tuesday|at a briefing|in a statement}.",
    "\"{Nothing is decided|It is far too early to call this|Anything can happen} {yet|at this point},\" ${speaker} {told|said to} {reporters|local radio}.",
    "\"{The numbers|The figures} {tell|show} {a clear story|only part of the story},\" ${analyst} said.",
    "\"{People|Voters|Supporters} {want|expect} {answers|results|clarity}, and {they want them soon|they are losing patience},\" ${speaker} {added|said}.",
    "\"{This is|It has been} {one of the closest|an unusually open} {contests|races} {I have seen|in recent memory},\" said ${analyst}.",
    "\"We {will|are going to} {keep working|stay focused} until the {very end|last day},\" ${speaker} {said|insisted}.",
]

HEDGES = [
    "{Still|Even so|Nonetheless}, {no one|few people} {in|close to} {the process|the campaign|the organization} {was willing to|would} {predict the result|make a firm prediction}.",
    "{The signals|The indicators} {so far|this week} {are|remain} {mixed|contradictory}, {with|and} {evidence|arguments} {pointing in both directions|on both sides}.",
    "{It is|It remains} {unclear|uncertain} whether {the recent shift|this week's news} {will last|will hold}.",
    "{Both camps|All sides} {claimed|said they saw} {encouraging signs|reasons for optimism} {in the latest data|in recent days}.",
]


# ---------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------


@dataclass
class Scenario:
    name: str
    category: str
    kind: str  # yesno | named | multi
    make: Callable[[random.Random, datetime, int], Facts]  # (rng, close, n_options) -> Facts
    headlines: list[str]
    background: list[str]
    schedule: list[str]
    yes: list[str] = field(default_factory=list)
    no: list[str] = field(default_factory=list)
    pro: list[str] = field(default_factory=list)


def _common_slots(rng: random.Random) -> dict[str, str]:
    return {
        "analyst": g.person_name(rng),
        "speaker": g.person_name(rng),
        "institute": rng.choice(g.POLLSTERS + ["the Civic Research Council", "Westmarch University"]),
        "city": rng.choice(g.CITIES),
        "pollster": rng.choice(g.POLLSTERS),
    }


def _resolution(q: str, yes_text: str) -> str:
    return (f"This market will resolve to \"Yes\" if {yes_text}. Otherwise, this market will resolve to "
            f"\"No\". The primary resolution source will be official announcements and a consensus of "
            f"credible reporting.")


def make_election(rng: random.Random, close: datetime, k: int) -> Facts:
    country = g.country_name(rng)
    cands = g.unique(rng, g.person_name, k)
    when = _date_words(close)
    slots = {**_common_slots(rng), "country": country, "subj": f"the {country} presidential election",
             "subj_short": rng.choice(["the election", "the presidential race", "the vote"]), "when": when}
    title = f"{country} Presidential Election Winner"
    desc = (f"This event concerns the presidential election in {country} scheduled for {when}. "
            f"Each market resolves to \"Yes\" if the named candidate is declared the winner by the "
            f"national electoral commission, and \"No\" otherwise.")
    legs = [f"Will {c} win the {country} presidential election?" for c in cands]
    return Facts(title, desc, cands, "multi", slots, legs)


def make_bill(rng: random.Random, close: datetime, k: int) -> Facts:
    country = g.country_name(rng)
    topic = rng.choice(g.BILL_TOPIC)
    when = _date_words(close)
    bill = f"{topic} Act"
    slots = {**_common_slots(rng), "country": country, "bill": bill,
             "subj": f"the {bill} in the {country} parliament",
             "subj_short": rng.choice(["the bill", "the legislation", "the measure"]), "when": when}
    title = f"Will the {country} parliament pass the {bill} by {when}?"
    desc = _resolution(title, f"the {country} parliament passes the {bill} in a final vote by {when}, "
                              f"{close.year}")
    return Facts(title, desc, ["Yes", "No"], "yesno", slots, [title])


def make_match(rng: random.Random, close: datetime, k: int) -> Facts:
    league = rng.choice(g.LEAGUES)
    a, b = g.unique(rng, g.team_name, 2)
    when = _date_words(close)
    slots = {**_common_slots(rng), "league": league, "subj": f"the {league} final",
             "subj_short": rng.choice(["the final", "the title decider", "the showpiece match"]),
             "when": when}
    title = f"{league} Final: {a} vs. {b}"
    desc = (f"This market concerns the {league} final between the {a} and the {b}, scheduled for {when}. "
            f"It resolves to the team that wins the match, including extra time and any shootout.")
    return Facts(title, desc, [a, b], "named", slots, [title])


def make_champion(rng: random.Random, close: datetime, k: int) -> Facts:
    league = rng.choice(g.LEAGUES)
    teams = g.unique(rng, g.team_name, k)
    when = _date_words(close)
    slots = {**_common_slots(rng), "league": league, "subj": f"the {league} title race",
             "subj_short": rng.choice(["the title race", "the championship", "the season finale"]),
             "when": when}
    title = f"{league} Champion {close.year}"
    desc = (f"Which team will win the {close.year} {league} championship? The season concludes on {when}. "
            f"Each market resolves to \"Yes\" if the named team is crowned champion.")
    legs = [f"Will the {t} win the {close.year} {league}?" for t in teams]
    return Facts(title, desc, teams, "multi", slots, legs)


def make_merger(rng: random.Random, close: datetime, k: int) -> Facts:
    a, b = g.unique(rng, g.company_name, 2)
    when = _date_words(close)
    slots = {**_common_slots(rng), "company": a, "target": b,
             "subj": f"{a}'s proposed takeover of {b}",
             "subj_short": rng.choice(["the deal", "the takeover", "the merger"]), "when": when,
             "month": close.strftime("%B")}
    title = f"Will {a} complete its acquisition of {b} by {when}?"
    desc = _resolution(title, f"{a} announces the completion of its acquisition of {b} by {when}, {close.year}")
    return Facts(title, desc, ["Yes", "No"], "yesno", slots, [title])


def make_ceo(rng: random.Random, close: datetime, k: int) -> Facts:
    company = g.company_name(rng)
    people = g.unique(rng, g.person_name, k)
    when = _date_words(close)
    slots = {**_common_slots(rng), "company": company,
             "subj": f"the search for a new chief executive at {company}",
             "subj_short": rng.choice(["the succession", "the leadership race", "the board decision"]),
             "when": when}
    title = f"Next CEO of {company}?"
    desc = (f"{company} has said its board will name a new chief executive by {when}. Each market "
            f"resolves to \"Yes\" if the named person is officially appointed.")
    legs = [f"Will {p} be named CEO of {company}?" for p in people]
    return Facts(title, desc, people, "multi", slots, legs)


def make_launch(rng: random.Random, close: datetime, k: int) -> Facts:
    mission = f"{rng.choice(g.MISSION_A)}-{rng.randint(2, 9)}"
    when = _date_words(close)
    slots = {**_common_slots(rng), "mission": mission, "subj": f"the launch of the {mission} probe",
             "subj_short": rng.choice(["the launch", "the mission", "the liftoff"]), "when": when}
    title = f"Will the {mission} probe launch by {when}?"
    desc = _resolution(title, f"the {mission} probe lifts off by {when}, {close.year}, as confirmed by "
                              f"the mission operator")
    return Facts(title, desc, ["Yes", "No"], "yesno", slots, [title])


def make_trial(rng: random.Random, close: datetime, k: int) -> Facts:
    drug = rng.choice(g.DRUG_A)
    company = g.company_name(rng)
    when = _date_words(close)
    slots = {**_common_slots(rng), "drug": drug, "company": company,
             "subj": f"the late-stage trial of {drug}",
             "subj_short": rng.choice(["the trial", "the study", "the drug trial"]), "when": when}
    title = f"Will {company} report positive results for {drug} by {when}?"
    desc = _resolution(title, f"{company} reports that the phase three trial of {drug} met its primary "
                              f"endpoint by {when}, {close.year}")
    return Facts(title, desc, ["Yes", "No"], "yesno", slots, [title])


def make_award(rng: random.Random, close: datetime, k: int) -> Facts:
    award = rng.choice(g.AWARDS)
    films = g.unique(rng, g.film_title, k)
    when = _date_words(close)
    slots = {**_common_slots(rng), "award": award, "subj": f"the best picture race at the {award}",
             "subj_short": rng.choice(["the awards race", "the top prize", "the ceremony"]), "when": when}
    title = f"{award} {close.year}: Best Picture Winner"
    desc = (f"The {award} ceremony is scheduled for {when}. Each market resolves to \"Yes\" if the named "
            f"film wins the best picture award.")
    legs = [f"Will {f} win Best Picture at the {award}?" for f in films]
    return Facts(title, desc, films, "multi", slots, legs)


def make_boxoffice(rng: random.Random, close: datetime, k: int) -> Facts:
    film = g.film_title(rng)
    when = _date_words(close)
    slots = {**_common_slots(rng), "film": film, "subj": f"the opening weekend of {film}",
             "subj_short": rng.choice(["the opening", "the release", "the box office race"]), "when": when}
    title = f"Will {film} top the box office on its opening weekend?"
    desc = _resolution(title, f"{film} records the highest domestic gross of the weekend ending {when}, "
                              f"{close.year}")
    return Facts(title, desc, ["Yes", "No"], "yesno", slots, [title])


SCENARIOS: list[Scenario] = [
    Scenario(
        "election", "politics", "multi", make_election,
        headlines=[
            "{Poll|Survey} {shows|suggests} ${opt} {gaining ground|edging ahead|holding steady} in ${country} race",
            "${opt} {courts|targets} {rural|urban|young} voters as ${country} campaign {heats up|enters final stretch}",
            "What {to know|we know} about the ${country} presidential {race|election} {this week|so far}",
            "${rival} {campaign|team} {shrugs off|responds to} {new|latest} polling in ${country}",
            "{Debate|Rally} in ${city} {puts|shines} {spotlight|attention} on ${opt} and ${rival}",
            "${country} election: {turnout fears|party switching|campaign money} {dominate|shape} {final weeks|debate}",
        ],
        background=[
            "{The|This year's} presidential election in ${country} {is|will be} {the first|the most closely watched} {since the constitutional reform|in over a decade}.",
            "{Candidates|The contenders} {have campaigned|are campaigning} on {housing|jobs|energy prices|public services} and {corruption|regional investment}.",
            "{The electoral commission|Election officials} in ${country} said {ballots|voting materials} {were|had been} {printed|distributed} {on schedule|without delays}.",
            "${country} {has|elects} {a directly elected president|its head of state by popular vote} who {serves|holds office for} {five|six} years.",
            "{Voters|Citizens} {abroad|living overseas} {will also be able to|can also} cast ballots at {embassies|consulates}.",
        ],
        schedule=[
            "{The vote|Polling day} {is scheduled for|is set for|will take place on} ${when}, {and|with} {results expected|an official count due} {within days|shortly after}.",
            "{Campaigning must end|A campaign silence begins} {two days|a day} before the vote on ${when}.",
            "{The final televised debate|The last debate} {is planned|is expected} {a week|several days} before ${when}.",
        ],
        pro=[
            "{A new poll|The latest survey} by ${pollster} put ${opt} at ${pct} percent, {ahead of|compared with} ${pct2} percent for ${rival}.",
            "${opt} {drew|attracted} {large|noticeably bigger} crowds {in|at rallies in} ${city} {this week|on the weekend}, {according to|said} local organizers.",
            "{Two|Several} {regional parties|prominent mayors} {endorsed|threw their support behind} ${opt} {on Monday|this week|in recent days}.",
            "${rival} {has struggled|struggled} to {explain|defend} {a proposed tax change|budget plans} {that|which} {drew criticism|proved unpopular} {in|across} ${city}.",
            "{Fundraising figures|Campaign finance filings} showed ${opt} {raising|bringing in} {more money|significantly more} than {any rival|${rival}} {last month|in the latest period}.",
            "{Undecided voters|Swing voters} {in focus groups|interviewed by ${pollster}} {leaned|tilted} {toward|in favor of} ${opt} {after|following} the {debate|televised debate}.",
            "{Aides to|Advisers close to} ${rival} {privately|quietly} {acknowledged|conceded} that {the campaign|their candidate} {was trailing|had lost ground} in {key districts|the north}.",
            "${opt} {received|won} {the backing|an endorsement} of {the largest trade union|a popular former president}, {a boost|a significant boost} {in|for} {the campaign|the race}.",
        ],
    ),
    Scenario(
        "bill", "politics", "yesno", make_bill,
        headlines=[
            "${bill} {faces|heads toward} {key test|crucial vote} in ${country} parliament",
            "{Lawmakers|Committee} {debate|weigh} {amendments|changes} to ${bill}",
            "${country} {coalition|government} {counts votes|lobbies wavering members} on ${bill}",
            "{Business groups|Unions} {split|divided} over ${bill} in ${country}",
            "What the ${bill} {would change|means} for {households|businesses} in ${country}",
        ],
        background=[
            "The ${bill} {would|is designed to} {overhaul|update|expand} {rules|programs} {that have not changed|that date back} {in decades|to the 1990s}.",
            "{The government|Ministers} {introduced|tabled} the ${bill} {earlier this year|last autumn} {after|following} {a long consultation|months of pressure}.",
            "{Passage|Final approval} {requires|needs} a {simple majority|majority} in {the lower house|parliament} {and|followed by} {a second reading|the president's signature}.",
            "The {governing coalition|government} {holds|controls} {a narrow|a slim|a working} majority {in parliament|in the chamber}.",
        ],
        schedule=[
            "{The final vote|A floor vote} {is scheduled for|is expected on|has been set for} ${when}.",
            "{Parliament's calendar|The legislative calendar} {lists|shows} the ${bill} {for debate|for a final reading} {in the week of|ahead of} ${when}.",
            "{Committee hearings|Hearings} on {the bill|the legislation} {are set to|will} {conclude|wrap up} {before|ahead of} ${when}.",
        ],
        yes=[
            "{Coalition whips|Government whips} said they {had secured|were confident of} {enough votes|a majority} {for the bill|to pass the measure}.",
            "{A key opposition faction|Several opposition members} {signaled|indicated} {support|they would back the bill} {after|in exchange for} {amendments|changes} {on funding|to the timeline}.",
            "{The finance committee|A parliamentary committee} {approved|advanced} the ${bill} {by a wide margin|without major changes} {this week|on Wednesday}.",
            "{Public support|Support among voters} for the ${bill} {rose to|reached} ${pct} percent in a ${pollster} {survey|poll}.",
            "{Party leaders|The speaker} {agreed|reached agreement} on {a compromise text|a timetable}, {removing|clearing} {a major obstacle|the last hurdle} {to|for} {a vote|passage}.",
        ],
        no=[
            "{Two|Three} {coalition members|junior partners} {threatened|said they might} {to vote against|to oppose} the ${bill} {unless|if} {changes were made|funding was cut}.",
            "{The committee|A parliamentary committee} {delayed|postponed} {its review|a key hearing} on the ${bill}, {raising doubts|prompting questions} about {the timetable|its prospects}.",
            "{Business associations|Farm groups} {launched|stepped up} {a campaign|an advertising push} against the ${bill}, {warning|arguing} {of higher costs|that it goes too far}.",
            "{Support|Backing} for the ${bill} {fell to|slipped to} ${pct} percent in {the latest|a new} ${pollster} {poll|survey}.",
            "{Opposition leaders|Critics in parliament} {vowed|promised} to {use every procedural tool|file dozens of amendments} to {slow|block} the ${bill}.",
        ],
    ),
    Scenario(
        "match", "sports", "named", make_match,
        headlines=[
            "${opt} {prepare|gear up} for ${league} final {against|versus} ${rival}",
            "{Injury|Fitness} {worries|news} {for|around} ${rival} {ahead of|before} ${league} final",
            "{Tactics|Form guide}: how ${opt} and ${rival} {reached|made it to} the {final|${league} final}",
            "{Tickets|Seats} for ${league} final {sell out|in high demand} {as|while} ${city} {prepares|gets ready}",
            "${opt} {coach|manager} {says|insists} {squad|team} {is ready|feels no pressure} for final",
        ],
        background=[
            "{The|This season's} ${league} final {will be played|takes place} at {the national stadium|a sold-out arena} in ${city}.",
            "{Both teams|The finalists} {finished|ended} the regular season {in the top three|with strong records}.",
            "{The two sides|The clubs} {met|played each other} {twice|three times} {during the season|this year}, {splitting|sharing} {the results|the wins}.",
            "{Broadcasters|Television networks} {expect|are predicting} {a record audience|millions of viewers} for the {final|match}.",
        ],
        schedule=[
            "{The final|The match} {is scheduled for|is set for|kicks off on} ${when} {in ${city}|at the national stadium}.",
            "{Kickoff|The start} {on|for the final on} ${when} {is|was} {set|confirmed} for {the evening|early afternoon} local time.",
        ],
        pro=[
            "${opt} {extended|stretched} their {unbeaten|winning} run to ${n} {games|matches} {with|after} a {convincing|comfortable} win {on Saturday|last weekend}.",
            "${rival} {will be without|could miss} {their|its} {top scorer|captain|first-choice goalkeeper} {after|because of} {a hamstring injury|a suspension}.",
            "{Bookmakers|Oddsmakers} {shortened|cut} the odds on ${opt} {after|following} {the team news|training reports}.",
            "${opt} {scored|have scored} ${n} goals in {their|the} last {five|six} {outings|matches}, {the best record|more than any other side} in the league.",
            "{Former players|Pundits} {widely|largely} {tipped|favored} ${opt}, {citing|pointing to} {their defensive record|depth on the bench}.",
            "{Training|Preparation} at ${rival} {was disrupted|has been disrupted} by {illness|a contract dispute|travel problems} {this week|in recent days}.",
        ],
    ),
    Scenario(
        "champion", "sports", "multi", make_champion,
        headlines=[
            "${opt} {keep|maintain} pressure {at the top|on leaders} of ${league}",
            "{Title race|Championship race}: ${opt} and ${rival} {trade blows|exchange wins}",
            "${rival} {stumble|slip} as ${league} {title race|season} {tightens|enters final weeks}",
            "{Remaining fixtures|Run-in} could {decide|settle} ${league} title, {analysts say|experts say}",
            "${opt} {sign|add} {veteran|experienced} {forward|defender} for {title push|the run-in}",
        ],
        background=[
            "{The|This season's} ${league} {has been|was} {one of the most competitive|unusually open} {in years|in recent memory}.",
            "{Several|A handful of} {clubs|teams} {remain|are still} {in contention|mathematically alive} {for|in} the title race.",
            "{The league|Organizers} {introduced|expanded} {a playoff round|new tiebreak rules} {this season|last year}.",
        ],
        schedule=[
            "{The season|The final round} {concludes|ends} on ${when}, {when|and} {all teams|every club} play {simultaneously|at the same time}.",
            "{The last matchday|The final weekend} {is scheduled for|falls on} ${when}.",
        ],
        pro=[
            "${opt} {moved|climbed} {two|three|four} points clear {at the top|of the pack} {after|with} a {late|dramatic} win {over|against} ${rival}.",
            "${opt} {have won|won} ${n} of their last {eight|ten} {games|matches}, {the best run|the strongest form} in the league.",
            "${rival} {dropped|lost} points {at home|on the road} {for the second week running|again}, {denting|hurting} their title hopes.",
            "{Statisticians|Data analysts} at ${institute} {give|gave} ${opt} {the highest|a leading} {chance|probability} of {winning the title|finishing first}.",
            "${opt} {have|enjoy} the {easiest|kindest} {remaining schedule|run of fixtures} of {any contender|the leading sides}.",
            "{An injury crisis|Key absences} {at|for} ${rival} {has|have} {left|forced} the {coach|manager} {short of options|to rotate heavily}.",
        ],
    ),
    Scenario(
        "merger", "business", "yesno", make_merger,
        headlines=[
            "{Regulators|Competition authority} {review|scrutinize} ${company} bid for ${target}",
            "${target} {shareholders|investors} {weigh|consider} ${company} offer",
            "${company}-${target} deal {faces|clears} {new|another} {hurdle|step}",
            "What the ${company} {takeover|deal} {means|could mean} for ${target} {staff|customers}",
            "{Financing|Funding} {questions|details} {emerge|surface} over ${company} {acquisition|takeover}",
        ],
        background=[
            "${company} {agreed|offered} to {buy|acquire} ${target} {in a deal|in a transaction} {valued at|worth} {about|roughly} ${n} billion dollars.",
            "{The combination|The deal} would {create|form} {one of the largest|a major} {players|groups} in {its sector|the region}.",
            "{Completion|Closing} {requires|depends on} {approval from|clearance by} {competition regulators|antitrust authorities} and {shareholders|a shareholder vote}.",
            "${target} {has|had} {struggled|faced pressure} {with rising costs|amid slowing demand} {over the past year|in recent quarters}.",
        ],
        schedule=[
            "{The shareholder vote|A shareholder meeting} {is scheduled for|is set for} {early|mid} ${month}, {ahead of|before} the ${when} {deadline|target date}.",
            "{The companies|Both firms} {have said|said} they {aim|hope} to {close|complete} {the deal|the transaction} {by|no later than} ${when}.",
        ],
        yes=[
            "{Regulators|The competition authority} {signaled|indicated} {they would|it would} {approve|clear} the {deal|transaction} {with|subject to} {modest|limited} {conditions|remedies}.",
            "{Major shareholders|Large investors} in ${target} {said|indicated} they {would support|backed} the {offer|deal} {at the current price|after a sweetened bid}.",
            "${company} {secured|lined up} {financing|bank loans} {for|to fund} the {acquisition|purchase}, {according to|said} {a filing|people familiar with the matter}.",
            "{Integration teams|Planning teams} from {both companies|the two firms} {have begun|started} {meeting|work} {on|ahead of} {the merger|combining operations}.",
            "${target}'s board {reaffirmed|repeated} its {recommendation|support} {for|of} the ${company} {offer|bid}.",
        ],
        no=[
            "{Regulators|The competition authority} {opened|launched} {an in-depth|a second-phase} {investigation|review} {into|of} the {deal|takeover}, {which could|likely to} {take months|delay completion}.",
            "{A rival bidder|Another suitor} {is said to be|was reported to be} {preparing|considering} {a competing offer|a counterbid} for ${target}.",
            "{Some|Several} ${target} shareholders {called|described} the {offer|price} {too low|inadequate} and {threatened|vowed} to vote against it.",
            "${company} {shares|stock} {fell|dropped} {sharply|more than ${pct} percent} {amid|on} {concerns|worries} about {financing|the cost of the deal}.",
            "{Unions|Labor groups} at ${target} {filed|lodged} {a legal challenge|an objection} {to|against} the {takeover|deal}.",
        ],
    ),
    Scenario(
        "ceo", "business", "multi", make_ceo,
        headlines=[
            "${company} {board|directors} {narrows|shortens} CEO {shortlist|list}",
            "${opt} {emerges|seen} as {frontrunner|leading candidate} {for|in} ${company} {top job|CEO search}",
            "{Investors|Shareholders} {push|lobby} ${company} {on|over} {succession|leadership} {plan|timing}",
            "{Who will|Who could} lead ${company}? {Inside|A look at} the {succession race|search}",
        ],
        background=[
            "${company}'s {current|departing} chief executive {announced|said} {in the autumn|earlier this year} that {she|he} would {step down|retire}.",
            "{The board|Directors} {hired|retained} {an executive search firm|headhunters} {and|to} {review|assess} {internal and external|several} candidates.",
            "${company} {employs|has} {about|roughly} ${n} thousand people {across|in} {four continents|a dozen countries}.",
        ],
        schedule=[
            "{The board|Directors} {is expected to|will} {announce|name} {its choice|the new chief executive} {by|on} ${when}.",
            "{A board meeting|The annual meeting} {is scheduled for|is set for} ${when}, {when|at which} {a decision|an announcement} {is expected|could come}.",
        ],
        pro=[
            "${opt} {won praise|was praised} from {board members|directors} {for|after} {leading|running} {the company's fastest-growing unit|a successful restructuring}.",
            "{People familiar with the process|Sources close to the board} {said|told reporters} ${opt} {had impressed|impressed} {in|during} {final interviews|the last round}.",
            "${rival} {is said to have|reportedly} {withdrawn|stepped back} {from consideration|from the race} {for personal reasons|after a disagreement over pay}.",
            "{Large shareholders|Institutional investors} {have|had} {privately|quietly} {backed|endorsed} ${opt}, {according to|said} {people briefed on the matter|two sources}.",
            "${opt} {has|had} {led|overseen} ${company}'s {expansion|push} {into|in} {Asia|new markets}, {a priority|a key goal} for the board.",
        ],
    ),
    Scenario(
        "launch", "science", "yesno", make_launch,
        headlines=[
            "${mission} {probe|spacecraft} {completes|passes} {final|key} {tests|checks}",
            "{Engineers|Mission team} {race|work} to {fix|resolve} {issue|glitch} on ${mission} {rocket|probe}",
            "${mission} launch {window|timeline} {under review|in focus}",
            "{Weather|Wind forecasts} {could|may} {affect|complicate} ${mission} launch {plans|schedule}",
        ],
        background=[
            "The ${mission} {probe|spacecraft} is {designed|built} to {study|map} {the lunar south pole|a near-Earth asteroid|the upper atmosphere}.",
            "{The mission|The project} {has been|was} {delayed|postponed} {twice|several times} {since|after} {its original date|funding problems}.",
            "{Launch|Liftoff} {will take place|is planned} from {the coastal spaceport|the northern launch site} near ${city}.",
        ],
        schedule=[
            "{The launch window|The current window} {opens|runs} {in the days before|until} ${when}.",
            "{Officials|Mission managers} {have targeted|are targeting} {a date|liftoff} {before|ahead of} ${when}.",
        ],
        yes=[
            "{Engineers|Technicians} {completed|finished} {the final fueling rehearsal|a full dress rehearsal} {without problems|on schedule} {this week|on Thursday}.",
            "{The rocket|The launch vehicle} {was rolled out|arrived} {to the pad|at the launch site} {ahead of schedule|as planned}.",
            "{Mission managers|Officials} {said|confirmed} {all systems|every subsystem} {were|was} {ready|green} for {launch|the countdown}.",
            "{Weather forecasts|Forecasters} {predicted|showed} {clear skies|calm winds} for {most of|much of} the launch window.",
        ],
        no=[
            "{A sensor fault|A valve problem|An electrical glitch} {found|discovered} {during|in} {testing|a rehearsal} {forced|led} engineers to {halt|pause} {preparations|work}.",
            "{Officials|Mission managers} {said|admitted} {a new inspection|further checks} could {push|delay} the launch {by weeks|beyond the window}.",
            "{A supplier|A parts manufacturer} {warned|said} that {replacement components|spare parts} {would not arrive|might arrive late}.",
            "{Forecasters|Meteorologists} {warned|predicted} {high winds|storms} {over|around} the launch site {for much of|during} the window.",
        ],
    ),
    Scenario(
        "trial", "science", "yesno", make_trial,
        headlines=[
            "${company} {nears|approaches} {readout|results} for ${drug} trial",
            "{Doctors|Researchers} {watch|await} ${drug} {data|results} {closely|with interest}",
            "${company} {shares|stock} {swing|move} {ahead of|before} ${drug} {results|readout}",
            "What {to expect|is at stake} {from|in} the ${drug} {trial|study}",
        ],
        background=[
            "${drug} {is|is being tested as} {a treatment|a therapy} for {chronic kidney disease|severe asthma|early-stage Alzheimer's disease}.",
            "{The trial|The study} {enrolled|recruited} {about|roughly} ${n} hundred patients {across|in} {several countries|dozens of hospitals}.",
            "{An earlier|A smaller} {study|trial} of ${drug} {showed|produced} {encouraging|modest} results {in|for} {some patients|a subgroup}.",
        ],
        schedule=[
            "${company} {has said|said} it {expects|plans} to {report|release} {top-line|headline} results {before|by} ${when}.",
            "{A presentation|A data release} {at|during} {a medical conference|an investor day} {is scheduled|is planned} {shortly before|ahead of} ${when}.",
        ],
        yes=[
            "{An independent monitoring board|The safety board} {recommended|allowed} {that the trial continue|continuing the study} {without changes|as planned} {after|following} {an interim look|a review}.",
            "{Doctors involved|Investigators} {described|called} {early observations|what they had seen} {as encouraging|as promising}, {according to|said} {a conference summary|a published abstract}.",
            "${company} {expanded|increased} {manufacturing|production} {capacity|plans} for ${drug}, {a sign|suggesting} {of confidence|it expects approval}.",
            "{A rival drug|A competing therapy} {with|using} a {similar mechanism|similar approach} {reported|posted} positive {results|data} {last month|recently}.",
        ],
        no=[
            "{A rival drug|A competing therapy} with a {similar mechanism|similar approach} {failed|missed its goal} in a {comparable|similar} {trial|study} {last month|recently}.",
            "${company} {quietly|unexpectedly} {changed|revised} the {primary endpoint|main goal} of {the study|the trial}, {raising|prompting} {questions|concerns} among analysts.",
            "{Several|Two} {investors|analysts} {cut|lowered} their {estimates|forecasts} for ${drug}, {citing|pointing to} {safety questions|weak earlier data}.",
            "{Enrollment|Patient recruitment} {ran|was} {behind schedule|slower than planned}, {the company acknowledged|according to a filing}.",
        ],
    ),
    Scenario(
        "award", "entertainment", "multi", make_award,
        headlines=[
            "${opt} {builds|gathers} {momentum|buzz} {ahead of|before} ${award}",
            "{Critics|Voters} {divided|split} {over|on} ${award} {best picture|top prize} race",
            "${rival} {campaign|team} {steps up|intensifies} {push|efforts} for ${award}",
            "{Guild prizes|Festival awards} {reshape|shake up} ${award} {race|predictions}",
            "{How|Why} the ${award} {race|contest} {looks|feels} {so open|unusual} this year",
        ],
        background=[
            "The ${award} {honor|celebrate} {the best|outstanding} {films|work} of the {past year|season} {and|with} {a televised ceremony|a gala evening}.",
            "{Members|Voters} of the {academy|jury} {cast|submit} their ballots {over|during} {two weeks|a short window}.",
            "{This year's|The} {nominees|shortlist} {includes|features} {several|a number of} {debut|independent} {directors|productions}.",
        ],
        schedule=[
            "{The ceremony|The awards night} {is scheduled for|will be held on|takes place on} ${when} in ${city}.",
            "{Final voting|The last round of voting} {closes|ends} {a few days|shortly} before the ceremony on ${when}.",
        ],
        pro=[
            "${opt} {won|took} the {top prize|best film award} at {the guild awards|a major festival} {last weekend|this month}, {a traditional bellwether|often a reliable signal}.",
            "{Critics|Reviewers} {polled|surveyed} by ${institute} {ranked|placed} ${opt} {first|at the top} {on|in} their {lists|ballots}.",
            "${rival} {lost|missed out on} {a key|an important} {nomination|precursor award}, {hurting|weakening} its {chances|campaign}.",
            "{Box office|Ticket} {sales|receipts} for ${opt} {rose|jumped} {after|following} {the nominations|its festival run}, {drawing|bringing} new {attention|viewers}.",
            "{Voters|Academy members} {interviewed|who spoke} {anonymously|off the record} {said|mentioned} ${opt} {most often|more than any other film}.",
        ],
    ),
    Scenario(
        "boxoffice", "entertainment", "yesno", make_boxoffice,
        headlines=[
            "${film} {tracking|forecasts} {point to|suggest} {strong|big} opening",
            "{Cinemas|Theater chains} {prepare|brace} for ${film} {release|debut}",
            "${film} {faces|meets} {stiff|tough} competition {at|in} {the box office|cinemas}",
            "{Early reviews|First reactions} {to|for} ${film} {arrive|are in}",
        ],
        background=[
            "${film} {is|marks} the {latest|newest} {production|release} from {an acclaimed|a veteran} {studio|director} {after|following} {a long delay|years of development}.",
            "{The film|The movie} {will open|opens} {on|across} {more than|about} ${n} hundred screens {nationwide|in the country}.",
            "{Another|A rival} {blockbuster|family film} {is|will be} {released|opening} {the same|that} weekend.",
        ],
        schedule=[
            "${film} {opens|arrives in cinemas} {on the weekend ending|in the days before} ${when}.",
            "{Weekend|Opening} box office {figures|estimates} {will be|are} {reported|published} {on|after} ${when}.",
        ],
        yes=[
            "{Advance ticket sales|Presales} for ${film} {outpaced|exceeded} {those of|sales for} {the studio's last hit|comparable releases}, {according to|said} {an industry tracker|ticketing data}.",
            "{Early reviews|Critics' first reactions} {were|have been} {overwhelmingly positive|glowing}, {with|and} {high scores|strong ratings} on review sites.",
            "{The rival release|The competing film} {was moved|was pushed} to a {later|different} {date|weekend}, {clearing|opening} the field for ${film}.",
            "{Cinema chains|Theater owners} {added|scheduled} {extra|additional} {screenings|showtimes} for ${film} {due to demand|after strong presales}.",
        ],
        no=[
            "{Tracking data|Industry tracking} {showed|suggested} ${film} {trailing|behind} {the competing release|a rival blockbuster} {by a wide margin|in presales}.",
            "{Early reviews|First reviews} {were|came in} {mixed|lukewarm}, {with|and} {critics|several critics} {faulting|criticizing} {its length|the pacing}.",
            "{A holdover hit|Last week's number one film} {is expected to|looks set to} {keep|hold} {strong|solid} {audiences|ticket sales} {into|through} the weekend.",
            "{The studio|The distributor} {lowered|cut} its {own|internal} {expectations|forecast} for {the opening|the debut} {this week|on Monday}.",
        ],
    ),
]

SCENARIO_BY_NAME = {s.name: s for s in SCENARIOS}
