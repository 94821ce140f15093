"""The result shapes of SPEC.md, as Pydantic models shared by the library, server and CLI."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

FileStateName = Literal["unchanged", "changed", "missing"]


class RecordedFile(BaseModel):
    """A file a memo rests on, as it was when recorded."""

    path: str = Field(description="Path relative to root, with / separators.")
    sha256: str
    size: int


class CheckedFile(RecordedFile):
    """A recorded file with its state now."""

    state: FileStateName


class RecordResult(BaseModel):
    """Result of memory_exploration_record."""

    recorded: bool = True
    id: int
    project: str
    root: str
    replaced: bool
    semantic_index: bool = Field(
        description="False when no embedding model was available: found by words until one is."
    )
    files: list[RecordedFile]


class Match(BaseModel):
    """One recalled memo."""

    id: int
    question: str
    conclusion: str
    score: float
    matched_by: Literal["embedding", "words", "both"]
    status: Literal["fresh", "stale"]
    recorded_at: str
    files: list[CheckedFile]


class RecallResult(BaseModel):
    """Result of memory_exploration_recall."""

    project: str
    root: str
    query: str
    semantic_index: bool
    matches: list[Match]


class StaleMemo(BaseModel):
    """A memo with at least one changed or missing file."""

    id: int
    question: str
    changed: list[str]
    missing: list[str]


class StaleResult(BaseModel):
    """Result of memory_exploration_stale."""

    project: str
    root: str
    checked: int
    stale: list[StaleMemo]


class ForgetResult(BaseModel):
    """Result of memory_exploration_forget."""

    forgotten: bool = True
    id: int


class StaleEntry(StaleMemo):
    """A stale memo in the CLI's report, which may span projects."""

    project: str


class StaleReport(BaseModel):
    """What ``explomemo stale`` found: how many memos were checked, and the stale ones."""

    checked: int
    stale: list[StaleEntry]


class MemoSummary(BaseModel):
    """A memo as ``explomemo list`` shows it (no re-hashing)."""

    id: int
    project: str
    question: str
    root: str
    recorded_at: str
    files: int


class MemoDetail(BaseModel):
    """One memo in full, with its files' states (``explomemo show``)."""

    id: int
    project: str
    question: str
    conclusion: str
    root: str
    recorded_at: str
    status: Literal["fresh", "stale"]
    files: list[CheckedFile]


class ExportedFile(BaseModel):
    """A file line of an export."""

    path: str
    sha256: str
    xxh3: str
    size: int


class ExportedMemo(BaseModel):
    """One line of ``explomemo export``: a memo with everything needed to check it."""

    id: int
    project: str
    question: str
    conclusion: str
    root: str
    recorded_at: str
    files: list[ExportedFile]


class ImportResult(BaseModel):
    """What ``explomemo import`` did."""

    read: int
    added: int
    replaced: int
    kept: int
