"""What every audit check shares (docs/design.md §8): the verdicts, the check names, a check's result,
the settings, and the workspace tables loaded once. The checks (one module each: schedule.py, structure.py, ...) import this module and
`run.py` runs them, so no check imports the module that imports it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import polars as pl

from forecast_env.errors import ConfigError, WorkspaceError
from forecast_env.store import Workspace

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
VERDICTS = (PASS, FAIL, INCONCLUSIVE)
#: The checks in the order they run and are reported.
CHECKS = ("schedule", "structure", "retrieval", "text", "replay", "siblings")
TITLES = {
    "schedule": "1. Schedule invariants",
    "structure": "2. Blind structure probe",
    "retrieval": "3. Retrieval time restriction",
    "text": "4. Text leakage in what the agent sees",
    "replay": "5. Replay determinism",
    "siblings": "6. Cross-question exposure",
}


@dataclass
class CheckResult:
    """The outcome of one check: verdict, one-line reason, every figure, failing cases and examples."""

    name: str
    verdict: str
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)  # which sub-checks failed, with counts
    examples: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def title(self) -> str:
        return TITLES.get(self.name, self.name)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "title": self.title, **asdict(self)}


# ---------------------------------------------------------------------------------------------
# settings and shared inputs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditSettings:
    """Sizes, seeds and thresholds of the checks (defaults: the documented audit rule)."""

    seed: int = 0
    # query encoder: hybrid text probes and the reader's second search in the env's default mode; off by
    # default, so that the audit loads no model (dense search is still probed with cached vectors)
    encoder: bool = False
    # 1. schedule
    close_moves: int = 3  # earlier closedTime values tried per event
    # 2. structure
    draws: int = 4000
    margin: float = 0.01
    max_half_width: float = 0.02
    l2: float = 1.0
    # 3. retrieval
    probes: int = 200  # random (query, date) probes
    probe_days: int = 6  # days D on which the index is rebuilt from the visible articles
    queries_per_day: int = 12
    k: int = 10
    score_tolerance: float = 1e-4  # relative, between the served and the rebuilt scores
    # 4. text
    max_text_share: float = 0.01  # FAIL above this share of scheduled observations
    open_per_date: int = 3  # articles the scripted reader opens per date
    # 5. replay
    replay_events: int = 4
    # 6. siblings
    max_sibling_share: float = 0.01  # FAIL above this share of scheduled dates exposed by a visible question

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> AuditSettings:
        """Settings from a mapping (e.g. `--set` overrides); unknown keys are a ConfigError."""
        if not values:
            return cls()
        known = set(cls.__dataclass_fields__)
        bad = sorted(set(values) - known)
        if bad:
            raise ConfigError(f"audit settings: unknown key(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")
        out: dict[str, Any] = {}
        for k, v in values.items():
            default = getattr(cls(), k)
            if isinstance(default, bool):
                text = str(v).strip().lower()
                if text not in ("true", "false", "1", "0", "yes", "no"):
                    raise ConfigError(f"audit settings: {k}={v!r} is not true or false")
                out[k] = text in ("true", "1", "yes")
                continue
            try:
                out[k] = type(default)(v)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"audit settings: {k}={v!r} is not a {type(default).__name__}") from exc
        return cls(**out)


@dataclass
class AuditInputs:
    """The workspace tables every check reads, loaded once (polars frames)."""

    workspace: Workspace
    split: str
    events: pl.DataFrame  # every kept event (all splits)
    legs: pl.DataFrame
    beliefs: pl.DataFrame
    schedule: pl.DataFrame
    excluded: pl.DataFrame
    polymarket: Path | None = None
    _searcher: Any = None

    @property
    def split_events(self) -> pl.DataFrame:
        return self.events if self.split == "all" else self.events.filter(pl.col("split") == self.split)

    def searcher(self) -> Any:
        """The workspace's Searcher (opened once; WorkspaceError when the index is missing)."""
        if self._searcher is None:
            from forecast_env.retrieval import Searcher

            self._searcher = Searcher.open(self.workspace.root)
        return self._searcher


def load_inputs(workspace: str | Path, split: str, polymarket: str | Path | None = None) -> AuditInputs:
    """Read the events tables of `workspace` (WorkspaceError naming the build step when missing)."""
    from forecast_env.envs.events.build import load_events

    ws = Workspace.at(workspace)
    if not ws.root.is_dir():
        raise WorkspaceError(f"{ws.root}: no such workspace; build one with `forecast-env corpus build`, "
                             "`index build` and `events build`")
    if split not in ("train", "eval", "all"):
        raise ConfigError(f"audit: split {split!r} is not one of train, eval, all")
    t = load_events(ws.root)
    pm = Path(polymarket) if polymarket else None
    if pm is not None and not (pm / "gamma").is_dir():
        raise WorkspaceError(f"{pm}: not a Polymarket cache folder (no gamma/); pass the folder given to "
                             "`forecast-env events build --polymarket`")
    inputs = AuditInputs(ws, split, t.events, t.legs, t.beliefs, t.schedule, t.excluded, pm)
    if inputs.split_events.height == 0:
        raise WorkspaceError(f"{ws.root}: no events in split {split!r} (events in the workspace: "
                             f"{inputs.events.height}); audit another split with --split")
    return inputs


def as_day(value: Any) -> date | None:
    """A `date` from a date, datetime or ISO string (None for null)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])
