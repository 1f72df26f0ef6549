"""The agent's evidence ledger (docs/design.md §5): claims with the date they were observed and the
documents that support them; entries can be superseded but never deleted.

Memory on: one ledger persists across the forecast dates of an episode. Memory off: the
environment starts every date with an empty ledger. `date_observed` is kept exactly as the agent
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Notebook:
    """An append-only ledger of `NotebookEntry` with supersession."""

    max_claim_chars: int = 1000
    entries: list[NotebookEntry] = field(default_factory=list)

    def add(self, claim: str, date_observed: str, doc_ids: list[str], step: int) -> NotebookEntry:
        """Append an active entry; entry ids are 1, 2, ... in order of creation."""
        claim = claim.strip()
        if not claim:
            raise NotebookError("notebook_add: `claim` is empty; write the claim as a sentence")
        if len(claim) > self.max_claim_chars:
            raise NotebookError(
                f"notebook_add: `claim` has {len(claim)} characters; the limit is {self.max_claim_chars}"
            )
        entry = NotebookEntry(len(self.entries) + 1, claim, date_observed, list(doc_ids), step)
        self.entries.append(entry)
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
        return entry

    def clear(self) -> None:
        self.entries = []

    def to_list(self) -> list[dict[str, Any]]:
        """The entries as dicts, in creation order."""
        return [e.to_dict() for e in self.entries]

    def snapshot_rows(self, step: int) -> list[dict[str, Any]]:
        """Rows of schema.NOTEBOOK (without run_id/agent/event_id/rollout) as the ledger stands now."""
        return [{"step": step, **e.to_dict()} for e in self.entries]

    def __len__(self) -> int:
        return len(self.entries)
