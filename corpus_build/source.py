"""Where WARC files come from: local paths and globs, list files, http(s) and s3 URLs, CC-NEWS months.

The one owner of the source grammar (docs/data.md "Sources"). Python API, used by `corpus build`,
`corpus fetch` and `build --recipe`:

    from forecast_env.corpus_build.source import SourceSpec, resolve_sources
    from forecast_env.corpus_build.pipeline import build_corpus

    spec = SourceSpec(cc_news="2025-03..2025-05", files_per_month=2)   # or warc=["data/*.warc.gz"]
    sources = resolve_sources(spec, cfg, workspace)   # list[Source]; listings frozen in the workspace
    summary = build_corpus(sources, workspace, config=cfg)   # streams remote sources, never stores them
    summary["counts"]["files_failed"]                         # > 0: see summary["transfer"]["failed"]

A `Source` is one file: `uri` (a local path, an http(s):// or s3:// URL), `name` (its file name, the
`warc_file` column) and, for Common Crawl files, `cc_path` (`crawl-data/CC-NEWS/...`). Which server
or mirror serves it (`corpus.source.base_url`) is an execution setting: it never enters a part key or
the corpus snapshot id, which hash the file's name, size and sha256 (computed while streaming).

CC-NEWS months (`--cc-news`): `2025-03`, `2025-03..2026-05` (inclusive), or several joined by
commas. Month M's files are listed in `BASE/crawl-data/CC-NEWS/YYYY/MM/warc.paths.gz`; the listing
read at the first build is frozen under `WS/corpus/sources/` (a current month's listing grows) and
reused until `refresh=True` (`--refresh-listing`). `files_per_month=N` / `sample=F` pick files spread
evenly over each month's listing (`spread_order`: van der Corput positions), nested (the files for N
are among those for N+1) and deterministic (a function of the listing alone).
"""

from __future__ import annotations

import contextlib
import glob
import gzip
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from forecast_env.corpus_build.stream import HttpSettings, RemoteStream, fetch_bytes
from forecast_env.errors import CorpusError

#: The Common Crawl news layout: a month's listing and the paths it may hold.
LISTING = "crawl-data/CC-NEWS/{y:04d}/{m:02d}/warc.paths.gz"
CC_PATH = re.compile(r"crawl-data/CC-NEWS/(\d{4})/(\d{2})/[A-Za-z0-9._-]+\.warc(\.gz)?")
#: File names read as a list of sources rather than as a WARC file.
LIST_SUFFIXES = (".txt", ".lst", ".list", ".paths", ".paths.gz")
URL_SCHEMES = ("http://", "https://", "s3://")


@dataclass(frozen=True, order=True)
class Source:
    """One WARC file to read (see the module docstring)."""

    name: str
    uri: str
    cc_path: str | None = None

    @property
    def kind(self) -> str:
        """`local`, `http` or `s3`."""
        if self.uri.startswith(("http://", "https://")):
            return "http"
        if self.uri.startswith("s3://"):
            return "s3"
        return "local"

    @property
    def remote(self) -> bool:
        return self.kind != "local"

    @property
    def identity(self) -> str:
        """What names the file independently of where it is served from (CC path, else the URI)."""
        return self.cc_path or self.uri


@dataclass
class SourceSpec:
    """What the user asked for: `warc` (paths, globs, list files, URLs) and/or CC-NEWS months."""

    warc: Sequence[str] = ()
    cc_news: str | None = None
    files_per_month: int | None = None
    sample: float | None = None
    refresh_listing: bool = False
    base_url: str | None = None  # overrides corpus.source.base_url
    listings: dict[str, int] = field(default_factory=dict)  # filled in: month -> files listed


# ---------------------------------------------------------------------------------------------
# grammar
# ---------------------------------------------------------------------------------------------


def parse_months(text: str) -> list[tuple[int, int]]:
    """`2025-03`, `2025-03..2026-05` (inclusive) or comma-joined items -> sorted unique (year, month)."""
    out: set[tuple[int, int]] = set()

    def month(item: str) -> tuple[int, int]:
        m = re.fullmatch(r"\s*(\d{4})-(\d{2})\s*", item)
        if not m or not 1 <= int(m.group(2)) <= 12:
            raise CorpusError(f"--cc-news {text!r}: {item.strip()!r} is not a month; write YYYY-MM, a range "
                              "YYYY-MM..YYYY-MM (inclusive), or several joined by commas, e.g. 2025-03..2026-05")
        return int(m.group(1)), int(m.group(2))

    for item in str(text).split(","):
        if not item.strip():
            continue
        if ".." in item:
            a, b = item.split("..", 1)
            lo, hi = month(a), month(b)
            if hi < lo:
                raise CorpusError(f"--cc-news {text!r}: the range {item.strip()} ends before it starts")
            y, m = lo
            while (y, m) <= hi:
                out.add((y, m))
                y, m = (y + 1, 1) if m == 12 else (y, m + 1)
        else:
            out.add(month(item))
    if not out:
        raise CorpusError(f"--cc-news {text!r}: no month given; e.g. --cc-news 2025-03..2025-05")
    return sorted(out)


def spread_order(n: int) -> list[int]:
    """Every index of a list of `n` in an order whose every prefix is spread evenly over the list.

    Position k is floor(vdc(k) * n) for the base-2 van der Corput sequence (0, 1/2, 1/4, 3/4, ...),
    repeats skipped: the first N indices are among the first N+1, and both cover the whole list.
    """
    order: list[int] = []
    seen: set[int] = set()
    k = 0
    while len(order) < n:
        v, denom, i = 0.0, 1.0, k
        while i:
            denom *= 2.0
            v += (i & 1) / denom
            i >>= 1
        idx = int(v * n)
        if idx not in seen:
            seen.add(idx)
            order.append(idx)
        k += 1
    return order


def pick_files(paths: Sequence[str], files_per_month: int | None = None, sample: float | None = None) -> list[str]:
    """The month's files to read: all, N spread evenly, or a fraction (rounded up); in listing order."""
    if files_per_month is not None and sample is not None:
        raise CorpusError("--files-per-month and --sample both given; choose one")
    n = len(paths)
    if files_per_month is not None:
        if files_per_month < 1:
            raise CorpusError(f"--files-per-month must be at least 1, got {files_per_month}")
        k = min(n, int(files_per_month))
    elif sample is not None:
        if not 0 < sample <= 1:
            raise CorpusError(f"--sample must be a fraction in (0, 1], got {sample}")
        k = min(n, math.ceil(sample * n))
    else:
        return list(paths)
    return [paths[i] for i in sorted(spread_order(n)[:k])]


def listing_url(base_url: str, year: int, month: int) -> str:
    return join_url(base_url, LISTING.format(y=year, m=month))


def join_url(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + "/" + path.lstrip("/")


def check_base_url(base_url: str) -> str:
    """The base URL, normalized, or a CorpusError saying what a base URL may be."""
    b = str(base_url).strip()
    if b.startswith(URL_SCHEMES):
        return b.rstrip("/") + "/"
    if b.startswith("file://"):
        b = b[len("file://"):]
    if Path(b).expanduser().is_dir():
        return str(Path(b).expanduser().resolve()) + "/"
    raise CorpusError(f"corpus.source.base_url {base_url!r} is not an http(s):// or s3:// URL nor an existing "
                      "folder; e.g. --set corpus.source.base_url=https://data.commoncrawl.org/")


def parse_listing(data: bytes, where: str, year: int, month: int) -> list[str]:
    """The paths of one month's `warc.paths.gz` (gzip of one path a line), each checked."""
    try:
        text = gzip.decompress(data).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{where}: not a gzip list of paths ({type(exc).__name__}); the base URL does not serve "
                          "the Common Crawl layout (crawl-data/CC-NEWS/YYYY/MM/warc.paths.gz); check "
                          "corpus.source.base_url") from exc
    paths = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        m = CC_PATH.fullmatch(line)
        if not m or (int(m.group(1)), int(m.group(2))) != (year, month):
            raise CorpusError(f"{where} line {lineno}: {line[:120]!r} is not a CC-NEWS path of {year:04d}-{month:02d} "
                              f"(crawl-data/CC-NEWS/{year:04d}/{month:02d}/NAME.warc.gz); the listing is corrupt or "
                              "the base URL is not a Common Crawl layout: rerun with --refresh-listing or fix "
                              "corpus.source.base_url")
        paths.append(line)
    return paths


def read_listing(base_url: str, year: int, month: int, settings: HttpSettings, *, limiter: Any = None,
                 client=None, sleep=None) -> list[str]:
    """Read and check month (year, month)'s listing from `base_url` (URL or folder)."""
    from forecast_env.corpus_build.stream import TransferError

    url = listing_url(base_url, year, month)
    if base_url.startswith(("http://", "https://")):
        kwargs = {"limiter": limiter, "client": client}
        if sleep is not None:
            kwargs["sleep"] = sleep
        try:
            data = fetch_bytes(url, settings, **kwargs)
        except TransferError as exc:
            if exc.kind == "http_404":
                raise CorpusError(f"no listing for {year:04d}-{month:02d} at {url} (404): the month is not published "
                                  "yet, or corpus.source.base_url is not a Common Crawl layout; choose other months "
                                  "or fix the base URL") from exc
            raise CorpusError(f"listing of {year:04d}-{month:02d} could not be read: {exc}; rerun later") from exc
    elif base_url.startswith("s3://"):
        data = _s3_bytes(url)
    else:
        p = Path(url)
        if not p.is_file():
            raise CorpusError(f"no listing for {year:04d}-{month:02d}: {p} does not exist; the folder "
                              f"{base_url} is not a Common Crawl layout (crawl-data/CC-NEWS/YYYY/MM/warc.paths.gz)")
        data = p.read_bytes()
    return parse_listing(data, url, year, month)


def _fsspec():
    try:
        import fsspec
    except ImportError as exc:
        raise CorpusError("s3:// sources need fsspec and s3fs: pip install 'forecast-env[s3]'") from exc
    return fsspec


def _require_s3() -> None:
    """Fail early, with the fix, when s3:// sources are asked for without the `[s3]` extra."""
    _fsspec()
    try:
        import s3fs  # noqa: F401
    except ImportError as exc:
        raise CorpusError("s3:// sources need s3fs: pip install 'forecast-env[s3]' (and AWS credentials for "
                          "s3://commoncrawl/; https://data.commoncrawl.org/ needs none)") from exc


def _s3_bytes(url: str) -> bytes:
    fs = _fsspec()
    try:
        with fs.open(url, "rb") as fh:
            return fh.read()
    except ImportError as exc:
        raise CorpusError("s3:// sources need s3fs: pip install 'forecast-env[s3]'") from exc
    except FileNotFoundError as exc:
        raise CorpusError(f"{url} does not exist") from exc


# ---------------------------------------------------------------------------------------------
# resolution
# ---------------------------------------------------------------------------------------------


def _is_list_file(p: str) -> bool:
    return p.startswith("@") or p.lower().endswith(LIST_SUFFIXES)


def _line_source(line: str, base_url: str, where: str, folder: Path) -> Source:
    if any(c.isspace() for c in line):
        raise CorpusError(f"{where}: {line[:120]!r} holds whitespace; write one path or URL a line")
    if line.startswith(URL_SCHEMES):
        return Source(name=line.rstrip("/").rsplit("/", 1)[-1], uri=line,
                      cc_path=_cc_path_of(line))
    if CC_PATH.fullmatch(line):
        return Source(name=line.rsplit("/", 1)[-1], uri=join_url(base_url, line), cc_path=line)
    p = Path(line).expanduser()
    if not p.is_absolute():
        p = folder / p
    if not p.is_file():
        raise CorpusError(f"{where}: {line!r} is not an existing file, a URL or a crawl-data/CC-NEWS/... path")
    return Source(name=p.name, uri=str(p.resolve()))


def _cc_path_of(url: str) -> str | None:
    m = re.search(r"crawl-data/CC-NEWS/\d{4}/\d{2}/[^/?#]+$", url)
    return m.group(0) if m and CC_PATH.fullmatch(m.group(0)) else None


def read_list_file(path: str, base_url: str) -> list[Source]:
    """A list file: one local path, URL or CC path a line (`#` comments, blank lines skipped)."""
    p = Path(path.lstrip("@")).expanduser()
    if not p.is_file():
        raise CorpusError(f"list file {p} does not exist")
    data = p.read_bytes()
    if p.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise CorpusError(f"list file {p}: not gzip ({exc})") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"list file {p}: not UTF-8 text") from exc
    out = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        out.append(_line_source(line, base_url, f"list file {p} line {lineno}", p.parent))
    return out


def _warc_item(item: str, base_url: str) -> list[Source]:
    if _is_list_file(item) and not item.startswith(URL_SCHEMES):
        return read_list_file(item, base_url)
    if item.startswith(URL_SCHEMES):
        return [Source(name=item.rstrip("/").rsplit("/", 1)[-1], uri=item, cc_path=_cc_path_of(item))]
    if CC_PATH.fullmatch(item):
        return [Source(name=item.rsplit("/", 1)[-1], uri=join_url(base_url, item), cc_path=item)]
    matches = sorted(glob.glob(str(Path(item).expanduser()), recursive=True))
    files = [Path(m) for m in matches if Path(m).is_file()]
    if not files:
        raise CorpusError(f"--warc {item!r} matches no file; check the path (quote globs), or give a URL, a "
                          "crawl-data/CC-NEWS/... path or a list file (.txt / .paths / @FILE)")
    return [Source(name=f.name, uri=str(f.resolve())) for f in files]


def sources_dir(workspace: str | Path) -> Path:
    """Where the frozen listings live: WS/corpus/sources/."""
    from forecast_env.store import Workspace

    return Workspace.at(workspace).corpus_dir / "sources"


def month_listing(year: int, month: int, base_url: str, settings: HttpSettings, workspace: str | Path | None,
                  refresh: bool = False, **http: Any) -> list[str]:
    """Month's listing: the frozen copy in the workspace, else read (and frozen when a workspace is given)."""
    from forecast_env.store import atomic_write_text

    frozen = sources_dir(workspace) / f"listing-{year:04d}-{month:02d}.txt" if workspace is not None else None
    if frozen is not None and frozen.is_file() and not refresh:
        lines = [ln for ln in frozen.read_text().splitlines() if ln.strip()]
        return parse_listing(gzip.compress("\n".join(lines).encode(), mtime=0), str(frozen), year, month)
    paths = read_listing(base_url, year, month, settings, **http)
    if frozen is not None:
        frozen.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(frozen, "".join(f"{p}\n" for p in paths))
    return paths


def resolve_sources(spec: SourceSpec | Sequence[str | Path], config: dict[str, Any] | None = None,
                    workspace: str | Path | None = None, **http: Any) -> list[Source]:
    """Every file `spec` names, unique by identity, sorted by (name, uri) (see the module docstring).

    A sequence of paths/globs/URLs is read as `SourceSpec(warc=...)`. `http` passes `client`,
    `limiter` or `sleep` to the listing reads (tests). Bad input raises CorpusError with the fix.
    """
    if not isinstance(spec, SourceSpec):
        spec = SourceSpec(warc=[str(s) for s in spec])
    settings = HttpSettings.from_config(config)
    base_url = check_base_url(spec.base_url or settings.base_url)
    found: list[Source] = []
    for item in spec.warc:
        found += _warc_item(str(item), base_url)
    if spec.cc_news:
        for y, m in parse_months(spec.cc_news):
            paths = month_listing(y, m, base_url, settings, workspace, spec.refresh_listing, **http)
            spec.listings[f"{y:04d}-{m:02d}"] = len(paths)
            for cc in pick_files(paths, spec.files_per_month, spec.sample):
                found.append(Source(name=cc.rsplit("/", 1)[-1], uri=join_url(base_url, cc), cc_path=cc))
    elif spec.files_per_month is not None or spec.sample is not None:
        raise CorpusError("--files-per-month / --sample pick files from CC-NEWS listings: give --cc-news RANGE too")
    if not found:
        raise CorpusError("no WARC files given; pass --warc 'path/*.warc.gz' or --cc-news 2025-03..2025-05")
    if any(s.kind == "s3" for s in found):
        _require_s3()
    unique: dict[str, Source] = {}
    for s in found:
        unique.setdefault(s.identity, s)
    return sorted(unique.values(), key=lambda s: (s.name, s.uri))


# ---------------------------------------------------------------------------------------------
# opening
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def open_source(source: Source, settings: HttpSettings, *, limiter: Any = None, keep_dir: str | Path | None = None,
                client=None, sleep=None, on_bytes=None) -> Iterator[BinaryIO | RemoteStream]:
    """A binary file object over the source: the local file, a `RemoteStream`, or an fsspec file."""
    if source.kind == "local":
        with open(source.uri, "rb") as fh:
            yield fh
    elif source.kind == "http":
        kwargs: dict[str, Any] = {"limiter": limiter, "client": client, "keep_dir": keep_dir, "name": source.name,
                                  "on_bytes": on_bytes}
        if sleep is not None:
            kwargs["sleep"] = sleep
        with RemoteStream(source.uri, settings, **kwargs) as s:
            yield s
    else:
        fs = _fsspec()
        try:
            fh = fs.open(source.uri, "rb")
        except ImportError as exc:
            raise CorpusError("s3:// sources need s3fs: pip install 'forecast-env[s3]'") from exc
        with fh:
            yield fh


__all__ = [
    "Source",
    "SourceSpec",
    "check_base_url",
    "listing_url",
    "month_listing",
    "open_source",
    "parse_listing",
    "parse_months",
    "pick_files",
    "read_list_file",
    "read_listing",
    "resolve_sources",
    "spread_order",
]
