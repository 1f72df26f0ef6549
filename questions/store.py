"""The owner of `WS/questions/`: where the question pipeline's files live, and how they are read and written.

    WS/questions/recording.jsonl   every model request and its response, keyed by the request (model.py)
    WS/questions/drafts.jsonl      every draft of `generate`, with its verifiers' verdicts and drop reason
    WS/questions/generate.json     the generation run: dates, routes, model, prompts, tokens, counts
    WS/questions/questions.jsonl   every draft after `resolve`: votes, verdict, vetting, final status
    WS/questions/accepted.jsonl    the accepted questions in the own-questions format (source "generated")
    WS/questions/report.{json,md}  the funnel, agreement, distributions, tokens, examples (report.py)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from forecast_env.config import config_hash, load_config
from forecast_env.questions.records import Draft
from forecast_env.store import Workspace, atomic_write_json, atomic_write_text


@dataclass(frozen=True)
class QuestionFiles:
    """The paths of one workspace's question pipeline."""

    root: Path

    @classmethod
    def of(cls, workspace: str | Path | Workspace) -> QuestionFiles:
        ws = workspace if isinstance(workspace, Workspace) else Workspace.at(workspace)
        return cls(ws.root / "questions")

    @property
    def recording(self) -> Path:
        return self.root / "recording.jsonl"

    @property
    def drafts(self) -> Path:
        return self.root / "drafts.jsonl"

    @property
    def generate_info(self) -> Path:
        return self.root / "generate.json"

    @property
    def resolved(self) -> Path:
        return self.root / "questions.jsonl"

    @property
    def resolve_info(self) -> Path:
        return self.root / "resolve.json"

    @property
    def accepted(self) -> Path:
        return self.root / "accepted.jsonl"

    @property
    def report_json(self) -> Path:
        return self.root / "report.json"

    @property
    def report_md(self) -> Path:
        return self.root / "report.md"


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Rows as sorted-key JSON lines, written atomically."""
    text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


def read_drafts(path: Path) -> list[Draft]:
    """The drafts of a drafts/questions file (an empty list when there is none)."""
    if not path.exists():
        return []
    return [Draft.from_dict(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_drafts(path: Path, drafts: Iterable[Draft]) -> None:
    write_jsonl(path, (d.to_dict() for d in sorted(drafts, key=lambda d: d.qid)))


def write_info(path: Path, info: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, info)


def questions_config(config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The `questions` section with `config` over the defaults (every key read as `questions.KEY`, so that a key
    named like another section is never passed over)."""
    return load_config("questions", overrides={k if k.startswith("questions.") else f"questions.{k}": v
                                               for k, v in (config or {}).items()})


def hash_config(cfg: Mapping[str, Any]) -> str:
    """The config's hash without the settings that do not change an answer (where the endpoint is, how to retry)."""
    llm = {k: v for k, v in cfg["llm"].items() if k not in ("base_url", "api_key_env", "timeout_seconds", "max_retries",
                                                             "backoff_seconds", "max_backoff_seconds")}
    return config_hash({**{k: v for k, v in cfg.items() if k != "replay"}, "llm": llm})


def prompt_text(name: str, overrides: dict[str, Any] | None = None) -> str:
    """A packaged prompt (`questions/prompts/<name>.md`), or the file a config names instead."""
    if overrides and overrides.get(name):
        return Path(str(overrides[name])).read_text(encoding="utf-8")
    return resources.files("forecast_env.questions.prompts").joinpath(f"{name}.md").read_text(encoding="utf-8")


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
