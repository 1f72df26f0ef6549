"""A tiny template grammar and the name lists of the fictional world.

Templates use ``{a|b|c}`` for a random choice (nestable) and ``${slot}`` for a slot value.
Every random draw goes through a ``random.Random`` passed in, so output is a pure function of the
seed.
"""

from __future__ import annotations

import hashlib
import random
import re

_CHOICE = re.compile(r"\{([^{}]*)\}")
_SLOT = re.compile(r"\$\{(\w+)\}")


def stable_int(*parts: object) -> int:
    """A 64-bit integer hash of `parts` that does not depend on PYTHONHASHSEED."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(h[:8], "big")


def sub_rng(*parts: object) -> random.Random:
    """An independent random stream named by `parts` (seed first)."""
    return random.Random(stable_int(*parts))


def expand(template: str, rng: random.Random, slots: dict[str, str] | None = None) -> str:
    """Fill the slots of `template`, then resolve its choices innermost first."""
    if slots:
        template = _SLOT.sub(lambda m: slots[m.group(1)], template)

    def pick(m: re.Match[str]) -> str:
        return rng.choice(m.group(1).split("|"))

    while True:
        new = _CHOICE.sub(pick, template)
        if new == template:
            break
        template = new
    return _tidy(template)


def _tidy(text: str) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([,.;:!?])", r"\1", text)
    text = re.sub(r"\ba ([aeiouAEIOU])", r"an \1", text)
    return text[:1].upper() + text[1:] if text else text


# ---------------------------------------------------------------------------------------------
# Name material (all fictional)
# ---------------------------------------------------------------------------------------------

SYLL_A = ["Vel", "Kar", "Os", "Mar", "Tal", "Bre", "Lun", "Dor", "Sav", "Ist", "Quen", "Ral", "Cor",
          "Ambr", "Fen", "Gal", "Hel", "Jor", "Nov", "Pel", "Ser", "Tor", "Ulm", "Var", "Zel"]
SYLL_B = ["tria", "vonia", "mandy", "esia", "land", "ovia", "aria", "enne", "ista", "odor", "avia",
          "uria", "anth", "elle", "ora", "issa"]
FIRST = ["Elena", "Marcus", "Priya", "Tomas", "Amara", "Henrik", "Sofia", "Daniel", "Leila", "Victor",
         "Ingrid", "Rafael", "Nadia", "Oscar", "Hana", "Julian", "Mira", "Stefan", "Aisha", "Felix",
         "Clara", "Mateo", "Yara", "Anton", "Lucia", "Samuel", "Irene", "Kofi", "Vera", "Bruno",
         "Greta", "Emil", "Noor", "Pavel", "Delia", "Ruben", "Talia", "Hugo", "Zora", "Lorenzo"]
LAST = ["Varga", "Okafor", "Lindqvist", "Moreau", "Castellan", "Petrov", "Hale", "Nakamura", "Brandt",
        "Ferreira", "Osei", "Kowalski", "Duarte", "Halvorsen", "Santoro", "Mbeki", "Rourke", "Ivanova",
        "Calder", "Marchetti", "Sorensen", "Abara", "Quint", "Falk", "Reyes", "Whitcombe", "Demir",
        "Larkin", "Novak", "Everly", "Ashdown", "Bellweather", "Kassis", "Thorne", "Valdez", "Hargrove"]
CITIES = ["Harbor City", "Northfield", "Eastbrook", "Port Alder", "Silverton", "Mapleford", "Kingsreach",
          "Redwater", "Ashby", "Stonemere", "Lakeshire", "Brightmoor", "Coldspring", "Fairhaven",
          "Westmarch", "Ironbridge", "Glenrock", "Marlow Bay", "Oakhurst", "Suncrest"]
MASCOTS = ["Mariners", "Rangers", "Falcons", "Wolves", "Comets", "Titans", "Herons", "Foxes", "Pilots",
           "Royals", "Stags", "Hornets", "Otters", "Knights", "Bisons", "Ravens"]
COMPANY_A = ["Northwind", "Bluepeak", "Corvane", "Halcyon", "Ironleaf", "Lumenar", "Meridian", "Nexora",
             "Quillon", "Redstone", "Solvane", "Tessaro", "Veritas", "Wexford", "Ardent", "Brightline"]
COMPANY_B = ["Dynamics", "Holdings", "Systems", "Energy", "Logistics", "Pharma", "Networks", "Foods",
             "Motors", "Analytics", "Materials", "Robotics", "Airways", "Media"]
FILM_A = ["The Quiet", "A Winter", "The Last", "Beneath the", "The Glass", "Letters from the",
          "The Long", "Echoes of the", "A House by the", "The Silver", "Night over the", "The Paper"]
FILM_B = ["Harbor", "Orchard", "Lighthouse", "River", "Garden", "Mountain", "Archive", "Station",
          "Meadow", "Tide", "Citadel", "Kingdom", "Forest", "Bridge"]
MISSION_A = ["Aurora", "Kestrel", "Meridian", "Halo", "Vanguard", "Solace", "Tern", "Beacon", "Polaris",
             "Juniper"]
DRUG_A = ["Corvex", "Talimab", "Nerolin", "Ostrazine", "Velpracin", "Lumizide", "Brevatin", "Quorafen"]
BILL_TOPIC = ["Clean Water", "Digital Privacy", "Rural Broadband", "Pension Reform", "Housing Supply",
              "Coastal Protection", "Fair Wages", "Energy Transition", "Public Transit", "Food Safety",
              "Small Business Relief", "Border Trade"]
AWARDS = ["Golden Lantern Awards", "Silver Reel Festival", "Meridian Film Prize", "Crystal Harp Awards",
          "Northern Lights Film Awards"]
LEAGUES = ["Continental Premier League", "National Basketball Circuit", "Coastal Football League",
           "Union Hockey Series", "Grand Rugby Championship"]
POLLSTERS = ["Civic Pulse", "Meridian Research", "the Halvorsen Institute", "NorthStar Polling",
             "Lighthouse Analytics", "the Brightmoor Survey Unit"]
OUTLETS = ["harbortimes.com", "northfieldherald.net", "dailyledger.co.uk", "courierpost.com",
           "metronewswire.com", "eastbrookgazette.org", "theobserverdaily.com", "capitalreport.net",
           "westmarchtribune.com", "silvertonstar.com", "globalbrief.news", "marketwatchpost.com",
           "sportsdesk.live", "screenandstage.net", "sciencefront.org", "portalderchronicle.com"]


def country_name(rng: random.Random) -> str:
    return rng.choice(SYLL_A) + rng.choice(SYLL_B)


def person_name(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def team_name(rng: random.Random) -> str:
    return f"{rng.choice(CITIES)} {rng.choice(MASCOTS)}"


def company_name(rng: random.Random) -> str:
    return f"{rng.choice(COMPANY_A)} {rng.choice(COMPANY_B)}"


def film_title(rng: random.Random) -> str:
    return f"{rng.choice(FILM_A)} {rng.choice(FILM_B)}"


def unique(rng: random.Random, make, n: int, taken: set[str] | None = None) -> list[str]:
    """`n` distinct values drawn from `make(rng)` (and not in `taken`)."""
    out: list[str] = []
    seen = set(taken or ())
    for _ in range(n * 200):
        v = make(rng)
        if v not in seen:
            seen.add(v)
            out.append(v)
            if len(out) == n:
                return out
    raise RuntimeError("name space exhausted")
