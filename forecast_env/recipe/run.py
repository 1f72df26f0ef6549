"""The build: every stage of a recipe not already done, in order (docs/recipes.md "Stages").

The stages: events fetch, corpus, index, events, forecastbench, questions, audit, release. Each one writes a
record `WS/build/<stage>.json` holding the fingerprint of its inputs when it finishes, and is skipped when
that record matches and its artifact is on disk, so a second run does nothing and a killed run
resumes at the stage it was in (each stage is itself resumable). The forecastbench stage (ForecastBench rounds
imported as events from a local copy of forecastbench-datasets) and the questions stage (questions generated
from the news, `forecast_env.questions`) are optional: a recipe that does not enable one reports it `disabled`
and its other stages compare what they always compared.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forecast_env.config import config_hash
from forecast_env.errors import DISK_FULL_EXIT
from forecast_env.recipe.load import Recipe
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

STAGES = ("fetch", "corpus", "index", "events", "forecastbench", "questions", "audit", "release")
#: Stages a recipe runs only when it enables them (the recipe key that does).
OPTIONAL_STAGES = {"forecastbench": "forecastbench.enabled", "questions": "questions.enabled"}
RECORD_VERSION = 1


# ---------------------------------------------------------------------------------------------
# Stage records ("already done")
# ---------------------------------------------------------------------------------------------


def build_dir(workspace: str | Path) -> Path:
    """Where the stage records live: WS/build/."""
    return Path(workspace) / "build"


def _record_path(workspace: Path, stage: str) -> Path:
    """Where the finished-stage record of `stage` lives."""
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
    """The hash a stage record holds of its inputs."""
    return config_hash(dict(inputs))


@dataclass
class StageResult:
    """What one stage did in a run."""

    stage: str
    status: str  # done | skipped | failed_items | audit_fail | not_run | disabled (an optional stage left out)
    seconds: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    cpu_seconds: float = 0.0  # this process and its finished worker processes (pools), user + system


def _cpu_seconds() -> float:
    """CPU seconds so far of this process and its finished children."""
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
        """The stages this run ran (not skipped)."""
        return [s.stage for s in self.stages if s.status not in ("skipped", "not_run", "disabled")]


# ---------------------------------------------------------------------------------------------
# The stages
# ---------------------------------------------------------------------------------------------


def polymarket_dir(recipe: Recipe, workspace: Path) -> Path:
    """The recipe's Polymarket cache folder (relative paths are under the workspace)."""
    p = Path(recipe.get("polymarket.cache")).expanduser()
    return p if p.is_absolute() else workspace / p


def source_spec(recipe: Recipe) -> Any:
    """The corpus sources the recipe names, as a `corpus_build.source.SourceSpec`."""
    from forecast_env.corpus_build.source import SourceSpec

    news = recipe.values["news"]
    return SourceSpec(warc=list(news["warc"]), cc_news=news["cc_news"], files_per_month=news["files_per_month"],
                      sample=None if news["sample"] is None else float(news["sample"]))


class _Runner:
    """Runs a recipe's stages one by one, skipping those already done, and collects their results."""

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
            s = client.fetch_all(closed_since=recipe.date("polymarket.closed_since"),
                                 closed_before=recipe.date("polymarket.closed_before"),
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

    # 5. ForecastBench rounds (optional), beside the Polymarket events: after them, since the import drops the
    # ForecastBench questions whose market a Polymarket event holds
    after_forecastbench = _forecastbench_stage(r, recipe, ws, progress)
    if stop_after == "forecastbench":
        return _outcome(r, ws, failed_items)

    # 6. questions generated from the news (optional): generate, then resolve (the accepted become events)
    after_questions = _questions_stage(r, recipe, ws, progress, after_forecastbench)
    after_questions = {**after_forecastbench, **after_questions}
    if stop_after == "questions":
        return _outcome(r, ws, failed_items)

    # 7. the audit (a FAIL is a result, recorded like a PASS)
    au = recipe.values["audit"]

    def audit() -> tuple[dict[str, Any], bool]:
        from forecast_env.eval.audit.run import run_audit

        report = run_audit(ws, split=au["split"], checks=au["checks"] or None, settings=dict(au["settings"]) or None,
                           polymarket=cache, progress=progress)
        paths = report.write(ws / "audit")
        return {"verdict": report.verdict, "failed": list(report.failed), "report": str(paths["md"]),
                "line": report.verdict_line()}, True

    res = r.stage("audit", {"events": r.prints["events"], "audit": au, **after_questions}, ws / "audit", audit)
    verdict = res.result.get("verdict")
    if stop_after == "audit":
        return _outcome(r, ws, failed_items, verdict)

    # 8. the release (not written when the audit failed)
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

        path = write_release(ws, rel["split"], out, env_config=recipe.env, name=rel["name"] or recipe.name,
                             questions_config=recipe.questions if recipe.questions_enabled else None)
        data = json.loads(path.read_text())
        return {"release_id": data["release_id"], "events": len(data["event_ids"]), "path": str(path)}, True

    res = r.stage("release", {"events": r.prints["events"], "audit": r.prints["audit"], "release": rel,
                              "env": config_hash(recipe.env), **after_questions}, out / "release.json", release)
    return _outcome(r, ws, failed_items, verdict, res.result.get("path"))


def forecastbench_files(repo: Path, rounds: str | None = None) -> list[tuple[str, int, int]]:
    """The round files of `repo`: (path under `repo`, size, mtime in ns) of the question and resolution sets of
    every round whose due date is in `rounds` (A..B; None: every round), oldest first."""
    from forecast_env.envs.events.forecastbench import QUESTION_SETS, RESOLUTION_SETS, due_dates
    from forecast_env.envs.events.forecastbench_import import parse_rounds

    first, last = parse_rounds(rounds)
    out = []
    for due in due_dates(repo):
        if (first is None or due >= first) and (last is None or due <= last):
            for rel in (f"{QUESTION_SETS}/{due}-llm.json", f"{RESOLUTION_SETS}/{due}_resolution_set.json"):
                path = repo / rel
                if path.is_file():
                    st = path.stat()
                    out.append((rel, st.st_size, st.st_mtime_ns))
    return out


def _forecastbench_stage(r: _Runner, recipe: Recipe, ws: Path, progress: bool) -> dict[str, Any]:
    """The forecastbench stage: import the recipe's ForecastBench rounds as events when it enables them (skipped
    when its record matches: the same events record, repo, rounds and round files, by size and mtime: every round's
    files, since the import reads every round of the folder for a market question's label and home split).

    Runs after the events stage and again whenever that one ran: the import excludes the questions whose market a
    Polymarket event holds, and a rebuilt Polymarket set may hold other markets (the events build's own
    `drop_duplicates` only removes, it never restores one it dropped before) and its config is the import's.
    Returns what the later stages add to their inputs (as `_questions_stage`).
    """
    if not recipe.forecastbench_enabled:
        note = "disabled in the recipe (forecastbench.enabled: false)"
        if read_record(ws, "forecastbench") is not None:
            note += f"; {ws / 'events'} still holds the ForecastBench events an earlier build imported"
        r.say(f"[forecastbench] {note}")
        r.results.append(StageResult("forecastbench", "disabled", note=note))
        return {}
    repo = recipe.forecastbench_repo
    assert repo is not None  # load_recipe refuses an enabled block without it
    rounds = recipe.get("forecastbench.rounds")
    inputs = {"events": r.prints["events"], "repo": str(repo), "rounds": rounds,
              "files": [list(f) for f in forecastbench_files(repo)],
              # a rebuilt events folder (same fingerprint) lost the imported events: import them again
              "events_finished": (read_record(ws, "events") or {}).get("finished")}

    def forecastbench() -> tuple[dict[str, Any], bool]:
        from forecast_env.envs.events.build import import_forecastbench

        s = import_forecastbench(repo, ws, rounds=rounds, config=recipe.events, progress=progress)
        for line in s.get("file_problems") or []:
            r.say(f"[forecastbench] {line}")
        return {"rounds": list(s.get("rounds") or []), "events_in": s.get("events_in"), "kept": s.get("kept"),
                "by_split": s.get("by_split"), "file_problems": len(s.get("file_problems") or [])}, True

    r.stage("forecastbench", inputs, ws / "events" / "forecastbench.parquet", forecastbench)
    return {"forecastbench": r.prints["forecastbench"]}


def _questions_stage(r: _Runner, recipe: Recipe, ws: Path, progress: bool,
                     after: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The questions stage: generate and resolve when the recipe enables it (skipped when its record matches).

    `after`: what the stages before it add to their inputs (the forecastbench stage's fingerprint when enabled:
    the generated events are cut against the stored ones). Returns what the later stages add to their inputs:
    the stage's fingerprint when it is enabled, nothing when it is not (so a recipe without questions keeps the
    audit and release records it always had).
    """
    if not recipe.questions_enabled:
        note = "disabled in the recipe (questions.enabled: false)"
        if read_record(ws, "questions") is not None:
            note += f"; {ws / 'events'} still holds the generated events an earlier build added"
        r.say(f"[questions] {note}")
        r.results.append(StageResult("questions", "disabled", note=note))
        return {}
    from forecast_env.eval.runs.release import questions_config_hash
    from forecast_env.questions.store import QuestionFiles

    dates = str(recipe.get("questions.dates"))
    inputs = {"events": r.prints["events"], "index": r.prints["index"], "dates": dates,
              "config": questions_config_hash(recipe.questions),
              # a rebuilt events folder (same fingerprint) lost the generated events: import them again
              "events_finished": (read_record(ws, "events") or {}).get("finished"), **(after or {})}

    def questions() -> tuple[dict[str, Any], bool]:
        from forecast_env.questions.generate import generate_questions
        from forecast_env.questions.resolve import resolve_questions

        # every key written `questions.KEY`: the section's loader passes over a bare key named like a section
        cfg = {f"questions.{k}": v for k, v in recipe.questions.items()}
        gen = generate_questions(ws, dates, cfg, progress=progress)
        res = resolve_questions(ws, cfg, events_config=recipe.events, progress=progress)
        status = res.get("status") or {}
        return {"seeds": sum((gen.get("seeds") or {}).values()), "drafts": gen.get("drafts"),
                "verified": (gen.get("status") or {}).get("verified", 0), "accepted": status.get("accepted", 0),
                "pending": status.get("pending", 0), "events": (res.get("events") or {}).get("kept", 0),
                "tokens": int(gen["usage"]["total_tokens"]) + int(res["usage"]["total_tokens"]),
                "live_calls": int(gen["live_calls"]) + int(res["live_calls"]),
                "replayed_calls": int(gen["replayed_calls"]) + int(res["replayed_calls"]),
                "status": status}, True

    r.stage("questions", inputs, QuestionFiles.of(ws).accepted, questions)
    return {"questions": r.prints["questions"]}


def _snapshot(ws: Path) -> str | None:
    """The corpus snapshot id in `ws` (None without a corpus)."""
    try:
        return json.loads((ws / "corpus" / "manifest.json").read_text()).get("snapshot_id")
    except (FileNotFoundError, ValueError):
        return None


def _outcome(r: _Runner, ws: Path, failed_items: bool, verdict: str | None = None,
             release: str | None = None) -> BuildOutcome:
    """The run's outcome and exit status; stages not reached are `not_run` (`disabled`: an optional stage the
    recipe leaves out)."""
    from forecast_env.eval.audit.run import FAIL

    status = EXIT_OK
    if verdict == FAIL:
        status = EXIT_AUDIT_FAIL
    elif failed_items and not r.allow_failed:
        status = EXIT_ITEMS_FAILED
    done = {s.stage for s in r.results}
    stages = r.results + [StageResult(s, "not_run") if s not in OPTIONAL_STAGES or r.recipe.get(OPTIONAL_STAGES[s])
                          else StageResult(s, "disabled", note=f"disabled in the recipe ({OPTIONAL_STAGES[s]}: false)")
                          for s in STAGES if s not in done]
    return BuildOutcome(str(ws), stages, status, verdict, release)


def render_outcome(outcome: BuildOutcome) -> str:
    """The stage table and the verdict, for the terminal."""
    total = sum(s.seconds for s in outcome.stages) or 1.0
    width = max([9, *(len(s.stage) for s in outcome.stages)])  # `forecastbench`
    lines = [f"{'stage':{width}s} {'status':12s} {'seconds':>9s} {'share':>6s} {'CPU s':>8s}  result"]
    for s in outcome.stages:
        brief = ", ".join(f"{k}={v}" for k, v in s.result.items() if not isinstance(v, (list, dict)))[:100]
        lines.append(f"{s.stage:{width}s} {s.status:12s} {s.seconds:9.1f} {100 * s.seconds / total:5.1f}% "
                     f"{s.cpu_seconds:8.1f}  {brief or s.note}")
    if outcome.verdict:
        lines.append(f"audit verdict: {outcome.verdict}")
    if outcome.release:
        lines.append(f"release: {outcome.release}")
    lines.append(f"workspace: {outcome.workspace} (exit status {outcome.exit_status})")
    return "\n".join(lines)
