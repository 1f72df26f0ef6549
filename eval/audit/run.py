"""`forecast-env audit`: six checks that the environment leaks nothing but the news (docs/design.md §8).

```python
from forecast_env.eval.audit.run import run_audit
report = run_audit("ws", split="eval")       # -> AuditReport
report.verdict                               # PASS | FAIL | INCONCLUSIVE
report.write("ws/audit")                     # audit.md + audit.json with every figure
```

The checks, each PASS / FAIL / INCONCLUSIVE (too little data to tell; reported, not a failure):

1. `schedule`   - schedule invariants on the stored tables, and the schedule rebuilt with every other
                  label and with `closedTime` moved earlier (`schedule.py`);
2. `structure`  - the blind-structure probe (conditional logits, train -> audited split) and the
                  inclusion-bias report (`structure.py`);
3. `retrieval`  - random (query, date) probes, BM25 and dense search rebuilt from the articles visible
                  on sampled days, dedup suppressions pointing back in time (`retrieval.py`);
4. `text`       - an independent detector of post-date facts and resolutions in what the environment
                  shows at each scheduled date (`text.py`);
5. `replay`     - two runs of a scripted agent with one seed give identical episode logs
                  (`replay.py`);
6. `siblings`   - no question visible on a forecast date gives another's answer away: a direct count with
                  an independent detector, and a probe in check 2's frame (`siblings.py`).

The audit's overall verdict is FAIL when any check fails, else INCONCLUSIVE when any check is,
else PASS. The CLI exits 1 on FAIL (naming the failed checks) and 2 on bad input.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from forecast_env.errors import ConfigError
from forecast_env.eval.audit.inputs import (
    CHECKS,
    FAIL,
    INCONCLUSIVE,
    PASS,
    TITLES,
    VERDICTS,
    AuditInputs,
    AuditSettings,
    CheckResult,
    as_day,
    load_inputs,
)
from forecast_env.store import atomic_write_json, atomic_write_text

__all__ = ["CHECKS", "FAIL", "INCONCLUSIVE", "PASS", "TITLES", "VERDICTS", "AuditInputs", "AuditReport",
           "AuditSettings", "CheckResult", "as_day", "load_inputs", "run_audit"]

@dataclass
class AuditReport:
    """Every check's result on one workspace and split."""

    workspace: str
    split: str
    checks: list[CheckResult]
    created: str = ""
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        verdicts = {c.verdict for c in self.checks}
        if FAIL in verdicts:
            return FAIL
        if INCONCLUSIVE in verdicts:
            return INCONCLUSIVE
        return PASS

    @property
    def failed(self) -> list[str]:
        return [c.name for c in self.checks if c.verdict == FAIL]

    def check(self, name: str) -> CheckResult:
        """The result of the check called `name`."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check {name!r} in this audit (ran: {', '.join(c.name for c in self.checks)})")

    def verdict_line(self) -> str:
        """One line: the overall verdict and each check's, failures named first."""
        parts = [f"{c.name} {c.verdict}" for c in self.checks]
        head = f"audit {self.verdict}"
        if self.failed:
            head += f" (failed: {', '.join(self.failed)})"
        return f"{head}: {'; '.join(parts)}"

    def to_dict(self) -> dict[str, Any]:
        return {"workspace": self.workspace, "split": self.split, "created": self.created, "verdict": self.verdict,
                "failed": self.failed, "settings": self.settings, "checks": [c.to_dict() for c in self.checks]}

    def to_markdown(self) -> str:
        """The report as Markdown: a summary table, then each check's figures and examples."""
        lines = [f"# Audit of `{self.workspace}` (split `{self.split}`)", "",
                 f"**Verdict: {self.verdict}**" + (f" - failed: {', '.join(self.failed)}" if self.failed else ""),
                 "", "| check | verdict | reason |", "|---|---|---|"]
        for c in self.checks:
            mark = f"**{c.verdict}**" if c.verdict != PASS else c.verdict
            lines.append(f"| {c.title} | {mark} | {_md(c.reason)} |")
        inconclusive = [c.name for c in self.checks if c.verdict == INCONCLUSIVE]
        if inconclusive:
            lines += ["", f"> INCONCLUSIVE ({', '.join(inconclusive)}): too little data to tell; "
                          "not a failure, but no guarantee either."]
        for c in self.checks:
            lines += ["", f"## {c.title}: {c.verdict}", "", _md(c.reason), "", f"({c.seconds:.1f}s)", ""]
            if c.failures:
                lines += ["Failed:", *[f"- {_md(f)}" for f in c.failures], ""]
            lines += _figures_md(c.figures)
            if c.examples:
                lines += ["", f"Examples ({len(c.examples)}):", ""]
                for ex in c.examples[:20]:
                    lines.append(f"- {_md(json.dumps(ex, default=str, ensure_ascii=False))[:600]}")
        lines.append("")
        return "\n".join(lines)

    def write(self, out_dir: str | Path) -> dict[str, Path]:
        """Write `audit.json` and `audit.md` into `out_dir`; returns their paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / "audit.json", "md": out / "audit.md"}
        atomic_write_json(paths["json"], self.to_dict())
        atomic_write_text(paths["md"], self.to_markdown())
        return paths


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _figures_md(figures: Mapping[str, Any]) -> list[str]:
    """Scalars as a two-column table; lists of flat dicts as their own tables; the rest as JSON."""
    scalars = {k: v for k, v in figures.items() if not isinstance(v, (dict, list))}
    lines: list[str] = []
    if scalars:
        lines += ["| figure | value |", "|---|---|"]
        for k, v in scalars.items():
            lines.append(f"| {k} | {_fmt(v)} |")
    for k, v in figures.items():
        if isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
            cols = list(dict.fromkeys(c for r in v for c in r))
            lines += ["", f"{k}:", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
            for r in v[:60]:
                lines.append("| " + " | ".join(_md(_fmt(r.get(c))) for c in cols) + " |")
            if len(v) > 60:
                lines.append(f"| ... {len(v) - 60} more rows in audit.json |" + " |" * (len(cols) - 1))
        elif isinstance(v, (dict, list)):
            lines += ["", f"{k}: `{_md(json.dumps(v, default=str))[:1500]}`"]
    return lines


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


#: A check: (inputs, settings, progress) -> CheckResult.
Check = Callable[..., CheckResult]


def run_audit(
    workspace: str | Path,
    split: str = "eval",
    *,
    checks: Sequence[str] | None = None,
    settings: AuditSettings | Mapping[str, Any] | None = None,
    polymarket: str | Path | None = None,
    schedule_builder: Any = None,
    agent_factory: Callable[[int], Any] | None = None,
    progress: bool = False,
) -> AuditReport:
    """Run the audit's checks on `workspace` (split `eval` by default) and return the report.

    `checks` narrows the run (names in `CHECKS`); `polymarket` (the cache the events were built
    from) lets the inclusion-bias report label the excluded events and the schedule check recompute
    `d_known` from raw prices; `schedule_builder` and `agent_factory` replace the build's schedule
    function and the scripted agent (tests plant leaks through them).
    """
    from forecast_env.eval.audit import replay as audit_replay
    from forecast_env.eval.audit import retrieval as audit_retrieval
    from forecast_env.eval.audit import schedule as audit_schedule
    from forecast_env.eval.audit import siblings as audit_siblings
    from forecast_env.eval.audit import structure as audit_structure
    from forecast_env.eval.audit import text as audit_text

    st = settings if isinstance(settings, AuditSettings) else AuditSettings.from_mapping(settings)
    wanted = list(checks) if checks else list(CHECKS)
    unknown = [c for c in wanted if c not in CHECKS]
    if unknown:
        raise ConfigError(f"audit: unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    inputs = load_inputs(workspace, split, polymarket)
    runners: dict[str, Callable[[], CheckResult]] = {
        "schedule": lambda: audit_schedule.check_schedule(inputs, st, builder=schedule_builder),
        "structure": lambda: audit_structure.check_structure(inputs, st),
        "retrieval": lambda: audit_retrieval.check_retrieval(inputs, st, progress=progress),
        "text": lambda: audit_text.check_text(inputs, st, progress=progress),
        "replay": lambda: audit_replay.check_replay(inputs, st, agent_factory=agent_factory),
        "siblings": lambda: audit_siblings.check_siblings(inputs, st),
    }
    results = []
    for name in CHECKS:
        if name not in wanted:
            continue
        t0 = time.perf_counter()
        res = runners[name]()
        res.seconds = round(time.perf_counter() - t0, 3)
        if res.verdict not in VERDICTS:  # a programming error in a check, not a user error
            raise ValueError(f"check {name} returned verdict {res.verdict!r}")
        results.append(res)
    created = datetime.now(UTC).replace(microsecond=0).isoformat()
    return AuditReport(str(inputs.workspace.root), split, results, created, asdict(st))
