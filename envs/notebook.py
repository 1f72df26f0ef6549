"""The agent's evidence ledger (docs/design.md §5): claims with the date they were observed and the
documents that support them; entries can be superseded but never deleted.

Memory on: one ledger persists across the forecast dates of an episode (in world mode, across the
days of the world, entries tagged with the question ids they concern). Memory off: the environment
starts every date (every day) with an empty ledger. `date_observed` is kept exactly as the agent
wrote it (it may be invalid; evaluation decides what counts).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


class NotebookError(ValueError):
    """An invalid notebook operation (reported to the agent as an error observation)."""


@dataclass
class NotebookEntry:
    """One ledger entry."""

    entry_id: int
    claim: str
    date_observed: str
    doc_ids: list[str]
    created_step: int
    status: str = "active"  # active | superseded
    superseded_reason: str | None = None
    question_ids: list[str] | None = None  # world mode only

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.question_ids is None:
            del d["question_ids"]
        return d


@dataclass
class Notebook:
    """An append-only ledger of `NotebookEntry` with supersession."""

    max_claim_chars: int = 1000
    entries: list[NotebookEntry] = field(default_factory=list)
    _dicts: list[dict[str, Any]] | None = field(default=None, init=False, repr=False, compare=False)

    def add(self, claim: str, date_observed: str, doc_ids: list[str], step: int,
            question_ids: list[str] | None = None) -> NotebookEntry:
        """Append an active entry; entry ids are 1, 2, ... in order of creation."""
        claim = claim.strip()
        if not claim:
            raise NotebookError("notebook_add: `claim` is empty; write the claim as a sentence")
        if len(claim) > self.max_claim_chars:
            raise NotebookError(
                f"notebook_add: `claim` has {len(claim)} characters; the limit is {self.max_claim_chars}"
            )
        entry = NotebookEntry(len(self.entries) + 1, claim, date_observed, list(doc_ids), step,
                              question_ids=None if question_ids is None else list(question_ids))
        self.entries.append(entry)
        self._dicts = None
        return entry

    def supersede(self, entry_id: int, reason: str) -> NotebookEntry:
        """Mark an active entry superseded, with the reason."""
        if not 1 <= entry_id <= len(self.entries):
            known = f"1..{len(self.entries)}" if self.entries else "none yet"
            raise NotebookError(f"notebook_supersede: no entry {entry_id} (entry ids: {known})")
        entry = self.entries[entry_id - 1]
        if entry.status == "superseded":
            raise NotebookError(f"notebook_supersede: entry {entry_id} is already superseded")
        if not reason.strip():
            raise NotebookError("notebook_supersede: `reason` is empty; say why the entry no longer holds")
        entry.status = "superseded"
        entry.superseded_reason = reason.strip()[: self.max_claim_chars]
        self._dicts = None
        return entry

    def to_list(self) -> list[dict[str, Any]]:
        """The entries as dicts, in creation order (a new list; the dicts are shared: do not modify)."""
        if self._dicts is None:  # built once per change: a world's notebook is shown at every step
            self._dicts = [e.to_dict() for e in self.entries]
        return list(self._dicts)

    def snapshot_rows(self, step: int) -> list[dict[str, Any]]:
        """Rows of schema.NOTEBOOK (without run_id/agent/event_id/rollout) as the ledger stands now."""
        return [{"step": step, **e.to_dict(), "question_ids": e.question_ids} for e in self.entries]

    def __len__(self) -> int:
        return len(self.entries)
