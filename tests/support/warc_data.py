"""Builders of small WARC files for the corpus tests (real WARC/1.1 gzip files written with warcio)."""

from __future__ import annotations

import io
import random
from dataclasses import dataclass, field
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

_NOUNS = ["council", "budget", "river", "school", "bridge", "market", "harvest", "hospital", "library", "station", "election", "court", "minister", "company", "union", "farmer", "teacher", "doctor", "engineer", "village", "city", "region", "border", "airport", "museum", "festival", "season", "report", "survey", "study", "plan", "project", "road", "railway", "harbour", "factory", "garden", "forest", "coast", "island", "valley", "mountain", "program", "contract", "policy", "treaty", "agreement"]
_ADJS = ["new", "old", "local", "national", "regional", "large", "small", "public", "private", "early", "late", "quiet", "busy", "strong", "weak", "careful", "final", "recent", "annual", "modern", "rural", "urban", "central", "northern", "southern"]
_VERBS = ["approved", "rejected", "delayed", "reviewed", "announced", "discussed", "expanded", "reduced", "funded", "opened", "closed", "inspected", "visited", "praised", "criticised", "supported", "questioned", "completed", "started"]
_TAILS = ("on Monday", "on Tuesday", "in a statement", "after the meeting", "to reporters",
          "during the hearing", "with some caution", "for the first time", "late in the evening",
          "before the weekend", "at the start of the month", "in front of the press")


def english_body(seed: int, sentences: int = 16) -> str:
    """A varied plain English news body (several paragraphs) that passes the default quality filters."""
    rng = random.Random(seed)
    n, a, v, t = (lambda: rng.choice(_NOUNS)), (lambda: rng.choice(_ADJS)), (lambda: rng.choice(_VERBS)), (
        lambda: rng.choice(_TAILS))
    forms = [
        lambda: f"The {a()} {n()} {v()} a {n()} plan {t()}.",
        lambda: f"Officials from the {n()} said {rng.randrange(2, 900)} {n()}s were {v()} {t()}.",
        lambda: f"A {a()} {n()} and the {a()} {n()} have {v()} it, {rng.choice(['critics', 'residents', 'experts'])} say.",
        lambda: f"{rng.choice(['Some', 'Many', 'Few'])} {n()}s in the {a()} {n()} {v()} that {n()} too.",
        lambda: f"It was {v()} by {a()} {n()} staff with {rng.randrange(2, 90)} {n()}s {t()}.",
    ]
    paras = []
    for _ in range(max(1, sentences // 4)):
        paras.append(" ".join(rng.choice(forms)() for _ in range(4)))
    return "\n\n".join(paras)


@dataclass
class Page:
    url: str
    title: str = "A story"
    body: str = ""
    published: str | None = None  # ISO, into article:published_time
    canonical: str | None = None
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    crawl: str = "2025-04-02T10:00:00Z"
    raw: bytes | None = None  # payload override
    extra_head: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)

    def payload(self) -> bytes:
        if self.raw is not None:
            return self.raw
        head = f"<title>{self.title}</title>"
        if self.published:
            head += f'<meta property="article:published_time" content="{self.published}">'
        if self.canonical:
            head += f'<link rel="canonical" href="{self.canonical}">'
        paras = "".join(f"<p>{p}</p>" for p in self.body.split("\n\n") if p)
        html = (f"<!DOCTYPE html><html><head><meta charset='utf-8'>{head}{self.extra_head}</head><body>"
                f"<article><h1>{self.title}</h1>{paras}</article></body></html>")
        return html.encode("utf-8")


def write_warc(path: Path, pages: list[Page], with_request: bool = True) -> Path:
    """Write `pages` as response records (plus warcinfo and request records) to a .warc.gz file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="WARC/1.1")
        writer.write_record(writer.create_warcinfo_record(path.name, {"software": "tests"}))
        for i, page in enumerate(pages):
            data = page.payload()
            status_line = f"{page.status} {'OK' if page.status == 200 else 'Error'}"
            hdrs = [("Content-Length", str(len(data)))] + list(page.headers)
            if page.content_type:
                hdrs.insert(0, ("Content-Type", page.content_type))
            http = StatusAndHeaders(status_line, hdrs, protocol="HTTP/1.1")
            rec_id = f"<urn:uuid:{path.stem}-{i:08d}>"
            if with_request:
                req = writer.create_warc_record(page.url, "request", payload=io.BytesIO(b""),
                                                http_headers=StatusAndHeaders("GET / HTTP/1.1", [], is_http_request=True))
                writer.write_record(req)
            rec = writer.create_warc_record(page.url, "response", payload=io.BytesIO(data), http_headers=http,
                                            warc_headers_dict={"WARC-Date": page.crawl, "WARC-Record-ID": rec_id})
            writer.write_record(rec)
    return path


#: A self-written results round-up of the kind forecasting questions resolve on: most tokens are scores,
#: times, percentages and money, so fewer than 80% of datatrove's tokens hold a letter (the `paper` quality
#: profile drops it as gopher_alpha_words, `news` keeps it).
SCORES = "\n\n".join([
    "Premier League results, Saturday 12 April 2025.",
    "Arsenal 3-1 Brentford (Saka 12', 58'; Havertz 77' — Wissa 40'). Attendance: 60,254.",
    "Chelsea 0-0 Everton. Shots 14-6, on target 4-1, possession 68%-32%.",
    "Liverpool 2-1 West Ham (Salah 18', 90+3' pen.; Bowen 55'). Liverpool lead by 11 points with 6 games left.",
    "Manchester City 5-2 Crystal Palace (Haaland 9', 33', 71'; De Bruyne 45+1'; Foden 88' — Eze 21', Mateta 64').",
    "Table: 1. Liverpool 76 pts (31 games), 2. Arsenal 65 (31), 3. Nottingham Forest 57 (31), "
    "4. Manchester City 55 (32), 5. Newcastle 53 (30), 6. Chelsea 53 (32).",
    "Top scorers: Salah 27, Haaland 21, Isak 20, Wood 18, Mbeumo 16, Palmer 14.",
    "Odds for the title have moved to 1/50 for Liverpool and 33/1 for Arsenal after the results.",
    "The next round is on 19-20 April; Arsenal host Ipswich at 15:00 BST and Liverpool visit Leicester at 16:30.",
])

#: A market close of the same kind: prices, yields and percentages.
MARKETS = "\n\n".join([
    "Markets close: S&P 500 +1.2% at 5,633.07; Dow +0.8% at 40,212.71; Nasdaq +1.5% at 17,724.32.",
    "The 10-year Treasury yield rose 6 bp to 4.48%, the 2-year 3 bp to 3.97%; the dollar index fell 0.4% to 99.84.",
    "Brent crude settled at $65.12 (-0.9%), WTI at $61.88 (-1.1%); gold rose $31.40 to $3,245.60 an ounce.",
    "Europe: Stoxx 600 -0.3% at 497.14, FTSE 100 +0.6% at 8,001.11, DAX -0.9% at 20,374.10, CAC 40 -0.6%.",
    "Asia: Nikkei 225 +1.8% at 33,982.36, Hang Seng -0.2% at 20,396.61, Shanghai Composite +0.5% at 3,238.23.",
    "Bitcoin traded at $84,210 (+2.3%) and ether at $1,622 (+1.1%) at 16:00 ET.",
    "Earnings: JPMorgan EPS $5.07 vs $4.61 expected, revenue $46.0bn vs $44.1bn; shares +4.0% to $236.20.",
    "Wells Fargo EPS $1.39 vs $1.23 expected; shares -0.9%. Morgan Stanley EPS $2.60 vs $2.20; shares +1.4%.",
    "Fed funds futures price 82 bp of cuts by December, up from 76 bp on Friday, with the first cut seen in June.",
])
