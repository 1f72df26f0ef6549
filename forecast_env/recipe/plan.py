"""The dry run of a build: what it would read (files, bytes) and cost per stage, without building.

Every stage's core-hours, memory and disk come from measured rates (`PLAN_RATES`, read from the data
file `forecast_env/rates.json`: each with the benchmark command that measures it, its date and machine
state) or from the paper's figures, marked `estimate`; the plan's basis lines cite each rate by number
and the plan lists every cited rate with its command (docs/recipes.md "The dry run").
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forecast_env.corpus_build.rates import MERGE_BYTES_PER_ARTICLE, MERGE_SECONDS_PER_MILLION, merge_estimate
from forecast_env.rates import Rate, read_rates
from forecast_env.recipe.load import Recipe
from forecast_env.recipe.run import build_dir, forecastbench_files
from forecast_env.store import atomic_write_json

#: The paper's corpus: 7,163 CC-NEWS files over 15 months (2025-03..2026-05), ~1 GB each, ~20M kept
#: articles (issue 21; docs/recipes.md). Used where no listing could be read, marked "estimate".
PAPER_FILES = 7_163
PAPER_MONTHS = 15
PAPER_KEPT_ARTICLES = 20_000_000
#: Bytes of one CC-NEWS file where no HEAD answer is at hand (Common Crawl: "about 1 GB each").
EST_BYTES_PER_FILE = 1.0e9
#: Response records per GB of CC-NEWS WARC (estimate: ~28 kB per gzip-compressed HTML record).
EST_RECORDS_PER_GB = 35_000
#: Kept articles per file: the paper's 20M over its 7,163 files (English, quality, dedup).
KEPT_PER_FILE = PAPER_KEPT_ARTICLES / PAPER_FILES

_RATES = read_rates()
#: Every measured rate the plan cites, in the order the plan numbers them ([1], [2], ...). The per-WARC
#: stages (read, extract, the language gate, lang, quality, timestamps, leakage) per body path
#: (`extract.body_mode`; a part holds every profile's verdicts, so the active profile does not change
#: this cost); the embedding; IVF training; the merge: CPU s per million articles, the sum of
#: `corpus_build.rates.MERGE_SECONDS_PER_MILLION` (the model the merge line uses); keep.*: the share of
#: held-out real English articles reaching the quality stage that each profile keeps.
PLAN_RATES: dict[str, Rate] = {
    **{key: _RATES[key] for key in ("extract.trafilatura", "extract.own", "extract.longer", "embed", "ivf")},
    "merge": dataclasses.replace(_RATES["merge.cpu.keys"], value=sum(MERGE_SECONDS_PER_MILLION.values()),
                                 note="the sum of merge.cpu.*"),
    **{key: _RATES[key] for key in ("keep.paper", "keep.news")},
    # the body modes that are not the default's neighbours, numbered after the others so the default plan's
    # numbers stay put
    **{key: _RATES[key] for key in ("extract.lean", "extract.lean-no-escalation", "extract.cascade")},
    # the optional questions stage (cited only when a recipe enables it): model tokens per seed article and per
    # accepted question, and the pipeline's own CPU per seed (search, vetting, the events import)
    **{key: _RATES[key] for key in ("questions.tokens_per_seed", "questions.tokens_per_accepted",
                                    "questions.pipeline_seconds_per_seed")},
}
_RATE_KEYS = list(PLAN_RATES)
#: Peak memory of one corpus worker (rate `corpus.worker_peak`).
WORKER_PEAK_BYTES = _RATES["corpus.worker_peak"].value
#: Disk per kept article of the index (rate `index.disk`; the store's comes from `corpus_build.rates`).
INDEX_BYTES_PER_ARTICLE = _RATES["index.disk"].value
#: Searcher memory over a 10M index (rate `index.search_memory`).
INDEX_SEARCH_BYTES = _RATES["index.search_memory"].value
#: Polymarket: requests per event (1 listing share + 2 price series x windows + trades pages) and
#: closed events per month (estimates), at `events.polymarket.requests_per_second`.
EST_REQUESTS_PER_EVENT = 8
EST_EVENTS_PER_MONTH = 6_000
#: Core-hours of the events stage per month of events (estimate: the screen searches the index per event).
EST_EVENTS_CORE_HOURS_PER_MONTH = 0.05
#: HEAD requests per month in a dry run (the mean size of these stands for the month's files).
HEAD_SAMPLE_PER_MONTH = 3


def _merge_plan(kept: float, workers: int) -> dict[str, Any]:
    """The merge's estimate (`corpus_build.rates.merge_estimate`) with its keys' and store's disk."""
    est = merge_estimate(int(kept), workers=workers)
    return {**est, "keys_bytes": kept * MERGE_BYTES_PER_ARTICLE["keys_disk"],
            "store_bytes": kept * MERGE_BYTES_PER_ARTICLE["store_disk"]}


@dataclass
class MonthPlan:
    """One CC-NEWS month of a plan: its files and bytes, and where each figure came from."""

    month: str
    listed: int | None  # files in the listing (None: not read)
    picked: int
    bytes: float
    bytes_from: str  # head (n sampled) | estimate
    listing_from: str  # listing | frozen | estimate


@dataclass
class Plan:
    """The dry run's result: the files and bytes a build would read and every stage's cost."""

    recipe: str
    months: list[MonthPlan]
    local_files: int
    local_bytes: float
    stages: list[dict[str, Any]]
    notes: list[str]
    #: the quality profile and what switching to `paper` would drop (`profile_switch`)
    profile: dict[str, Any] = field(default_factory=dict)

    @property
    def files(self) -> int:
        """Files the build would read."""
        return sum(m.picked for m in self.months) + self.local_files

    @property
    def bytes(self) -> float:
        """Bytes the build would stream."""
        return sum(m.bytes for m in self.months) + self.local_bytes

    @property
    def core_hours(self) -> float:
        """The plan's total: the sum of its stages' core-hours."""
        return sum(s["core_hours"] for s in self.stages)

    @property
    def rates(self) -> list[str]:
        """The PLAN_RATES keys the stages cite, in the order they first appear."""
        return list(dict.fromkeys(k for s in self.stages for k in s.get("rates", [])))

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready data (`build --dry-run --json`)."""
        return {"recipe": self.recipe, "files": self.files, "bytes": self.bytes,
                "months": [m.__dict__ for m in self.months], "local_files": self.local_files,
                "stages": self.stages, "core_hours": self.core_hours, "notes": self.notes,
                "profile": self.profile,
                "rates": {k: _rate_dict(PLAN_RATES[k]) for k in self.rates}}


class _Heads:
    """HEAD sizes, cached in WS/build/dry-run/heads.json and paced by the source's request rate."""

    def __init__(self, path: Path, settings: Any, client: Any = None) -> None:
        import httpx

        self.path, self.settings = path, settings
        try:
            self.cache: dict[str, int] = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            self.cache = {}
        # identity: the size of the file itself, not of an encoding a CDN may choose
        self.client = client or httpx.Client(timeout=settings.timeout_s, follow_redirects=True,
                                             headers={"User-Agent": settings.user_agent,
                                                      "Accept-Encoding": "identity"})
        self._last = 0.0

    def size(self, url: str) -> int | None:
        """The size of the file at `url` (None when it cannot be had)."""
        if not url.startswith(("http://", "https://")):  # a mirror folder: the file's own size
            p = Path(url.removeprefix("file://"))
            return p.stat().st_size if p.is_file() else None
        if url in self.cache:
            return self.cache[url]
        wait = 1.0 / self.settings.requests_per_second - (time.monotonic() - self._last)
        if wait > 0:
            time.sleep(wait)
        self._last = time.monotonic()
        try:
            resp = self.client.head(url)
        except Exception:  # any failure leaves the size to the estimate
            return None
        n = resp.headers.get("Content-Length")
        if resp.status_code != 200 or n is None or not n.isdigit():
            return None
        self.cache[url] = int(n)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.path, self.cache)
        return int(n)


def plan_recipe(recipe: Recipe, workspace: str | Path, *, offline: bool = False, client: Any = None) -> Plan:
    """The dry run: files per month (listings), bytes (HEADs, cached) and every stage's cost.

    Nothing is built and the corpus state is not touched (listings read here are cached under
    `WS/build/dry-run/`, not frozen). `offline`: read nothing from the network (all estimates).
    """
    from forecast_env.corpus_build.source import (
        SourceSpec,
        check_base_url,
        join_url,
        parse_months,
        pick_files,
        read_listing,
        resolve_sources,
        sources_dir,
    )
    from forecast_env.corpus_build.stream import HttpSettings

    ws = Path(workspace)
    cache_dir = build_dir(ws) / "dry-run"
    # a dry run probes, it does not insist: one retry, a short timeout, and no more reads of a base
    # URL that could not be reached at all (every later month is then an estimate)
    settings = dataclasses.replace(HttpSettings.from_config(recipe.corpus), retries=1,
                                   timeout_s=min(HttpSettings.from_config(recipe.corpus).timeout_s, 15.0))
    base = check_base_url(settings.base_url)
    unreachable = False
    heads = None if offline else _Heads(cache_dir / "heads.json", settings, client)
    news = recipe.values["news"]
    notes: list[str] = []
    months: list[MonthPlan] = []
    for i, (y, m) in enumerate(parse_months(news["cc_news"]) if news["cc_news"] else []):
        key = f"{y:04d}-{m:02d}"
        frozen = sources_dir(ws) / f"listing-{key}.txt"
        cached = cache_dir / f"listing-{key}.txt"
        paths: list[str] | None = None
        origin = "estimate"
        for f, how in ((frozen, "frozen"), (cached, "listing")):
            if f.is_file():
                paths, origin = [ln for ln in f.read_text().splitlines() if ln.strip()], how
                break
        if paths is None and not offline and not unreachable:
            try:
                paths = read_listing(base, y, m, settings, client=client)
                cached.parent.mkdir(parents=True, exist_ok=True)
                cached.write_text("".join(f"{p}\n" for p in paths))
                origin = "listing"
            except Exception as exc:  # an unreadable listing becomes an estimate
                notes.append(f"{key}: listing not read ({str(exc)[:160]}); files estimated")
                unreachable = "404" not in str(exc)
        if paths is not None:
            picked = pick_files(paths, news["files_per_month"], news["sample"])
            listed = len(paths)
        else:
            listed = None
            est = PAPER_FILES // PAPER_MONTHS + (1 if i % PAPER_MONTHS < PAPER_FILES % PAPER_MONTHS else 0)
            n = est if news["files_per_month"] is None else min(est, news["files_per_month"])
            if news["sample"] is not None:
                n = max(1, math.ceil(est * float(news["sample"])))
            picked = [""] * n
        sizes = []
        if paths is not None and (heads is not None or not base.startswith(("http://", "https://", "s3://"))):
            heads = heads or _Heads(cache_dir / "heads.json", settings, client)
            for cc in picked[:: max(1, len(picked) // HEAD_SAMPLE_PER_MONTH)][:HEAD_SAMPLE_PER_MONTH]:
                s = heads.size(join_url(base, cc))
                if s is not None:
                    sizes.append(s)
        if not picked:
            months.append(MonthPlan(key, listed, 0, 0.0, "no files", origin))
        elif sizes:
            months.append(MonthPlan(key, listed, len(picked), len(picked) * sum(sizes) / len(sizes),
                                    f"head ({len(sizes)} sampled)", origin))
        else:
            months.append(MonthPlan(key, listed, len(picked), len(picked) * EST_BYTES_PER_FILE, "estimate", origin))
    local_files, local_bytes = 0, 0.0
    for item in news["warc"]:
        try:
            found = resolve_sources(SourceSpec(warc=[item]), recipe.corpus)
        except Exception as exc:  # a bad path is named in the plan, not a crash
            notes.append(f"{item}: {str(exc)[:120]}")
            continue
        for src in found:
            local_files += 1
            if src.kind == "local" and Path(src.uri).is_file():
                local_bytes += Path(src.uri).stat().st_size
            else:
                size = heads.size(src.uri) if heads is not None and src.kind == "http" else None
                local_bytes += size if size is not None else EST_BYTES_PER_FILE
    plan = Plan(recipe.name, months, local_files, local_bytes, [], notes)
    plan.profile = profile_switch(recipe, ws)
    plan.stages = _stage_costs(recipe, plan)
    return plan


def _ref(plan_rate_key: str) -> str:
    """A stage's citation of one rate: its script and the number of its command in the plan's list."""
    return f"{PLAN_RATES[plan_rate_key].script()} [{_RATE_KEYS.index(plan_rate_key) + 1}]"


def _rate_dict(rate: Rate) -> dict[str, Any]:
    """A cited rate as the plan's JSON shows it."""
    return {"value": rate.value, "unit": rate.unit, "pages": rate.measured_on, "section": rate.section,
            "command": rate.command, "script": rate.script()}


def profile_switch(recipe: Recipe, workspace: str | Path, to: str = "paper") -> dict[str, Any]:
    """What switching the recipe's quality profile to `to` would drop.

    Where the workspace holds a corpus built with the recipe's profile, counted from the parts' stored
    verdicts (every part holds every profile's quality rows): the store's kept articles that `to`
    drops, per reason (`from: "parts"`). A build with another profile: the records the recipe's profile
    passes at the quality stage that `to` drops (before the time and dedup stages; `from:
    "parts, quality stage"`). No build: the expected share from the measured keep rates (`from:
    "expected"`, PLAN_RATES keep.*). Never reads a WARC."""
    from forecast_env.corpus_build.quality import active_profile

    active = active_profile(recipe.corpus.get("quality"))
    out: dict[str, Any] = {"active": active, "to": to}
    if active == to:
        return out | {"from": "same profile"}
    ws = Path(workspace)
    built = _built_switch(ws, active, to)
    if built is not None:
        return out | built
    keep_active, keep_to = PLAN_RATES[f"keep.{active}"].value, PLAN_RATES[f"keep.{to}"].value
    return out | {"from": "expected", "share": max(0.0, 1.0 - keep_to / keep_active),
                  "rates": [f"keep.{active}", f"keep.{to}"]}


def _built_switch(ws: Path, active: str, to: str) -> dict[str, Any] | None:
    """`profile_switch` from a build in `ws` (None when there is none, or its parts are gone)."""
    import polars as pl

    from forecast_env.corpus_build.quality import active_profile

    try:
        manifest = json.loads((ws / "corpus" / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    paths = [ws / "corpus" / p for ps in (manifest.get("parts") or {}).values() for p in ps]
    paths = [p for p in paths if p.is_file() and "profile" in pl.read_parquet_schema(p)]
    if not paths:
        return None
    rows = pl.concat([pl.scan_parquet(p).filter(pl.col("stage") == "quality").select(["doc_id", "reason", "profile"])
                      .collect() for p in paths], how="vertical_relaxed")
    theirs = rows.filter(pl.col("profile") == to)
    built_with = active_profile((manifest.get("config") or {}).get("quality"))
    if built_with == active:
        shards = sorted((ws / "corpus" / "articles").glob("????-??.parquet"))
        kept = pl.concat([pl.read_parquet(p, columns=["doc_id"]) for p in shards]) if shards else \
            pl.DataFrame({"doc_id": []}, schema={"doc_id": pl.Utf8})
        hit = theirs.join(kept, on="doc_id", how="semi")
        base, where = kept.height, "parts"
    else:  # the store is another profile's: count at the quality stage, from the parts alone
        hit = theirs.join(rows.filter(pl.col("profile") == active).select("doc_id"), on="doc_id", how="anti")
        base, where = None, "parts, quality stage"
    counts = dict(sorted(((str(r), int(n)) for r, n in hit["reason"].value_counts().iter_rows()),
                         key=lambda rn: (-rn[1], rn[0])))
    return {"from": where, "built_with": built_with, "workspace": str(ws), "kept": base,
            "drops": sum(counts.values()), "by_reason": counts,
            "share": (sum(counts.values()) / base) if base else None}


def _stage_costs(recipe: Recipe, plan: Plan) -> list[dict[str, Any]]:
    """Each stage's cost; `rates` names the PLAN_RATES it rests on (its basis line cites their commands)."""
    files, nbytes = plan.files, plan.bytes
    records = nbytes / 1e9 * EST_RECORDS_PER_GB
    active = plan.profile.get("active") or "paper"
    # the paper's kept rate is its thresholds'; another profile keeps more (or fewer) of the articles
    scale = PLAN_RATES[f"keep.{active}"].value / PLAN_RATES["keep.paper"].value
    kept = files * KEPT_PER_FILE * scale
    workers = int(recipe.values["news"]["workers"] or recipe.corpus.get("execution", {}).get("workers") or 1)
    merge = _merge_plan(kept, workers)
    from forecast_env.corpus_build.pipeline import body_mode_of

    body_mode = body_mode_of(recipe.corpus)
    extract = f"extract.{body_mode}"
    extract_rate = PLAN_RATES[extract].value
    rps = float(recipe.events["polymarket"]["requests_per_second"]) or 5.0
    since, before = recipe.date("polymarket.closed_since"), recipe.date("polymarket.closed_before")
    n_months = ((before.year - since.year) * 12 + before.month - since.month) if since and before else PAPER_MONTHS
    requests = max(1, n_months) * EST_EVENTS_PER_MONTH * EST_REQUESTS_PER_EVENT
    est = "estimate"
    kept_basis = f"{kept:,.0f} kept ({KEPT_PER_FILE:,.0f}/file, the paper's rate" + (
        f", x {scale:.3f} for the {active} profile: its share of held-out articles kept over paper's, "
        f"{PLAN_RATES['keep.paper'].script()} [{_RATE_KEYS.index('keep.paper') + 1}, "
        f"{_RATE_KEYS.index(f'keep.{active}') + 1}])"
        if active != "paper" else ")")
    embed, ivf = PLAN_RATES["embed"], PLAN_RATES["ivf"]
    questions = [_questions_cost(recipe)] if recipe.questions_enabled else []
    forecastbench = [forecastbench_cost(recipe)] if recipe.forecastbench_enabled else []
    return [
        {"stage": "fetch", "core_hours": 0.0, "wall_hours": requests / rps / 3600, "memory": 0.3e9,
         "disk": requests * 20e3, "basis": f"{requests:,} requests at {rps:g}/s ({est}: events per month)",
         "rates": []},
        {"stage": "corpus", "core_hours": records / extract_rate / 3600, "memory": workers * WORKER_PEAK_BYTES,
         "disk": merge["store_bytes"],
         "basis": f"{workers} worker(s); {records:,.0f} records ({est}: {EST_RECORDS_PER_GB:,}/GB) at "
                  f"{extract_rate:g}/s/core ({body_mode} body, {PLAN_RATES[extract].measured_on}; {_ref(extract)}); "
                  + kept_basis,
         "rates": [extract] + ([f"keep.{active}", "keep.paper"] if active != "paper" else [])},
        {"stage": "merge", "core_hours": merge["cpu_hours"], "memory": merge["peak_memory_bytes"],
         "disk": merge["keys_bytes"],
         "basis": f"corpus_build.rates.merge_estimate ({PLAN_RATES['merge'].value:g} "
                  f"{PLAN_RATES['merge'].unit}, {PLAN_RATES['merge'].measured_on}, out of core; {_ref('merge')})",
         "rates": ["merge"]},
        {"stage": "index", "core_hours": kept / embed.value / 3600 + kept * ivf.value / 3600,
         "memory": INDEX_SEARCH_BYTES + 2e9, "disk": kept * INDEX_BYTES_PER_ARTICLE,
         "basis": f"embedding {embed.value:g} {embed.unit} (int8-static ONNX, {embed.measured_on}; {_ref('embed')}) "
                  f"+ IVF training ({ivf.value * 1e6:g} core-s per million articles, {ivf.measured_on}; {_ref('ivf')})",
         "rates": ["embed", "ivf"]},
        {"stage": "events", "core_hours": EST_EVENTS_CORE_HOURS_PER_MONTH * max(1, n_months), "memory": 2e9,
         "disk": 0.5e9, "basis": f"{est}: the screen searches the index per scheduled event", "rates": []},
        *forecastbench,
        *questions,
        {"stage": "audit", "core_hours": 0.1, "memory": 2e9, "disk": 0.01e9, "basis": f"{est}", "rates": []},
        {"stage": "release", "core_hours": 0.0, "memory": 0.5e9, "disk": 0.001e9, "basis": "one JSON file",
         "rates": []},
    ]


#: Disk per ForecastBench event (its rows in the events tables and the items table; estimate).
EST_FORECASTBENCH_BYTES_PER_EVENT = 2e3


def forecastbench_cost(recipe: Recipe) -> dict[str, Any]:
    """The forecastbench stage's row: its rounds, their files under `forecastbench.repo`, and the candidate events
    those rounds give, counted as the import counts them (`forecastbench_import.import_rounds` over the rounds read
    by the import's own reader: market questions once per round they appear in, dataset items once per horizon,
    combination rows and rows without a question left out; its filters, labels, screen and Polymarket duplicates
    then drop some). Reading the rounds' JSON is the whole cost (no screen, no model). Core-hours at the events
    stage's per-event estimate."""
    from forecast_env.envs.events.forecastbench import read_rounds
    from forecast_env.envs.events.forecastbench_import import import_rounds, parse_rounds
    from forecast_env.envs.events.splits import Splits

    repo = recipe.forecastbench_repo
    assert repo is not None  # load_recipe refuses an enabled block without it
    rounds = recipe.get("forecastbench.rounds")
    files = forecastbench_files(repo, rounds)
    every = forecastbench_files(repo)
    read = read_rounds(repo, *parse_rounds(rounds))
    fb = recipe.events["forecastbench"]
    imp = import_rounds(read, Splits.from_config({"splits": fb["splits"]}), {},
                        int(recipe.events["schedule"]["buffer_days"]))
    events, due = imp.n_in, [r.due_date for r in read]
    nbytes = sum(size for _, size, _ in files)
    per_event = EST_EVENTS_CORE_HOURS_PER_MONTH / EST_EVENTS_PER_MONTH
    span = f"{due[0]}..{due[-1]}" if due else "none"
    basis = (f"{len(due)} round(s) {span}, {len(files)} files ({_human(nbytes)}) under {repo / 'datasets'}; "
             f"{events:,} candidate events (market questions once per round, dataset items per horizon; before the "
             "filters, labels, screen and Polymarket duplicates)")
    if len(every) > len(files):
        basis += (f"; the labels and home splits read every round's files ({len(every)}, "
                  f"{_human(sum(size for _, size, _ in every))})")
    if imp.errors:
        basis += f"; {len(imp.errors)} file problem(s): {'; '.join(imp.errors[:2])}" + ("; ..." if len(imp.errors) > 2
                                                                                       else "")
    return {"stage": "forecastbench", "core_hours": events * per_event, "memory": 2e9,
            "disk": events * EST_FORECASTBENCH_BYTES_PER_EVENT, "rounds": due, "files": len(files),
            "bytes": nbytes, "events": events, "file_problems": list(imp.errors), "model_tokens": 0,
            "basis": basis + f"; estimate: the events stage's {per_event * 3600:.2g} core-s per event, no model",
            "rates": []}


#: Disk per seed of the questions stage (the recording, drafts and questions files; estimate).
EST_QUESTIONS_BYTES_PER_SEED = 50e3


def _questions_cost(recipe: Recipe) -> dict[str, Any]:
    """The questions stage's row: seeds = question dates x seeds per date x routes; the model's tokens and the
    pipeline's own CPU from the measured rates."""
    from forecast_env.questions.generate import parse_dates, question_dates

    cfg = recipe.questions
    first, last = parse_dates(str(recipe.get("questions.dates")))
    n_dates = len(question_dates(first, last, int(cfg["dates"]["every_days"])))
    per_date, routes = int(cfg["seeds"]["per_date"]), list(cfg["routes"])
    seeds = n_dates * per_date * len(routes)
    per_seed, per_accepted = PLAN_RATES["questions.tokens_per_seed"], PLAN_RATES["questions.tokens_per_accepted"]
    cpu = PLAN_RATES["questions.pipeline_seconds_per_seed"]
    tokens = seeds * per_seed.value
    return {"stage": "questions", "core_hours": seeds * cpu.value / 3600, "memory": INDEX_SEARCH_BYTES + 1e9,
            "disk": seeds * EST_QUESTIONS_BYTES_PER_SEED, "seeds": seeds, "model_tokens": tokens,
            "accepted": tokens / per_accepted.value,
            "basis": f"{seeds:,} seeds ({n_dates} question dates x {per_date} per date x {len(routes)} route(s)); "
                     f"{tokens:,.0f} model tokens at {per_seed.value:g} {per_seed.unit} ({_ref('questions.tokens_per_seed')}), "
                     f"~{tokens / per_accepted.value:,.0f} accepted at {per_accepted.value:,.0f} "
                     f"{per_accepted.unit} ({_ref('questions.tokens_per_accepted')}); the pipeline's own CPU "
                     f"{cpu.value:g} {cpu.unit} ({_ref('questions.pipeline_seconds_per_seed')}); the model "
                     f"({cfg['llm']['model'] or 'replayed'}) runs elsewhere, not in core-h",
            "rates": ["questions.tokens_per_seed", "questions.tokens_per_accepted",
                      "questions.pipeline_seconds_per_seed"]}


def _human(n: float) -> str:
    """Bytes in decimal units (`7.2 TB`)."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{n:,.0f} B"
        n /= 1000
    return f"{n}"


def _render_profile(profile: Mapping[str, Any]) -> list[str]:
    """The plan's lines on the quality profile and what switching to `paper` would drop."""
    if not profile:
        return []
    active, to = profile["active"], profile["to"]
    head = f"  quality profile: {active}" + (" (the default)" if active == _default_profile() else "")
    if profile.get("from") == "same profile":
        return [head + f"; {to} is the paper's thresholds, for replication"]
    switch = f"switching to {to} (--set quality.profile={to}, the paper's thresholds) would drop"
    if profile["from"] == "expected":
        keys = profile["rates"]
        return [head + f"; no build in the workspace: {switch} about {100 * profile['share']:.1f}% of the kept "
                f"articles (expected: {to} keeps {100 * PLAN_RATES[keys[1]].value:.1f}% of held-out real English "
                f"articles, {active} {100 * PLAN_RATES[keys[0]].value:.1f}%; {PLAN_RATES[keys[0]].script()} "
                f"[{', '.join(str(n) for n in sorted(_RATE_KEYS.index(k) + 1 for k in keys))}])"]
    reasons = ", ".join(f"{r} {n:,}" for r, n in profile["by_reason"].items()) or "none"
    if profile["from"] == "parts":
        what = (f"{profile['drops']:,} of the {profile['kept']:,} kept articles"
                + (f" ({100 * profile['share']:.1f}%)" if profile["share"] is not None else ""))
    else:
        what = (f"{profile['drops']:,} records that pass {active}'s quality filters (before time and dedup; "
                f"the build in the workspace used {profile['built_with']})")
    return [head + f"; {switch} {what}, from the parts' stored verdicts (the merge reruns, no WARC is "
            f"re-extracted): {reasons}"]


def _default_profile() -> str:
    """The quality profile a recipe gets when it names none."""
    from forecast_env.corpus_build.quality import DEFAULT_PROFILE

    return DEFAULT_PROFILE


def render_plan(plan: Plan) -> str:
    """The dry-run plan as text (the README shows the dojo one)."""
    lines = [f"recipe {plan.recipe}: {plan.files:,} files, {_human(plan.bytes)}"
             + (" (marked: estimate)" if any(m.bytes_from == "estimate" for m in plan.months) else "")]
    if plan.months:
        lines.append(f"  {'month':7s} {'listed':>7s} {'files':>6s} {'bytes':>10s}  from")
        for m in plan.months:
            listed = f"{m.listed:,}" if m.listed is not None else "?"
            lines.append(f"  {m.month:7s} {listed:>7s} {m.picked:>6,} {_human(m.bytes):>10s}  "
                         f"files: {m.listing_from}; bytes: {m.bytes_from}")
    if plan.local_files:
        lines.append(f"  local/URL files: {plan.local_files} ({_human(plan.local_bytes)})")
    width = max([8, *(len(s["stage"]) for s in plan.stages)])  # `questions`, when a recipe enables it
    lines.append(f"  {'stage':{width}s} {'core-h':>9s} {'memory':>10s} {'disk':>10s}  basis")
    total_core = total_disk = 0.0
    for s in plan.stages:
        total_core += s["core_hours"]
        total_disk += s["disk"]
        extra = f" (~{s['wall_hours']:.1f} h wall, polite)" if "wall_hours" in s else ""
        lines.append(f"  {s['stage']:{width}s} {s['core_hours']:9.1f} {_human(s['memory']):>10s} {_human(s['disk']):>10s}  "
                     f"{s['basis']}{extra}")
    lines.append(f"  total: {total_core:,.0f} core-hours, {_human(total_disk)} on disk (WARC files are streamed, "
                 "not stored)")
    lines += _render_profile(plan.profile)
    cited = list(dict.fromkeys([*plan.rates, *plan.profile.get("rates", [])]))
    if cited:
        lines.append("  rates, from forecast_env/rates.json (benchmarks/RESULTS.md shows each; its log the history):")
        for key in sorted(cited, key=_RATE_KEYS.index):
            r = PLAN_RATES[key]
            lines.append(f"  [{_RATE_KEYS.index(key) + 1}] {key} = {r.value:.4g} {r.unit}, {r.measured_on} "
                         f"({r.date}, {r.state}; {r.section}): {r.command}")
    lines += [f"  note: {n}" for n in plan.notes[:20]]
    if len(plan.notes) > 20:
        lines.append(f"  note: ... and {len(plan.notes) - 20} more")
    return "\n".join(lines)
