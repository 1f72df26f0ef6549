"""Hostile WARC input, many times: real WARC records (warcio's test files in tests/fixtures/warc) and
English news records, one gzip member each as in CC-NEWS, with one member or the whole file mutated
by a seeded fuzzer (truncations, bit flips, wrong Content-Length, bad gzip members, odd charsets and
headers), through the reader (both backends) and the corpus build's per-WARC stage.

Every input must give no traceback, every record read must be kept or dropped with a known reason,
a fault of the file must be counted with a known kind, and the good records before and after the bad
one must be kept as they are in the unmutated file (after it: unless the file was cut there). The short variants run in `make test`; the benchmark variants run thousands.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forecast_env import schema
from forecast_env.corpus_build.pipeline import process_warc
from forecast_env.corpus_build.warc import BACKENDS, FAULT_KINDS, ReadDrop, WarcPage, WarcReader, fault_kind
from tests.support.paths import FIXTURES
from tests.support.warc_data import Page, english_body, write_warc
from tests.system.faults._fuzz import Tally, fuzz_settings

FIXTURES = FIXTURES / "warc"
REAL = sorted(p.name for p in FIXTURES.glob("*.warc*"))
GOOD = 4  # English news records per seed file, one before and after each run of real records

# ------------------------------------------------------------------ seeds: records as raw bytes


def gzip_members(data: bytes) -> list[bytes]:
    """The decompressed members of a multi-member gzip file."""
    out = []
    while data:
        d = zlib.decompressobj(wbits=31)
        out.append(d.decompress(data))
        data = d.unused_data
    return out


def split_records(raw: bytes) -> list[bytes]:
    """An uncompressed WARC file's records (headers, block and the two CRLFs after it)."""
    out, pos = [], 0
    while pos < len(raw):
        end = raw.index(b"\r\n\r\n", pos) + 4
        length = int(re.search(rb"(?im)^content-length:\s*(\d+)", raw[pos:end]).group(1))
        stop = end + length
        while raw[stop:stop + 2] == b"\r\n":
            stop += 2
        out.append(raw[pos:stop])
        pos = stop
    return out


def file_records(path: Path) -> list[bytes]:
    """Every record of a WARC file (gzipped per record or not) as uncompressed bytes."""
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        return [r for m in gzip_members(data) for r in split_records(m)]
    return split_records(data)


@dataclass(frozen=True)
class Seed:
    """A seed file: records (uncompressed), which are ours (English news), and the real fixture used."""

    records: tuple[bytes, ...]
    good: tuple[int, ...]  # indices of the English news records
    fixture: str


@cache
def seed(fixture: str, tmp: str) -> Seed:
    """Real records of `fixture` between English news records (a WARC whose news the build keeps)."""
    pages = [Page(f"https://news.example.com/fuzz-{i}", title=f"Fuzz story number {i} of the week",
                  body=english_body(700 + i, 8), published=f"2025-04-0{i + 1}T08:00:00Z") for i in range(GOOD)]
    ours = file_records(write_warc(Path(tmp) / "ours.warc.gz", pages, with_request=False))
    info, news = ours[0], ours[1:]
    real = file_records(FIXTURES / fixture)
    half = len(real) // 2
    records = [info, news[0], *real[:half], news[1], news[2], *real[half:], news[3]]
    good = tuple(i for i, r in enumerate(records) if r in news)
    return Seed(tuple(records), good, fixture)


def assemble(records: list[bytes], gz: bool = True) -> bytes:
    """One gzip member per record (CC-NEWS's layout), or one plain WARC."""
    return b"".join(gzip.compress(r, mtime=0) for r in records) if gz else b"".join(records)


# ------------------------------------------------------------------ mutations


def _set_header(record: bytes, name: bytes, value: bytes | None, in_http: bool = False) -> bytes:
    """Replace (or remove, value None) a header of the WARC block (or of its HTTP message)."""
    head_end = record.index(b"\r\n\r\n") + 4
    if in_http:
        http_end = record.find(b"\r\n\r\n", head_end)
        if http_end < 0:
            return record
        part, before, after = record[head_end:http_end + 4], record[:head_end], record[http_end + 4:]
    else:
        part, before, after = record[:head_end], b"", record[head_end:]
    pattern = re.compile(rb"(?im)^" + re.escape(name) + rb":[^\r\n]*\r\n")
    new = pattern.sub(b"" if value is None else name + b": " + value.replace(b"\\", b"\\\\") + b"\r\n", part, count=1)
    if new == part and value is not None:
        line_end = part.index(b"\r\n") + 2
        new = part[:line_end] + name + b": " + value + b"\r\n" + part[line_end:]
    out = before + new + after
    if in_http:  # keep the WARC Content-Length right: only the header under test is wrong
        block = len(new) + len(after) - _trailer(after)
        out = _set_header(before, b"Content-Length", str(block).encode()) + new + after
    return out


def _trailer(tail: bytes) -> int:
    n = 0
    while tail[len(tail) - n - 2: len(tail) - n] == b"\r\n" and n < 4:
        n += 2
    return n


ODD_CHARSETS = [b"utf-7", b"x-unknown", b"utf-16", b"", b'"', b"utf-8\x00", b"latin1;;;", b"a" * 300, b"\xff\xfe",
                b"iso-2022-jp", b"ebcdic-cp-us", b"utf-32"]
ODD_VALUES = [b"", b"-1", b"99999999999999999999", b"abc", b"0x10", b" 12 ", b"\xff\xfe", b"1e3", b"\x00"]


@dataclass(frozen=True)
class Mutation:
    """One change to a seed file: `kind` (a family), `target` (the record changed, None: the file)."""

    kind: str
    target: int | None
    framing: bool  # True when the records after the target are still in the file (they must all be read)
    apply: Callable[[list[bytes]], bytes]


@st.composite
def mutations(draw: st.DrawFn, sd: Seed) -> Mutation:
    n = len(sd.records)
    kind = draw(st.sampled_from(["truncate_file", "flip_gz", "flip_raw", "content_length", "bad_member",
                                 "warc_header", "http_header", "charset", "payload", "plain_file"]))
    k = draw(st.integers(1, n - 1))
    if kind == "truncate_file":
        whole = assemble(list(sd.records))
        cut = draw(st.integers(0, len(whole) - 1))
        starts = [len(assemble(list(sd.records[:i]))) for i in range(n + 1)]
        target = max(i for i in range(n) if starts[i] <= cut)
        return Mutation(kind, target, False, lambda recs: assemble(recs)[:cut])
    if kind == "flip_gz":
        member = gzip.compress(sd.records[k], mtime=0)
        flips = draw(st.lists(st.tuples(st.integers(0, len(member) - 1), st.integers(0, 7)), min_size=1, max_size=4))

        def flip_gz(recs: list[bytes]) -> bytes:
            m = bytearray(gzip.compress(recs[k], mtime=0))
            for pos, bit in flips:
                m[pos] ^= 1 << bit
            return assemble(recs[:k]) + bytes(m) + assemble(recs[k + 1:])
        return Mutation(kind, k, True, flip_gz)
    if kind == "flip_raw":
        flips = draw(st.lists(st.tuples(st.integers(0, len(sd.records[k]) - 1), st.integers(0, 7)), min_size=1,
                              max_size=8))

        def flip_raw(recs: list[bytes]) -> bytes:
            r = bytearray(recs[k])
            for pos, bit in flips:
                r[pos] ^= 1 << bit
            return assemble(recs[:k] + [bytes(r)] + recs[k + 1:])
        return Mutation(kind, k, True, flip_raw)
    if kind == "content_length":
        value = draw(st.one_of(st.sampled_from(ODD_VALUES), st.integers(-50, 50).map(
            lambda d: str(max(0, int(re.search(rb"(?im)^content-length:\s*(\d+)", sd.records[k]).group(1)) + d))
            .encode())))
        return Mutation(kind, k, True, lambda recs: assemble(
            recs[:k] + [_set_header(recs[k], b"Content-Length", value)] + recs[k + 1:]))
    if kind == "bad_member":
        junk = draw(st.sampled_from(["junk", "gzip_head", "cut_member", "empty_member", "zeros", "raw_record"]))
        data = draw(st.binary(min_size=1, max_size=64))

        def bad_member(recs: list[bytes]) -> bytes:
            m = gzip.compress(recs[k], mtime=0)
            bad = {"junk": data, "gzip_head": b"\x1f\x8b\x08\x00" + data, "cut_member": m[: max(1, len(m) // 2)],
                   "empty_member": gzip.compress(b""), "zeros": b"\x00" * len(data), "raw_record": recs[k]}[junk]
            return assemble(recs[:k]) + bad + assemble(recs[k + 1:])
        return Mutation(f"{kind}:{junk}", k, True, bad_member)
    if kind == "warc_header":
        name = draw(st.sampled_from([b"WARC-Target-URI", b"WARC-Date", b"WARC-Record-ID", b"WARC-Type",
                                     b"Content-Type", b"X-Odd\xff"]))
        value = draw(st.one_of(st.none(), st.sampled_from([b"not a date", b"", b"\xff\xfe\xfd", b"response",
                                                           b"resource", b"2025-13-45T99:99:99Z", b"x" * 2000,
                                                           b"https://ex.com/\xe9t\xe9", b"<urn:uuid:dup>"])))
        if name == b"WARC-Type" and value is None:
            value = b"unknown-type"
        return Mutation(f"{kind}:{name.decode('latin-1')}", k, True, lambda recs: assemble(
            recs[:k] + [_set_header(recs[k], name, value)] + recs[k + 1:]))
    if kind in ("http_header", "charset"):
        if kind == "charset":
            cs = draw(st.sampled_from(ODD_CHARSETS))
            name, value = b"Content-Type", draw(st.sampled_from([b"text/html; charset=", b"text/html;charset=",
                                                                 b"application/octet-stream; charset="])) + cs
        else:
            name = draw(st.sampled_from([b"Content-Type", b"Last-Modified", b"Content-Encoding", b"Location",
                                         b"Transfer-Encoding", b"Content-Length"]))
            value = draw(st.one_of(st.none(), st.sampled_from(ODD_VALUES + [b"gzip", b"chunked", b"text/plain",
                                                                              b"Tue, 99 Foo 2025 99:00:00 GMT"]),
                                   st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))))
        return Mutation(f"{kind}:{name.decode()}", k, True, lambda recs: assemble(
            recs[:k] + [_set_header(recs[k], name, value, in_http=True)] + recs[k + 1:]))
    if kind == "payload":
        enc = draw(st.sampled_from(["utf-16", "latin-1", "shift_jis", "nul", "bom", "binary", "empty"]))
        blob = draw(st.binary(max_size=200))

        def payload(recs: list[bytes]) -> bytes:
            r = recs[k]
            head_end = r.index(b"\r\n\r\n") + 4
            http_end = r.find(b"\r\n\r\n", head_end)
            if http_end < 0:
                return assemble(recs)
            body = r[http_end + 4: len(r) - _trailer(r)]
            text = body.decode("utf-8", "replace")
            new = {"utf-16": text.encode("utf-16"), "latin-1": text.encode("latin-1", "replace"),
                   "shift_jis": text.encode("shift_jis", "replace"), "nul": body.replace(b" ", b"\x00"),
                   "bom": b"\xef\xbb\xbf\xff\xfe" + body, "binary": blob, "empty": b""}[enc]
            http = _set_header(r[head_end:http_end + 4], b"Content-Length", str(len(new)).encode())
            block = http + new
            warc = _set_header(r[:head_end], b"Content-Length", str(len(block)).encode())
            return assemble(recs[:k] + [warc + block + b"\r\n\r\n"] + recs[k + 1:])
        return Mutation(f"{kind}:{enc}", k, True, payload)
    # plain_file: the same records without gzip (a .warc.gz that is not gzip), or cut members mixed in
    return Mutation(kind, None, False, lambda recs: assemble(recs, gz=False))


# ------------------------------------------------------------------ checks


def read(path: Path, backend: str) -> tuple[list[WarcPage | ReadDrop], WarcReader]:
    reader = WarcReader(path, backend=backend)
    return list(reader), reader


@cache
def baseline(fixture: str, tmp: str) -> dict[str, str]:
    """The good records' html as the unmutated seed file reads them (url -> html)."""
    sd = seed(fixture, tmp)
    path = Path(tmp) / f"seed-{fixture}.warc.gz"
    path.write_bytes(assemble(list(sd.records)))
    items, reader = read(path, "fastwarc")
    assert reader.error is None
    pages = {i.url: i.html for i in items if isinstance(i, WarcPage) and "fuzz-" in i.url}
    assert len(pages) == GOOD
    return pages


def good_urls(sd: Seed, idx: list[int]) -> set[str]:
    out = set()
    for i in idx:
        m = re.search(rb"(?im)^WARC-Target-URI:\s*(\S+)", sd.records[i])
        out.add(m.group(1).decode())
    return out


def check_reader(path: Path, sd: Seed, mut: Mutation, tally: Tally, tmp: str) -> None:
    """No traceback, valid reasons and fault kinds; the good records before (and after) the target kept."""
    base = baseline(sd.fixture, tmp)
    for backend in BACKENDS:
        items, reader = read(path, backend)  # raising here is a failure: the reader must never raise
        tally.add(f"inputs:{backend}")
        for it in items:
            if isinstance(it, ReadDrop):
                assert it.reason in schema.CORPUS_REASONS["read"], it
                tally.add(f"{backend}:drop:{it.reason}")
            else:
                assert isinstance(it, WarcPage) and it.url and isinstance(it.html, str)
        if reader.error is not None:
            assert fault_kind(reader.error) in FAULT_KINDS
            tally.add(f"{backend}:file_fault:{fault_kind(reader.error)}")
        if backend != "fastwarc":  # warcio gives up on odd real records (test_warc_backends): only no traceback
            continue
        got = {i.url: i.html for i in items if isinstance(i, WarcPage)}
        target = mut.target if mut.target is not None else 0
        before = good_urls(sd, [g for g in sd.good if g < target])
        after = good_urls(sd, [g for g in sd.good if g > target])
        if mut.target is not None:  # a plain (not gzip) .warc.gz is refused whole or read whole
            assert {u: got.get(u) for u in before} == {u: base[u] for u in before}, (mut.kind, target)
        if mut.framing:
            assert {u: got.get(u) for u in after} == {u: base[u] for u in after}, (mut.kind, target)
        kept_after = sum(got.get(u) == base[u] for u in after)
        tally.add("good_before_kept", len(before))
        tally.add("good_after_kept", kept_after)
        tally.add("good_after_lost", len(after) - kept_after)
        if len(after) - kept_after:
            tally.add(f"good_after_lost:{mut.kind}", len(after) - kept_after)
    tally.add(f"kind:{mut.kind.split(':')[0]}")


def check_build(path: Path, sd: Seed, mut: Mutation, tally: Tally, tmp: str) -> None:
    """The per-WARC build stage: counted records, known reasons, good records before the target kept."""
    articles, dropped, counters, file_errors = process_warc(path)
    tally.add("build_inputs")
    # one row per response record in the active profile's view (the counters count the part's rows, every
    # profile's: a record two profiles drop is two rows there)
    assert counters["records_in"] == articles.num_rows + dropped.num_rows
    assert counters["kept"] + counters["dropped"] >= counters["records_in"]
    for row in dropped.select(["stage", "reason"]).to_pylist():
        assert row["reason"] in schema.CORPUS_REASONS[row["stage"]], row
        tally.add(f"build:drop:{row['stage']}:{row['reason']}")
    for e in file_errors:
        assert e.get("kind", fault_kind(e["error"])) in FAULT_KINDS
        tally.add(f"build:file_fault:{e.get('kind') or fault_kind(e['error'])}")
    kept = set(articles["url"].to_pylist())
    if mut.target is not None:
        assert good_urls(sd, [g for g in sd.good if g < mut.target]) <= kept, (mut.kind, mut.target, kept)
    if mut.framing:
        assert good_urls(sd, [g for g in sd.good if g > mut.target]) <= kept, (mut.kind, mut.target, kept)
    tally.add("build_kept", len(kept))


def _run(examples: int, check: Callable[..., None], name: str, tmp: Path) -> Tally:
    tally = Tally(name)
    tdir = str(tmp)

    @fuzz_settings(examples)
    @given(data=st.data())
    def fuzz(data: st.DataObject) -> None:
        fixture = data.draw(st.sampled_from(REAL), label="fixture")
        sd = seed(fixture, tdir)
        mut = data.draw(mutations(sd), label="mutation")
        path = tmp / "input.warc.gz"
        path.write_bytes(mut.apply(list(sd.records)))
        check(path, sd, mut, tally, tdir)

    fuzz()
    tally.dump()
    return tally


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz_warc")


def test_mutated_warcs_through_the_reader(fuzz_dir: Path) -> None:
    tally = _run(300, check_reader, "warc_reader", fuzz_dir)
    assert tally.counts["inputs:fastwarc"] >= 300 and tally.counts["good_before_kept"] > 0


def test_mutated_warcs_through_the_build_stage(fuzz_dir: Path) -> None:
    tally = _run(40, check_build, "warc_build", fuzz_dir)
    assert tally.counts["build_inputs"] >= 40 and tally.counts["build_kept"] > 0


@pytest.mark.benchmark
def test_thousands_of_mutated_warcs_through_the_reader(fuzz_dir: Path) -> None:
    tally = _run(5000, check_reader, "warc_reader_bench", fuzz_dir)
    assert tally.counts["inputs:fastwarc"] >= 5000


@pytest.mark.benchmark
def test_thousands_of_mutated_warcs_through_the_build_stage(fuzz_dir: Path) -> None:
    tally = _run(2000, check_build, "warc_build_bench", fuzz_dir)
    assert tally.counts["build_inputs"] >= 2000


def test_an_empty_gzip_member_does_not_end_the_file(fuzz_dir: Path) -> None:
    """Found by the fuzzer: fastwarc took an empty gzip member (valid gzip) for the end of the file and
    the records after it were lost, uncounted; the reader now reads on after it, as warcio does."""
    sd = seed(REAL[0], str(fuzz_dir))
    recs = list(sd.records)
    path = fuzz_dir / "empty-member.warc.gz"
    path.write_bytes(assemble(recs[:2]) + gzip.compress(b"") + gzip.compress(b"") + assemble(recs[2:]))
    (fast, rf), (slow, rs) = (read(path, be) for be in BACKENDS)
    assert rf.error is None and rf.records_read == len(recs) == rs.records_read
    assert fast == slow and {i.url for i in fast if isinstance(i, WarcPage)} >= good_urls(sd, list(sd.good))


def test_a_corrupt_member_costs_its_record_not_the_rest_of_the_file(fuzz_dir: Path) -> None:
    """Found by the fuzzer: a corrupt gzip member ended the file for fastwarc, losing every record after it.
    Reading now goes on from the next whole member; the fault is still the file's (counted, with its kind)."""
    sd = seed(REAL[-1], str(fuzz_dir))
    recs = list(sd.records)
    k = sd.good[1]
    bad = bytearray(gzip.compress(recs[k], mtime=0))
    bad[len(bad) // 2] ^= 0x40
    path = fuzz_dir / "corrupt-member.warc.gz"
    path.write_bytes(assemble(recs[:k]) + bytes(bad) + assemble(recs[k + 1:]))
    items, reader = read(path, "fastwarc")
    urls = {i.url for i in items if isinstance(i, WarcPage)}
    assert good_urls(sd, [g for g in sd.good if g != k]) <= urls and good_urls(sd, [k]).isdisjoint(urls)
    assert reader.error is not None and fault_kind(reader.error) in ("corrupt_gzip", "not_warc")
    articles, _, _, file_errors = process_warc(path)
    assert good_urls(sd, [g for g in sd.good if g != k]) <= set(articles["url"].to_pylist())
    assert len(file_errors) == 1
