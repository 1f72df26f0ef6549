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
