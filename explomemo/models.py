"""The result shapes of the contract (see ``docs/reference.md``), as plain dataclasses.

They are shared by the library, the server and the CLI. Plain dataclasses, not
Pydantic models: the CLI's ``stale``, ``list``, ``show`` and ``hook`` print them
without importing Pydantic (building Pydantic models cost a short command most
of its start-up). The MCP server turns them into its output schemas; a field's
``description`` metadata is the description a client sees there.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from explomemo.printable import json_text

FileStateName = Literal["unchanged", "changed", "missing"]
DiffSource = Literal["snapshot", "git", "unavailable", "too_large"]


def described(text: str) -> Any:
    """A dataclass field whose description reaches the MCP output schema."""
    return field(metadata={"description": text})


def shown_when(shown: Callable[[Any], bool], text: str) -> Any:
    """An optional field (default None) that :func:`to_dict` writes only when ``shown(owner)``.

    Agents pay for every byte: a field that means nothing for most objects
    (a diff on an unchanged file) is left out of them rather than written as null.
    """
    return field(default=None, metadata={"description": text, "shown": shown})


def to_dict(result: Any) -> Any:
    """A result (or a list of them) as plain JSON-ready data, in field order."""
    if isinstance(result, list):
        return [to_dict(item) for item in result]
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        found: dict[str, Any] = {}
        for item in dataclasses.fields(result):
            shown = item.metadata.get("shown")
            if shown is not None and not shown(result):
                continue
            found[item.name] = to_dict(getattr(result, item.name))
        return found
    return result


def to_json(result: Any, indent: int | None = 2) -> str:
    """A result (or a list of them) as JSON text: UTF-8 characters kept as they are,
    except those a terminal would act on (see :func:`explomemo.printable.json_text`)."""
    return json_text(json.dumps(to_dict(result), indent=indent, ensure_ascii=False))


@dataclass(frozen=True, kw_only=True)
class RecordedFile:
    """A file a memo rests on, as it was when recorded."""

    path: str = described("Path relative to root, with / separators.")
    sha256: str
    size: int


def _is_changed(checked: CheckedFile) -> bool:
    return checked.state == "changed"


def _is_missing(checked: CheckedFile) -> bool:
    return checked.state == "missing"


@dataclass(frozen=True, kw_only=True)
class CheckedFile(RecordedFile):
    """A recorded file with its state now (a changed one with its diff, a missing one moved_to)."""

    state: FileStateName
    diff: str | None = shown_when(
        _is_changed, "Unified diff, recorded -> current content; null: diff_source says why."
    )
    diff_source: DiffSource | None = shown_when(
        _is_changed,
        "snapshot or git: where the recorded content came from; unavailable or too_large"
        " (over 1 MiB): why there is no diff.",
    )
    added: int | None = shown_when(_is_changed, "Lines added.")
    removed: int | None = shown_when(_is_changed, "Lines removed.")
    moved_to: str | None = shown_when(
        _is_missing, "A path in root now holding the recorded content (from git), or null."
    )


@dataclass(frozen=True, kw_only=True)
class RecordResult:
    """Result of memory_exploration_record."""

    recorded: bool = True
    id: int
    project: str
    root: str
    replaced: bool
    semantic_index: bool = described(
        "False when no embedding model was available: found by words until one is."
    )
    files: list[RecordedFile]


@dataclass(frozen=True, kw_only=True)
class Match:
    """One recalled memo."""

    id: int
    question: str
    conclusion: str
    score: float
    matched_by: Literal["embedding", "words", "both"]
    status: Literal["fresh", "stale"]
    recorded_at: str
    files: list[CheckedFile]


@dataclass(frozen=True, kw_only=True)
class RecallResult:
    """Result of memory_exploration_recall."""

    project: str
    root: str
    query: str
    semantic_index: bool
    matches: list[Match]


@dataclass(frozen=True, kw_only=True)
class StaleMemo:
    """A memo with at least one changed or missing file."""

    id: int
    question: str
    changed: list[str]
    missing: list[str]


@dataclass(frozen=True, kw_only=True)
class StaleResult:
    """Result of memory_exploration_stale."""

    project: str
    root: str
    checked: int
    stale: list[StaleMemo]


@dataclass(frozen=True, kw_only=True)
class ForgetResult:
    """Result of memory_exploration_forget."""

    forgotten: bool = True
    id: int
    project: str = described("The project the memo belonged to.")


@dataclass(frozen=True, kw_only=True)
class StaleEntry(StaleMemo):
    """A stale memo in the CLI's report, which may span projects."""

    project: str


@dataclass(frozen=True, kw_only=True)
class StaleReport:
    """What ``explomemo stale`` found: how many memos were checked, and the stale ones."""

    checked: int
    stale: list[StaleEntry]


@dataclass(frozen=True, kw_only=True)
class MemoSummary:
    """A memo as ``explomemo list`` shows it (no re-hashing)."""

    id: int
    project: str
    question: str
    root: str
    recorded_at: str
    files: int


@dataclass(frozen=True, kw_only=True)
class MemoDetail:
    """One memo in full, with its files' states (``explomemo show``)."""

    id: int
    project: str
    question: str
    conclusion: str
    root: str
    recorded_at: str
    status: Literal["fresh", "stale"]
    files: list[CheckedFile]


@dataclass(frozen=True, kw_only=True)
class ExportedFile:
    """A file line of an export."""

    path: str
    sha256: str
    xxh3: str
    size: int
    git_blob: str | None = shown_when(
        lambda f: f.git_blob is not None,
        "The git blob id of the recorded content (absent for memos recorded before blob ids).",
    )


@dataclass(frozen=True, kw_only=True)
class ExportedMemo:
    """One line of ``explomemo export``: a memo with everything needed to check it.

    An export holds no absolute root; ``root`` is read from exports written by
    earlier versions, never written.
    """

    id: int
    project: str
    question: str
    conclusion: str
    root: str | None = shown_when(lambda m: m.root is not None, "Recorded root (old exports).")
    recorded_at: str
    files: list[ExportedFile]


@dataclass(frozen=True, kw_only=True)
class ImportResult:
    """What ``explomemo import`` did."""

    read: int
    added: int
    replaced: int
    kept: int
