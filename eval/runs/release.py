"""Frozen releases: what a run must have been played against to be scored as a benchmark result
(docs/design.md §7, Releases).

`write_release(workspace, split, out)` freezes the event list of a split, the corpus snapshot id, the hash
of the index manifest, the events build's config hash and the environment config into `out/release.json`,
itself hashed. It holds no schedule dates: the dates were picked for market movement, so a list of future
dates would tell a forecaster when the market moved. `score_run(release, run_dir)` checks that a run (made
by the runner, over MCP or through verifiers) was played against exactly that release, then writes the
same report as `forecast-env report`; a run that differs is refused with every difference named.

A split that holds questions generated from the news (event ids `g-...`, docs/questions.md) also freezes
where they came from, in a `questions` block: the sha256 of `WS/questions/accepted.jsonl` and of the model
recording, the models and prompt hashes of generate.json and resolve.json, the split's generated event ids
and the questions config hash. `questions_differences(release, workspace)` names every way a workspace's
question files depart from it, and `score_run` refuses a run whose workspace departs. A split without
generated events writes no block (its release.json is what it was before).

A split that holds imported ForecastBench events (event ids `fb-...`, docs/forecastbench.md) likewise freezes, in
a `forecastbench` block, the split's ForecastBench event ids and the sha256 of the items table
`WS/events/forecastbench.parquet`, which the report's ForecastBench section scores a run from (the resolved
values, due dates and freeze values); `score_run` refuses a run whose items table (the run's own copy, else its
workspace's: the one the report reads) is not that one. A split without them writes no block.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forecast_env.errors import RunError
from forecast_env.eval.runs.store import read_record
from forecast_env.store import Workspace, atomic_write_json, package_versions, sha256_file

RELEASE_VERSION = 1
#: The fields of run.json a release pins (besides the event set and the environment config).
PINNED = ("corpus_snapshot_id", "index_manifest_sha256", "events_config_hash")
#: The question pipeline's files a release reads, relative to the workspace. Their owner is
#: `forecast_env.questions.store.QuestionFiles`, which `eval` may not import (the questions layer stands above it,
#: docs/ARCHITECTURE.md rule 9); tests/eval/runs/test_release_questions.py checks that the two name the same files.
QUESTION_PATHS = {"accepted": "questions/accepted.jsonl", "recording": "questions/recording.jsonl",
                  "generate_info": "questions/generate.json", "resolve_info": "questions/resolve.json"}
#: The question files a release pins by their sha256 (the key in the `questions` block -> the file).
QUESTION_FILES = {"accepted_sha256": "accepted", "recording_sha256": "recording"}
_WHAT = {"accepted": "the accepted questions", "recording": "the model's recorded requests and answers"}
#: The ForecastBench items table a release pins when its split holds imported ForecastBench events, relative to the
#: workspace (`envs.events.forecastbench_import.items_path`; `eval.report.forecastbench.ITEMS_FILE`).
FORECASTBENCH_ITEMS = "events/forecastbench.parquet"
#: Settings of the questions section that say where and how the model is reached, not what it is asked: they
#: do not count in the questions config hash (as the Polymarket URLs do not count in the events stage's).
QUESTIONS_EXECUTION = {"replay": None, "llm": ("base_url", "api_key_env", "timeout_seconds", "max_retries",
                                               "backoff_seconds", "max_backoff_seconds")}


@dataclass(frozen=True)
class Release:
    """A loaded release: its identifying fields and its own hash."""

    path: Path
    data: dict[str, Any]

    @property
    def release_id(self) -> str:
        return str(self.data["release_id"])

    @property
    def event_ids(self) -> list[str]:
        return list(self.data["event_ids"])


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def questions_config_hash(config: Mapping[str, Any] | None) -> str:
    """The hash of a questions config (the section's defaults, then `config`), its execution settings left out."""
    from forecast_env.config import config_hash, flatten_keys, load_config

    # every key written `questions.KEY`: load_config passes over a bare key named like a section (e.g. `events`)
    cfg = load_config("questions", overrides={f"questions.{k}": v for k, v in flatten_keys(dict(config or {})).items()})
    for key, sub in QUESTIONS_EXECUTION.items():
        if sub is None:
            cfg.pop(key, None)
        else:
            cfg[key] = {k: v for k, v in cfg[key].items() if k not in sub}
    return config_hash(cfg)


def _json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RunError(f"{path}: not readable ({exc}); rerun `forecast-env questions generate` and `resolve`") from exc
    return data if isinstance(data, dict) else {}


def questions_block(ws: Workspace, event_ids: list[str], config: Mapping[str, Any] | None = None
                    ) -> dict[str, Any] | None:
    """What a release pins of the generated questions among `event_ids` (None when there are none).

    `config`: the questions config they were made with (a recipe's); without it, the `config_hash` that
    generate.json records, if any.
    """
    from forecast_env.envs.events.tables import SOURCE_PREFIX

    prefix = SOURCE_PREFIX["generated"]
    generated = sorted(e for e in event_ids if e.startswith(prefix))
    if not generated:
        return None
    files = {name: ws.root / rel for name, rel in QUESTION_PATHS.items()}
    missing = [rel for name, rel in QUESTION_PATHS.items() if not files[name].is_file()]
    if missing:
        raise RunError(f"the split holds {len(generated)} generated events ({generated[0]}, ...) but {ws.root} lacks "
                       f"{', '.join(missing)}: a release pins the questions they came from; rerun `forecast-env "
                       "questions generate` and `resolve` (or release a workspace without generated events)")
    accepted = set()
    for n, line in enumerate(files["accepted"].read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                accepted.add(f"{prefix}{json.loads(line)['id']}")
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise RunError(f"{files['accepted']} line {n}: not an accepted question ({exc})") from None
    stale = [e for e in generated if e not in accepted]
    if stale:
        raise RunError(f"{ws.events_dir} holds {len(stale)} generated events that {files['accepted']} does not "
                       f"accept ({', '.join(stale[:3])}{', ...' if len(stale) > 3 else ''}): the events are from an "
                       "earlier run; rerun `forecast-env questions resolve` to import the accepted questions again")
    gen, res = _json_file(files["generate_info"]), _json_file(files["resolve_info"])
    return {
        "event_ids": generated,
        **{key: sha256_file(files[name]) for key, name in QUESTION_FILES.items()},
        "models": {"generate": gen.get("model"), "resolve": res.get("model")},
        "prompts": dict(sorted({**(gen.get("prompts") or {}), **(res.get("prompts") or {})}.items())),
        "config_hash": questions_config_hash(config) if config is not None else gen.get("config_hash"),
    }


def forecastbench_block(ws: Workspace, event_ids: list[str]) -> dict[str, Any] | None:
    """What a release pins of the imported ForecastBench events among `event_ids` (None when there are none): their
    ids and the sha256 of the items table that scores them."""
    from forecast_env.envs.events.tables import SOURCE_PREFIX

    imported = sorted(e for e in event_ids if e.startswith(SOURCE_PREFIX["forecastbench"]))
    if not imported:
        return None
    path = ws.root / FORECASTBENCH_ITEMS
    if not path.is_file():
        raise RunError(f"the split holds {len(imported)} ForecastBench events ({imported[0]}, ...) but {ws.root} "
                       f"lacks {FORECASTBENCH_ITEMS}: a release pins the items table that scores them; rerun "
                       "`forecast-env events import --forecastbench REPO`")
    return {"event_ids": imported, "items_sha256": sha256_file(path)}


def write_release(workspace: str | Path, split: str, out: str | Path,
                  env_config: Mapping[str, Any] | None = None, name: str | None = None,
                  questions_config: Mapping[str, Any] | None = None) -> Path:
    """Freeze `split` of `workspace` into `out/release.json`; returns its path.

    `questions_config`: the questions config the split's generated events were made with (the recipe's), hashed
    into the `questions` block (only written when the split holds generated events).
    """
    from forecast_env.config import load_config
    from forecast_env.eval.runs.store import run_record

    ws = Workspace.at(workspace)
    env_cfg = load_config("env", overrides=dict(env_config or {}))
    from forecast_env.envs import ForecastEnv

    ids = ForecastEnv(ws.root, split=split, config=env_cfg).event_ids
    if not ids:
        raise RunError(f"split {split!r} of {ws.root} has no events: nothing to release")
    rec = run_record(ws, "", split, sorted(ids), [], 1, 0, load_config("benchmark"), env_cfg)
    missing = [k for k in PINNED if not rec.get(k)]
    if missing:
        raise RunError(f"{ws.root} lacks {', '.join(missing)} (build the corpus, index and events first): a release "
                       "must pin them")
    body = {"version": RELEASE_VERSION, "name": name or f"{ws.root.name}-{split}", "split": split,
            "event_ids": sorted(ids), "event_set_hash": rec["event_set_hash"],
            **{k: rec[k] for k in PINNED}, "env_config": env_cfg, "versions": package_versions()}
    block = questions_block(ws, sorted(ids), questions_config)
    if block is not None:  # a split without generated events keeps the release it always had
        body["questions"] = block
    fb = forecastbench_block(ws, sorted(ids))
    if fb is not None:  # likewise a split without ForecastBench events
        body["forecastbench"] = fb
    body["release_id"] = _digest({k: v for k, v in body.items() if k != "versions"})[:16]
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "release.json"
    atomic_write_json(path, body)
    (out_dir / "release.sha256").write_text(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  release.json\n")
    return path


def load_release(path: str | Path) -> Release:
    """Read a release (a folder or its release.json) and check its own hashes."""
    p = Path(path)
    if p.is_dir():
        p = p / "release.json"
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise RunError(f"{p}: not a readable release ({exc}); make one with forecast-env release") from exc
    side = p.parent / "release.sha256"
    if side.exists() and side.read_text().split()[0] != hashlib.sha256(p.read_bytes()).hexdigest():
        raise RunError(f"{p} was changed after it was written (its sha256 no longer matches release.sha256)")
    if data.get("release_id") != _digest({k: v for k, v in data.items() if k not in ("versions", "release_id")})[:16]:
        raise RunError(f"{p}: release_id does not match its content; the release was edited")
    return Release(p, data)


def differences(release: Release, run: Mapping[str, Any]) -> list[str]:
    """Every way a run's record departs from the release (empty: it was played against the release)."""
    out = []
    if run.get("split") != release.data.get("split"):
        out.append(f"split: run {run.get('split')!r} vs release {release.data.get('split')!r}")
    want, got = set(release.event_ids), set(run.get("event_ids") or [])
    if want != got:
        out.append(f"events: the run has {len(got)} events, the release {len(want)} "
                   f"({len(want - got)} missing from the run, {len(got - want)} not in the release)")
    for key in PINNED:
        if run.get(key) != release.data.get(key):
            out.append(f"{key}: run {run.get(key)!r} vs release {release.data.get(key)!r}")
    run_env = dict((run.get("config") or {}).get("env") or {})
    rel_env = dict(release.data.get("env_config") or {})
    for key in sorted(set(run_env) | set(rel_env)):
        if run_env.get(key) != rel_env.get(key):
            out.append(f"env.{key}: run {run_env.get(key)!r} vs release {rel_env.get(key)!r}")
    return out


def questions_differences(release: Release, workspace: str | Path) -> list[str]:
    """Every way the question files of `workspace` depart from the release's `questions` block (empty: none, or
    the release has no generated events)."""
    block = release.data.get("questions")
    if not block:
        return []
    root = Path(workspace)
    if not root.is_dir():
        return [f"questions: the workspace {root} is not there to check its question files against the release"]
    out = []
    for key, name in QUESTION_FILES.items():
        path = root / QUESTION_PATHS[name]
        got = sha256_file(path) if path.is_file() else None
        if got != block.get(key):
            what = "is missing" if got is None else f"has sha256 {got[:16]}..., the release {str(block.get(key))[:16]}..."
            out.append(f"questions: {path} {what} ({_WHAT[name]} are not those the release froze)")
    return out


def forecastbench_differences(release: Release, items: Path) -> list[str]:
    """How the ForecastBench items table `items` departs from the release's `forecastbench` block (empty: it does
    not, or the release has no ForecastBench events)."""
    block = release.data.get("forecastbench")
    if not block:
        return []
    got = sha256_file(items) if items.is_file() else None
    if got == block.get("items_sha256"):
        return []
    what = "is missing" if got is None else \
        f"has sha256 {got[:16]}..., the release {str(block.get('items_sha256'))[:16]}..."
    return [f"forecastbench: {items} {what} (the ForecastBench items that score the run are not those the release "
            "froze)"]


def verify_workspace(release: str | Path | Release, workspace: str | Path) -> None:
    """Refuse (RunError naming every difference) a workspace whose question files or ForecastBench items table are
    not the release's."""
    rel = release if isinstance(release, Release) else load_release(release)
    diff = questions_differences(rel, workspace) + forecastbench_differences(rel, Path(workspace) / FORECASTBENCH_ITEMS)
    if diff:
        raise RunError(f"workspace {workspace} is not the one release {rel.release_id} froze: " + "; ".join(diff))


def score_run(release: str | Path, run_dir: str | Path, out: str | Path | None = None,
              config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check that the run was made against the release, then write its report; returns the report paths."""
    rel = load_release(release)
    run_dir = Path(run_dir)
    run = read_record(run_dir)
    diff = differences(rel, run)
    if rel.data.get("questions"):  # the run's workspace must hold the generated questions the release froze
        diff += questions_differences(rel, run.get("workspace") or run_dir.parent.parent)
    if rel.data.get("forecastbench"):  # the items table the report scores the run from must be the frozen one
        from forecast_env.eval.report.forecastbench import items_path

        workspace = Path(run.get("workspace") or run_dir.parent.parent)
        diff += forecastbench_differences(rel, items_path(run_dir) or workspace / FORECASTBENCH_ITEMS)
    if diff:
        raise RunError(f"run {run.get('run_id')} was not made against release {rel.release_id}: " + "; ".join(diff))
    from forecast_env.eval.report.render import build_report

    paths = build_report(run_dir, out=out, config=config)
    stamp = {"release_id": rel.release_id, "release": str(rel.path), "run_id": run.get("run_id"),
             "session": run.get("session", "per_date")}
    atomic_write_json(Path(out or run_dir) / "release_check.json", stamp)
    return {**paths, "release_check": Path(out or run_dir) / "release_check.json"}
