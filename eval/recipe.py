"""A whole benchmark from one recipe: events fetch, corpus, index, events, audit, release (docs/recipes.md).

A *recipe* is a validated config (unknown keys refused, values type-checked) that names what to
build: the Polymarket window, the CC-NEWS months (or local WARC paths), the splits, the audit and
the release, plus any `corpus` / `events` / `env` settings. Packaged recipes: `dojo` (the paper's
15 months) and `small` (2 files per month over 3 months). `run_recipe` runs the stages in order;
each one writes a record `WS/build/<stage>.json` holding the fingerprint of its inputs when it
finishes, and is skipped when that record matches and its artifact is on disk, so a second run does
nothing and a killed run resumes at the stage it was in (each stage is itself resumable).
`plan_recipe` is the dry run: files, bytes and the cost of every stage, without building.

Python API:

    from forecast_env.eval.recipe import load_recipe, run_recipe, plan_recipe
    recipe = load_recipe("small", overrides=["recipe.news.files_per_month=1"])
    outcome = run_recipe(recipe, "ws")          # outcome.exit_status: see EXIT_*
    print(render_plan(plan_recipe(recipe, "ws")))
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from forecast_env.config import config_hash, flatten_keys, load_config, parse_override, route_overrides
from forecast_env.enums import ENGINES, SPLITS
from forecast_env.errors import DISK_FULL_EXIT, ConfigError
from forecast_env.store import Workspace, atomic_write_json

# ---------------------------------------------------------------------------------------------
# Exit statuses of `forecast-env build` (docs/recipes.md "Exit statuses")
# ---------------------------------------------------------------------------------------------

EXIT_OK = 0  #: built (or already built); the audit passed or was inconclusive
EXIT_INTERNAL = 1  #: a bug (the CLI's status for an internal error)
EXIT_BAD_INPUT = 2  #: a bad recipe, option or input: one line names it and the fix
EXIT_AUDIT_FAIL = 3  #: everything built, the audit FAILED: no release is written (see WS/audit/audit.md)
EXIT_ITEMS_FAILED = 4  #: some files or Polymarket items could not be fetched (rerun; or --allow-failed)
EXIT_DISK_FULL = DISK_FULL_EXIT  #: the disk is full: free space and rerun (the CLI maps every command's ENOSPC)

STAGES = ("fetch", "corpus", "index", "events", "audit", "release")
RECORD_VERSION = 1
SECTIONS = ("corpus", "events", "env")

# ---------------------------------------------------------------------------------------------
# The recipe's keys
# ---------------------------------------------------------------------------------------------

_NONE = type(None)
#: Every recipe key (dotted) and the types its value may have; `corpus`, `events`, `env` are section
#: mappings validated by their own config sections.
RECIPE_KEYS: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "description": (str,),
    "polymarket.cache": (str,),
    "polymarket.closed_since": (str, date, _NONE),
    "polymarket.closed_before": (str, date, _NONE),
    "polymarket.max_pages": (int, _NONE),
    "news.cc_news": (str, _NONE),
    "news.files_per_month": (int, _NONE),
    "news.sample": (float, int, _NONE),
    "news.warc": (list,),
    "news.workers": (int, _NONE),
    "news.engine": (str,),
    "splits.train.start": (str, date),
    "splits.train.end": (str, date),
    "splits.eval.start": (str, date),
    "splits.eval.end": (str, date),
    "audit.split": (str,),
    "audit.checks": (list,),
    "audit.settings": (dict,),
    "release.split": (str,),
    "release.name": (str, _NONE),
    "release.out": (str,),
}
_CHOICES = {"news.engine": ENGINES, "audit.split": SPLITS,
            "release.split": ("train", "eval")}
_DEFAULTS: dict[str, Any] = {
    "name": "", "description": "",
    "polymarket": {"cache": "polymarket", "closed_since": None, "closed_before": None, "max_pages": None},
    "news": {"cc_news": None, "files_per_month": None, "sample": None, "warc": [], "workers": None,
             "engine": "local"},
    "splits": None,  # required: every recipe states its splits
    "audit": {"split": "eval", "checks": [], "settings": {}},
    "release": {"split": "eval", "name": None, "out": "release"},
    "corpus": {}, "events": {}, "env": {},
}


def recipe_names() -> list[str]:
    """The packaged recipes (`forecast_env/eval/recipes/*.yaml`)."""
    folder = resources.files("forecast_env.eval").joinpath("recipes")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml"))


@dataclass
class Recipe:
    """A validated recipe and the section configs it implies (splits inside `events`)."""

    values: dict[str, Any]
    corpus: dict[str, Any]
    events: dict[str, Any]
    env: dict[str, Any]
    source: str  # the recipe's name or file

    @property
    def name(self) -> str:
        return str(self.values.get("name") or Path(self.source).stem)

    def get(self, dotted: str) -> Any:
        cur: Any = self.values
        for part in dotted.split("."):
            cur = cur[part]
        return cur


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v and key not in RECIPE_KEYS:
            out.update(_flatten(v, f"{key}."))
        else:
            out[key] = v
    return out


def _set(d: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    cur = d
    for p in parts[:-1]:
        if not isinstance(cur.get(p), dict):
            cur[p] = {}
        cur = cur[p]
    cur[parts[-1]] = value


def _check_value(key: str, value: Any, where: str) -> Any:
    kinds = RECIPE_KEYS[key]
    if isinstance(value, bool) or not isinstance(value, kinds):
        want = " or ".join("null" if k is _NONE else k.__name__ for k in kinds)
        raise ConfigError(f"{where}: recipe key {key!r} must be {want}, got {value!r}")
    if key in _CHOICES and value not in _CHOICES[key]:
        raise ConfigError(f"{where}: recipe key {key!r} = {value!r}; choose one of {', '.join(_CHOICES[key])}")
    if isinstance(value, date):
        value = value.isoformat()
    if key.startswith(("splits.", "polymarket.closed_")) and value is not None:
        try:
            date.fromisoformat(value)
        except ValueError:
            raise ConfigError(f"{where}: recipe key {key!r} = {value!r} is not a date (YYYY-MM-DD)") from None
    if key == "news.warc" and not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: recipe key 'news.warc' must be a list of paths, globs or URLs")
    return value


def _merge_recipe(values: dict[str, Any], update: Mapping[str, Any], where: str) -> None:
    for key, value in _flatten(update).items():
        head = key.split(".", 1)[0]
        if head in SECTIONS:
            values.setdefault(head, {})
            if key == head:
                if not isinstance(value, Mapping):
                    raise ConfigError(f"{where}: recipe key {head!r} must be a mapping of {head} settings")
                values[head] = _deep_update(values[head], value)
            else:
                _set(values[head], key[len(head) + 1:], value)
            continue
        if key not in RECIPE_KEYS:
            allowed = sorted({k.split(".")[0] for k in RECIPE_KEYS} | set(SECTIONS))
            near = [k for k in RECIPE_KEYS if k.startswith(head + ".")]
            raise ConfigError(f"{where}: unknown recipe key {key!r}; "
                              + (f"keys under {head}: {', '.join(near)}" if near else f"allowed: {', '.join(allowed)}"))
        _set(values, key, _check_value(key, value, where))


def _deep_update(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for k, v in update.items():
        out[k] = _deep_update(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def _read_recipe(name_or_file: str | Path) -> tuple[dict[str, Any], str]:
    path = Path(name_or_file)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ConfigError(f"recipe file {path} does not exist; give a file or one of: {', '.join(recipe_names())}")
        text, where = path.read_text(), str(path)
    else:
        if str(name_or_file) not in recipe_names():
            raise ConfigError(f"no recipe {str(name_or_file)!r}; packaged recipes: {', '.join(recipe_names())} "
                              "(or give a YAML file)")
        text = resources.files("forecast_env.eval").joinpath("recipes", f"{name_or_file}.yaml").read_text()
        where = f"recipe {name_or_file}"
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the top level must be a mapping of recipe keys")
    return data, where


def load_recipe(name_or_file: str | Path, overrides: Sequence[str] = ()) -> Recipe:
    """A packaged recipe by name, or a recipe YAML file, with `--set` overrides; validated.

    An override `recipe.KEY=VALUE` sets a recipe key (`recipe.news.files_per_month=3`); any other is
    routed to the corpus, events or env section as the other commands route theirs.
    """
    data, where = _read_recipe(name_or_file)
    values = copy.deepcopy(_DEFAULTS)
    _merge_recipe(values, data, where)
    mine: list[tuple[str, Any, str]] = []
    theirs: list[tuple[str, Any, str]] = []
    for item in overrides:
        key, value = parse_override(item)
        (mine if key.startswith("recipe.") else theirs).append((key, value, item))
    for key, value, item in mine:
        _merge_recipe(values, {key[len("recipe."):]: value}, f"--set {item}")
    if not isinstance(values.get("splits"), dict) or set(values["splits"]) != {"train", "eval"}:
        raise ConfigError(f"{where}: a recipe must state its splits: splits: {{train: {{start, end}}, "
                          "eval: {start, end}} (dates, end exclusive)")
    for split in ("train", "eval"):
        for edge in ("start", "end"):
            if values["splits"][split].get(edge) is None:
                raise ConfigError(f"{where}: splits.{split}.{edge} is missing")
    news = values["news"]
    if not news["cc_news"] and not news["warc"]:
        raise ConfigError(f"{where}: the recipe names no news: set news.cc_news (e.g. 2025-03..2025-05) or "
                          "news.warc (paths, globs or URLs)")
    if news["cc_news"]:
        from forecast_env.corpus_build.source import parse_months

        parse_months(news["cc_news"])  # a bad month is bad input now, not after the Polymarket fetch
    routed = route_overrides([item for _, _, item in theirs], SECTIONS)
    sections = {}
    for section in SECTIONS:
        given = flatten_keys(values[section])
        if section == "events":
            given.update({f"splits.{s}.{e}": values["splits"][s][e] for s in ("train", "eval") for e in ("start", "end")})
        given.update(dict(parse_override(o) for o in routed[section]))  # --set after the recipe's own
        sections[section] = load_config(section, overrides=given)
    return Recipe(values, sections["corpus"], sections["events"], sections["env"], str(name_or_file))


# ---------------------------------------------------------------------------------------------
# Stage records ("already done")
# ---------------------------------------------------------------------------------------------


def build_dir(workspace: str | Path) -> Path:
    """Where the stage records live: WS/build/."""
    return Path(workspace) / "build"


def _record_path(workspace: Path, stage: str) -> Path:
    return build_dir(workspace) / f"{stage}.json"


def read_record(workspace: str | Path, stage: str) -> dict[str, Any] | None:
    """The finished-stage record of `stage` (None when the stage has not finished)."""
    path = _record_path(Path(workspace), stage)
    try:
        rec = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return rec if isinstance(rec, dict) and rec.get("version") == RECORD_VERSION else None


def _fingerprint(inputs: Mapping[str, Any]) -> str:
    return config_hash(dict(inputs))


@dataclass
class StageResult:
    stage: str
    status: str  # done | skipped | failed_items | audit_fail | not_run
    seconds: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    cpu_seconds: float = 0.0  # this process and its finished worker processes (pools), user + system


def _cpu_seconds() -> float:
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@dataclass
class BuildOutcome:
    """What `run_recipe` did: one result per stage and the exit status (EXIT_*)."""

    workspace: str
    stages: list[StageResult]
    exit_status: int
    verdict: str | None = None
    release: str | None = None

    @property
    def ran(self) -> list[str]:
        return [s.stage for s in self.stages if s.status not in ("skipped", "not_run")]


# ---------------------------------------------------------------------------------------------
# The stages
# ---------------------------------------------------------------------------------------------


def polymarket_dir(recipe: Recipe, workspace: Path) -> Path:
    """The recipe's Polymarket cache folder (relative paths are under the workspace)."""
    p = Path(recipe.get("polymarket.cache")).expanduser()
    return p if p.is_absolute() else workspace / p


def _iso(value: Any) -> date | None:
    return None if value is None else date.fromisoformat(str(value))


def source_spec(recipe: Recipe) -> Any:
    """The corpus sources the recipe names, as a `corpus_build.source.SourceSpec`."""
    from forecast_env.corpus_build.source import SourceSpec

    news = recipe.values["news"]
    return SourceSpec(warc=list(news["warc"]), cc_news=news["cc_news"], files_per_month=news["files_per_month"],
                      sample=None if news["sample"] is None else float(news["sample"]))


class _Runner:
    def __init__(self, recipe: Recipe, workspace: Path, progress: bool, allow_failed: bool,
                 say: Callable[[str], None]) -> None:
        self.recipe, self.ws, self.progress, self.allow_failed, self.say = recipe, workspace, progress, allow_failed, say
        self.results: list[StageResult] = []
        self.prints: dict[str, str] = {}  # stage -> fingerprint of this run

    def stage(self, name: str, inputs: Mapping[str, Any], artifact: Path | None,
              work: Callable[[], tuple[dict[str, Any], bool]]) -> StageResult:
        """Skip `name` when its record matches `inputs` (and `artifact` exists); else run `work`.

        `work` returns (result, complete): an incomplete result (failed items) is not recorded as
        done unless --allow-failed, so a rerun retries the items.
        """
        fp = _fingerprint({"stage": name, **inputs})
        self.prints[name] = fp
        rec = read_record(self.ws, name)
        if rec is not None and rec.get("fingerprint") == fp and (artifact is None or artifact.exists()):
            res = StageResult(name, "skipped", 0.0, rec.get("result") or {}, "already done")
            self.say(f"[{name}] already done ({_record_path(self.ws, name)}); skipped")
            self.results.append(res)
            return res
        self.say(f"[{name}] running")
        t0, c0 = time.perf_counter(), _cpu_seconds()
        result, complete = work()
        dt, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        status = "done" if complete else "failed_items"
        if complete or self.allow_failed:
            atomic_write_json(_record_path(self.ws, name), {
                "version": RECORD_VERSION, "stage": name, "fingerprint": fp, "inputs": dict(inputs),
                "result": result, "seconds": round(dt, 3), "complete": complete,
                "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        res = StageResult(name, status, dt, result, cpu_seconds=cpu)
        self.say(f"[{name}] {status} in {dt:.1f}s ({cpu:.1f} CPU s)")
        self.results.append(res)
        return res


def run_recipe(recipe: Recipe, workspace: str | Path, *, progress: bool = True, allow_failed: bool = False,
               say: Callable[[str], None] = print, stop_after: str | None = None) -> BuildOutcome:
    """Build the recipe's benchmark in `workspace`: every stage not already done, in order.

    `stop_after` ends the run after that stage (tests of a killed run). Bad input raises the
    project's errors (the CLI exits 2); the outcome's `exit_status` is one of the EXIT_* values.
    """
    ws = Workspace.at(workspace, create=True).root
    build_dir(ws).mkdir(parents=True, exist_ok=True)
    r = _Runner(recipe, ws, progress, allow_failed, say)
    cache = polymarket_dir(recipe, ws)
    failed_items = False

    # 1. Polymarket events (resumable; its own fetch_state.json records the items)
    pm = recipe.values["polymarket"]
    fetch_inputs = {"closed_since": pm["closed_since"], "closed_before": pm["closed_before"],
                    "max_pages": pm["max_pages"], "cache": str(cache),
                    "polymarket": {k: v for k, v in recipe.events["polymarket"].items()
                                   if k not in ("gamma_url", "clob_url", "data_url", "requests_per_second",
                                                "max_retries", "timeout_seconds", "backoff_seconds",
                                                "max_backoff_seconds", "backoff_jitter")}}

    def fetch() -> tuple[dict[str, Any], bool]:
        from forecast_env.envs.events.polymarket.client import PolymarketClient

        with PolymarketClient(cache, recipe.events) as client:
            s = client.fetch_all(closed_since=_iso(pm["closed_since"]), closed_before=_iso(pm["closed_before"]),
                                 max_pages=pm["max_pages"], progress=progress)
        failed = int(s["prices_failed"]) + int(s["trades_failed"])
        keep = ("events", "events_selected", "markets", "markets_skipped", "price_series", "trade_histories",
                "prices_failed", "trades_failed", "trades_truncated", "requests")
        return {k: s[k] for k in keep} | {"failures": s["failures"][:5]}, failed == 0

    res = r.stage("fetch", fetch_inputs, cache / "gamma", fetch)
    failed_items |= res.status == "failed_items"
    if stop_after == "fetch":
        return _outcome(r, ws, failed_items)

    # 2. the corpus (streamed from the sources; the listings are frozen in the workspace)
    from forecast_env.corpus_build.pipeline import build_corpus, snapshot_config_hash
    from forecast_env.corpus_build.source import resolve_sources

    sources = resolve_sources(source_spec(recipe), recipe.corpus, ws)
    corpus_inputs = {"files": sorted(s.identity for s in sources), "config": snapshot_config_hash(recipe.corpus)}

    def corpus() -> tuple[dict[str, Any], bool]:
        news = recipe.values["news"]
        s = build_corpus(sources, ws, config=recipe.corpus, workers=news["workers"], engine=news["engine"],
                         progress=progress)
        counts = s.get("counts", {})
        return {"snapshot_id": s.get("snapshot_id"), "files": counts.get("files"),
                "files_failed": counts.get("files_failed", 0), "kept": counts.get("kept", counts.get("articles"))}, \
            not counts.get("files_failed")

    res = r.stage("corpus", corpus_inputs, ws / "corpus" / "manifest.json", corpus)
    failed_items |= res.status == "failed_items"
    snapshot = _snapshot(ws)
    if stop_after == "corpus":
        return _outcome(r, ws, failed_items)

    # 3. the index
    def index() -> tuple[dict[str, Any], bool]:
        from forecast_env.corpus_build.index import build_index

        s = build_index(ws, recipe.corpus, progress=progress, engine=recipe.values["news"]["engine"])
        return {"articles": s.get("articles"), "months": s.get("months"), "model": s.get("model")}, True

    r.stage("index", {"snapshot": snapshot, "config": config_hash(recipe.corpus)}, ws / "index" / "manifest.json",
            index)
    if stop_after == "index":
        return _outcome(r, ws, failed_items)

    # 4. events
    def events() -> tuple[dict[str, Any], bool]:
        from forecast_env.envs.events.build import build_events

        s = build_events(cache, ws, config=recipe.events, progress=progress)
        return {"events_in": s["events_in"], "kept": s["kept"], "by_split": s["by_split"]}, True

    ev_inputs = {"fetch": r.prints["fetch"], "index": r.prints["index"], "config": config_hash(recipe.events),
                 "fetched": (read_record(ws, "fetch") or {}).get("finished")}
    r.stage("events", ev_inputs, ws / "events" / "manifest.json", events)
    if stop_after == "events":
        return _outcome(r, ws, failed_items)

    # 5. the audit (a FAIL is a result, recorded like a PASS)
    au = recipe.values["audit"]

    def audit() -> tuple[dict[str, Any], bool]:
        from forecast_env.eval.audit.run import run_audit

        report = run_audit(ws, split=au["split"], checks=au["checks"] or None, settings=dict(au["settings"]) or None,
                           polymarket=cache, progress=progress)
        paths = report.write(ws / "audit")
        return {"verdict": report.verdict, "failed": list(report.failed), "report": str(paths["md"]),
                "line": report.verdict_line()}, True

    res = r.stage("audit", {"events": r.prints["events"], "audit": au}, ws / "audit", audit)
    verdict = res.result.get("verdict")
    if stop_after == "audit":
        return _outcome(r, ws, failed_items, verdict)

    # 6. the release (not written when the audit failed)
    from forecast_env.eval.audit.run import FAIL

    rel = recipe.values["release"]
    out = Path(rel["out"]).expanduser()
    out = out if out.is_absolute() else ws / out
    if verdict == FAIL:
        say(f"[release] not written: the audit FAILED ({', '.join(res.result.get('failed') or [])}); "
            f"see {res.result.get('report')}")
        _record_path(ws, "release").unlink(missing_ok=True)  # a fixed build releases again
        if (out / "release.json").exists():
            say(f"[release] {out / 'release.json'} is from an earlier build, not this one")
        r.results.append(StageResult("release", "not_run", note="audit failed"))
        return _outcome(r, ws, failed_items, verdict)

    def release() -> tuple[dict[str, Any], bool]:
        from forecast_env.eval.runs.release import write_release

        path = write_release(ws, rel["split"], out, env_config=recipe.env, name=rel["name"] or recipe.name)
        data = json.loads(path.read_text())
        return {"release_id": data["release_id"], "events": len(data["event_ids"]), "path": str(path)}, True

    res = r.stage("release", {"events": r.prints["events"], "audit": r.prints["audit"], "release": rel,
                              "env": config_hash(recipe.env)}, out / "release.json", release)
    return _outcome(r, ws, failed_items, verdict, res.result.get("path"))


def _snapshot(ws: Path) -> str | None:
    try:
        return json.loads((ws / "corpus" / "manifest.json").read_text()).get("snapshot_id")
    except (FileNotFoundError, ValueError):
        return None


def _outcome(r: _Runner, ws: Path, failed_items: bool, verdict: str | None = None,
             release: str | None = None) -> BuildOutcome:
    from forecast_env.eval.audit.run import FAIL

    status = EXIT_OK
    if verdict == FAIL:
        status = EXIT_AUDIT_FAIL
    elif failed_items and not r.allow_failed:
        status = EXIT_ITEMS_FAILED
    done = {s.stage for s in r.results}
    stages = r.results + [StageResult(s, "not_run") for s in STAGES if s not in done]
    return BuildOutcome(str(ws), stages, status, verdict, release)


def render_outcome(outcome: BuildOutcome) -> str:
    """The stage table and the verdict, for the terminal."""
    total = sum(s.seconds for s in outcome.stages) or 1.0
    lines = [f"{'stage':8s} {'status':12s} {'seconds':>9s} {'share':>6s} {'CPU s':>8s}  result"]
    for s in outcome.stages:
        brief = ", ".join(f"{k}={v}" for k, v in s.result.items() if not isinstance(v, (list, dict)))[:100]
        lines.append(f"{s.stage:8s} {s.status:12s} {s.seconds:9.1f} {100 * s.seconds / total:5.1f}% "
                     f"{s.cpu_seconds:8.1f}  {brief or s.note}")
    if outcome.verdict:
        lines.append(f"audit verdict: {outcome.verdict}")
    if outcome.release:
        lines.append(f"release: {outcome.release}")
    lines.append(f"workspace: {outcome.workspace} (exit status {outcome.exit_status})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The dry run: what a build would read and cost
# ---------------------------------------------------------------------------------------------

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
#: The benchmark commands the plan's rates come from, each verbatim as benchmarks/RESULTS.md prints it
#: (a command printed over several lines: joined at its trailing backslashes). tests/recipe/test_plan_rates.py
#: checks that each appears there. When a benchmark is rerun with new figures, change the rate's `value`
#: in PLAN_RATES and, if the command changed, its command here (and RESULTS.md prints the new one).
STAGE_REAL_COMMAND = (
    "cd DATA && taskset -c 1 .venv/bin/python benchmarks/bench_stage_real.py --set aeb=aeb --set wcxb_test=wcxb "
    "--set readability=readability --set trafilatura_eval=trafilatura --set goose3=goose3 "
    "--set newspaper=newspaper4k --limit 200 --repeat 2 "
    "--variants default,news,news-plain-filters,news-one-profile,paper,longer "
    "--keep-warc realmix/CC-NEWS-20250401120000-00001.warc.gz")
#: real articles as the index embeds them: the corpus built from that WARC (realmix_ws), then this
EMBED_COMMAND = (
    "cd DATA && taskset -c 1 .venv/bin/python benchmarks/bench_embed.py --workspace realmix_ws --threads 1 "
    "--rounds 3 --n 300 --paths default,max_seq_length=128 --beir none")
IVF_COMMAND = ("OMP_NUM_THREADS=2 nice -n 10 .venv/bin/python benchmarks/bench_scale.py build --root /work/scale/10m "
               "--rows 10000000 --months 10")
MERGE_COMMAND = (".venv/bin/python benchmarks/bench_merge.py all --root /tmp/merge_bench --sizes 250000,1000000 "
                 "--memory-sizes 250000,1000000 --workers 2 --limit-gb 8")
QUALITY_PROFILES_COMMAND = (
    "cd DATA && .venv/bin/python benchmarks/bench_quality_profiles.py --set aeb=aeb --set wcxb_dev=wcxb "
    "--set wcxb_test=wcxb --set readability=readability --set trafilatura_eval=trafilatura --set goose3=goose3 "
    "--set newspaper=newspaper4k --nonarticles nonarticle/labels.json --strip-metadata "
    "--dump nonarticle/features_after.jsonl")


@dataclass(frozen=True)
class PlanRate:
    """One measured rate of the plan and the benchmark it comes from."""

    value: float
    unit: str
    pages: str  # what it was measured on: "real pages" or what else (said in the plan's basis line)
    section: str  # the benchmarks/RESULTS.md section that prints the figure and the command
    command: str  # the benchmark command, verbatim as RESULTS.md prints it

    def script(self) -> str:
        """The benchmark script's file name (the basis lines name it; the plan prints the command)."""
        return next(w.rsplit("/", 1)[-1] for w in self.command.split() if w.endswith(".py"))


#: Every measured rate the plan uses, in one table (the plan's basis lines cite these, and print the
#: commands). The per-WARC stages (read, extract, the language gate, lang, quality, timestamps,
#: leakage): records/s per core in CPU time on 743 real pages of six public evaluation sets in one WARC
#: (about a quarter not English), per body path (`extract.body_mode`: `default` is trafilatura's, `news`
#: our own, `longer` the longer of the two), idle 2026-12-04, best of 2 (RESULTS.md "Issue 30, fourth
#: session"). A part holds every profile's verdicts, so the active profile does not change this cost.
#: Embedding: int8-static ONNX at 256 tokens, one pinned core, 300 real articles (title, summary and body
#: as the index embeds them) of the corpus built from that WARC, idle 2026-12-04. IVF: 781 s
#: on 2 threads to train 10M articles' months. Merge: CPU s per million articles, the sum of
#: `corpus_build.rates.MERGE_SECONDS_PER_MILLION` (which models it; a test keeps the two equal).
#: keep.*: the share of held-out real English articles reaching the quality stage that each profile
#: keeps (471 pages, trafilatura bodies; issue 30's linear page rule).
PLAN_RATES: dict[str, PlanRate] = {
    "extract.trafilatura": PlanRate(38.3, "records/s/core", "real pages", "Issue 30, fourth session",
                                    STAGE_REAL_COMMAND),
    "extract.own": PlanRate(76.8, "records/s/core", "real pages", "Issue 30, fourth session", STAGE_REAL_COMMAND),
    "extract.longer": PlanRate(36.0, "records/s/core", "real pages", "Issue 30, fourth session",
                               STAGE_REAL_COMMAND),
    "embed": PlanRate(37.6, "articles/s/core", "real articles", "Issue 30, fourth session", EMBED_COMMAND),
    "ivf": PlanRate(781 * 2 / 10_000_000, "core-s/article", "synthetic vectors", "Approximate (IVF) months",
                    IVF_COMMAND),
    "merge": PlanRate(334.5 + 14.4 + 45.7, "core-s/million articles", "synthetic parts",
                      "Corpus merge out of core", MERGE_COMMAND),
    "keep.paper": PlanRate(357 / 471, "share of articles kept", "real pages", "The page rule held out",
                           QUALITY_PROFILES_COMMAND),
    "keep.news": PlanRate(454 / 471, "share of articles kept", "real pages", "The page rule held out",
                          QUALITY_PROFILES_COMMAND),
}
#: The names the planner used before the table (kept for callers).
EXTRACT_RECORDS_PER_CORE_S: dict[str, float] = {m: PLAN_RATES[f"extract.{m}"].value
                                                for m in ("trafilatura", "own", "longer")}
EMBED_ARTICLES_PER_CORE_S = PLAN_RATES["embed"].value
IVF_CORE_S_PER_ARTICLE = PLAN_RATES["ivf"].value
#: Peak memory of one corpus worker (RESULTS.md "Corpus build": largest worker 554 MB).
WORKER_PEAK_BYTES = 554e6
#: Disk per kept article: the store (~60 GB at ~20M articles, issue 21; used only without
#: `corpus_build.rates`, whose measured store size wins) and the index (22 GB at 10M, RESULTS.md
#: "Approximate (IVF) months").
STORE_BYTES_PER_ARTICLE = 60e9 / 20e6
INDEX_BYTES_PER_ARTICLE = 22e9 / 10e6
#: Searcher memory over a 10M index (RESULTS.md: 164 MB private after the searches).
INDEX_SEARCH_BYTES = 164e6
#: Merge (out-of-core dedup + shard writing) where `corpus_build.rates` is absent:
#: estimates (in-memory merge of the `small` world: dedup 2.08 s + store 0.19 s for its ~9k kept).
EST_MERGE_CORE_S_PER_ARTICLE = 2.27 / 9_000
EST_MERGE_BYTES_PER_ARTICLE = 200.0
#: Polymarket: requests per event (1 listing share + 2 price series x windows + trades pages) and
#: closed events per month (estimates), at `events.polymarket.requests_per_second`.
EST_REQUESTS_PER_EVENT = 8
EST_EVENTS_PER_MONTH = 6_000
#: HEAD requests per month in a dry run (the mean size of these stands for the month's files).
HEAD_SAMPLE_PER_MONTH = 3


def _merge_plan(kept: float, workers: int) -> tuple[dict[str, Any], bool]:
    """The merge's estimate: `corpus_build.rates.merge_estimate` (measured by bench_merge) when present."""
    try:
        from forecast_env.corpus_build.rates import MERGE_BYTES_PER_ARTICLE, merge_estimate
    except ImportError:
        return {"cpu_hours": kept * EST_MERGE_CORE_S_PER_ARTICLE / 3600, "peak_memory_bytes": kept * EST_MERGE_BYTES_PER_ARTICLE,
                "disk_bytes": 0.0, "store_bytes": kept * STORE_BYTES_PER_ARTICLE}, False
    est = merge_estimate(int(kept), workers=workers)
    return {**est, "keys_bytes": kept * MERGE_BYTES_PER_ARTICLE["keys_disk"],
            "store_bytes": kept * MERGE_BYTES_PER_ARTICLE["store_disk"]}, True


@dataclass
class MonthPlan:
    month: str
    listed: int | None  # files in the listing (None: not read)
    picked: int
    bytes: float
    bytes_from: str  # head (n sampled) | estimate
    listing_from: str  # listing | frozen | estimate


@dataclass
class Plan:
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
        return sum(m.picked for m in self.months) + self.local_files

    @property
    def bytes(self) -> float:
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
        return {"recipe": self.recipe, "files": self.files, "bytes": self.bytes,
                "months": [m.__dict__ for m in self.months], "local_files": self.local_files,
                "stages": self.stages, "core_hours": self.core_hours, "notes": self.notes,
                "profile": self.profile,
                "rates": {k: {**PLAN_RATES[k].__dict__, "script": PLAN_RATES[k].script()} for k in self.rates}}


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
    import dataclasses

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


_RATE_KEYS = list(PLAN_RATES)


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
    merge, merge_measured = _merge_plan(kept, workers)
    from forecast_env.corpus_build.pipeline import body_mode_of

    body_mode = body_mode_of(recipe.corpus)
    extract = f"extract.{body_mode}"
    extract_rate = PLAN_RATES[extract].value
    rps = float(recipe.events["polymarket"]["requests_per_second"]) or 5.0
    pm = recipe.values["polymarket"]
    since, before = _iso(pm["closed_since"]), _iso(pm["closed_before"])
    n_months = ((before.year - since.year) * 12 + before.month - since.month) if since and before else PAPER_MONTHS
    requests = max(1, n_months) * EST_EVENTS_PER_MONTH * EST_REQUESTS_PER_EVENT
    est = "estimate"
    kept_basis = f"{kept:,.0f} kept ({KEPT_PER_FILE:,.0f}/file, the paper's rate" + (
        f", x {scale:.3f} for the {active} profile: its share of held-out articles kept over paper's, "
        f"{PLAN_RATES['keep.paper'].script()} [{_RATE_KEYS.index('keep.paper') + 1}, "
        f"{_RATE_KEYS.index(f'keep.{active}') + 1}])"
        if active != "paper" else ")")
    embed, ivf = PLAN_RATES["embed"], PLAN_RATES["ivf"]
    return [
        {"stage": "fetch", "core_hours": 0.0, "wall_hours": requests / rps / 3600, "memory": 0.3e9,
         "disk": requests * 20e3, "basis": f"{requests:,} requests at {rps:g}/s ({est}: events per month)",
         "rates": []},
        {"stage": "corpus", "core_hours": records / extract_rate / 3600, "memory": workers * WORKER_PEAK_BYTES,
         "disk": merge["store_bytes"],
         "basis": f"{workers} worker(s); {records:,.0f} records ({est}: {EST_RECORDS_PER_GB:,}/GB) at "
                  f"{extract_rate:g}/s/core ({body_mode} body, {PLAN_RATES[extract].pages}; {_ref(extract)}); "
                  + kept_basis,
         "rates": [extract] + ([f"keep.{active}", "keep.paper"] if active != "paper" else [])},
        {"stage": "merge", "core_hours": merge["cpu_hours"], "memory": merge["peak_memory_bytes"],
         "disk": merge.get("keys_bytes", 0.0),
         "basis": (f"corpus_build.rates.merge_estimate ({PLAN_RATES['merge'].value:g} "
                   f"{PLAN_RATES['merge'].unit}, {PLAN_RATES['merge'].pages}, out of core; {_ref('merge')})")
         if merge_measured else f"{est}: in-memory merge of the small world",
         "rates": ["merge"] if merge_measured else []},
        {"stage": "index", "core_hours": kept / embed.value / 3600 + kept * ivf.value / 3600,
         "memory": INDEX_SEARCH_BYTES + 2e9, "disk": kept * INDEX_BYTES_PER_ARTICLE,
         "basis": f"embedding {embed.value:g} {embed.unit} (int8-static ONNX, {embed.pages}; {_ref('embed')}) "
                  f"+ IVF training ({ivf.value * 1e6:g} core-s per million articles, {ivf.pages}; {_ref('ivf')})",
         "rates": ["embed", "ivf"]},
        {"stage": "events", "core_hours": 0.05 * max(1, n_months), "memory": 2e9, "disk": 0.5e9,
         "basis": f"{est}: the screen searches the index per scheduled event", "rates": []},
        {"stage": "audit", "core_hours": 0.1, "memory": 2e9, "disk": 0.01e9, "basis": f"{est}", "rates": []},
        {"stage": "release", "core_hours": 0.0, "memory": 0.5e9, "disk": 0.001e9, "basis": "one JSON file",
         "rates": []},
    ]


def _human(n: float) -> str:
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
    lines.append(f"  {'stage':8s} {'core-h':>9s} {'memory':>10s} {'disk':>10s}  basis")
    total_core = total_disk = 0.0
    for s in plan.stages:
        total_core += s["core_hours"]
        total_disk += s["disk"]
        extra = f" (~{s['wall_hours']:.1f} h wall, polite)" if "wall_hours" in s else ""
        lines.append(f"  {s['stage']:8s} {s['core_hours']:9.1f} {_human(s['memory']):>10s} {_human(s['disk']):>10s}  "
                     f"{s['basis']}{extra}")
    lines.append(f"  total: {total_core:,.0f} core-hours, {_human(total_disk)} on disk (WARC files are streamed, "
                 "not stored)")
    lines += _render_profile(plan.profile)
    cited = list(dict.fromkeys([*plan.rates, *plan.profile.get("rates", [])]))
    if cited:
        lines.append("  rates, from benchmarks/RESULTS.md (each command as printed there):")
        for key in sorted(cited, key=_RATE_KEYS.index):
            r = PLAN_RATES[key]
            lines.append(f"  [{_RATE_KEYS.index(key) + 1}] {key} = {r.value:.4g} {r.unit}, {r.pages} "
                         f"(\"{r.section}\"): {r.command}")
    lines += [f"  note: {n}" for n in plan.notes[:20]]
    if len(plan.notes) > 20:
        lines.append(f"  note: ... and {len(plan.notes) - 20} more")
    return "\n".join(lines)
