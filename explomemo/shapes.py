"""The result shapes of the contract (see ``docs/reference.md``), as small frozen classes.

They are shared by the library, the server and the CLI. Each is a
:class:`Shape`: built by keyword only, frozen, compared and hashed by value,
like a frozen ``kw_only`` dataclass, but made without the dataclasses module.
The CLI's ``stale``, ``list``, ``show`` and ``hook`` print them and must start
fast: importing dataclasses (and inspect with it) and generating the methods
of sixteen dataclasses cost those commands about 1.4 times ``python -c pass``
of start-up, a shape costs nothing to build. Not Pydantic models either
(building those cost a short command most of its start-up). The MCP server
turns them into its output schemas (see :func:`fields`); a field's
``description`` is the description a client sees there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar, dataclass_transform

from explomemo.inputs import Origin
from explomemo.printable import json_text

FileStateName = Literal["unchanged", "changed", "missing"]
DiffSource = Literal["snapshot", "git", "unavailable", "too_large", "budget"]

_REQUIRED: Any = object()


class Field:
    """One field of a shape: its name, default, description, and when it is shown."""

    __slots__ = ("default", "description", "name", "shown")

    def __init__(
        self,
        default: Any = _REQUIRED,
        description: str | None = None,
        shown: Callable[[Any], bool] | None = None,
    ) -> None:
        self.name = ""
        self.default = default
        self.description = description
        self.shown = shown

    @property
    def required(self) -> bool:
        """True when the field has no default."""
        return self.default is _REQUIRED


def described(text: str) -> Any:
    """A field whose description reaches the MCP output schema."""
    return Field(description=text)


def shown_when(shown: Callable[[Any], bool], text: str | None, default: Any = None) -> Any:
    """An optional field (default None) that :func:`to_dict` writes only when ``shown(owner)``.

    Agents pay for every byte: a field that means nothing for most objects
    (a diff on an unchanged file) is left out of them rather than written as null.
    ``default`` gives it another default.
    """
    return Field(default=default, description=text, shown=shown)


@dataclass_transform(kw_only_default=True, frozen_default=True)
class Shape:
    """Base of the result shapes: its annotated class attributes are its fields, in order
    (a subclass's after its base's), each with its default when it has one."""

    __shape_fields__: ClassVar[tuple[Field, ...]] = ()
    __shape_defaults__: ClassVar[dict[str, Any]] = {}
    __shape_required__: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **options: Any) -> None:
        super().__init_subclass__(**options)
        found = {item.name: item for item in cls.__shape_fields__}
        # The class's own annotations (as strings); not inspect.get_annotations:
        # importing inspect is what this module avoids.
        own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
        for name in own:
            value = cls.__dict__.get(name, _REQUIRED)
            item = value if isinstance(value, Field) else Field(default=value)
            item.name = name
            found[name] = item
            # As a dataclass does: the class attribute is the default, if any.
            if item.required:
                if name in cls.__dict__:
                    delattr(cls, name)
            else:
                setattr(cls, name, item.default)
        cls.__shape_fields__ = tuple(found.values())
        cls.__shape_defaults__ = {i.name: i.default for i in found.values() if not i.required}
        cls.__shape_required__ = frozenset(i.name for i in found.values() if i.required)

    def __init__(self, **values: Any) -> None:
        missing = self.__shape_required__ - values.keys()
        if missing:
            raise TypeError(
                f"{type(self).__qualname__}() missing required keyword argument {min(missing)!r}"
            )
        unknown = values.keys() - self.__shape_required__ - self.__shape_defaults__.keys()
        if unknown:
            raise TypeError(
                f"{type(self).__qualname__}() got an unexpected keyword argument {min(unknown)!r}"
            )
        self.__dict__.update(self.__shape_defaults__, **values)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, item.name) for item in self.__shape_fields__)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Shape)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{item.name}={getattr(self, item.name)!r}" for item in self.__shape_fields__
        )
        return f"{type(self).__qualname__}({shown})"


S = TypeVar("S", bound=Shape)


def fields(shape: Shape | type[Shape]) -> tuple[Field, ...]:
    """The fields of a shape (class or instance), in order."""
    return shape.__shape_fields__


def replace(shape: S, /, **changes: Any) -> S:
    """A copy of ``shape`` with the given fields changed."""
    values = {item.name: getattr(shape, item.name) for item in shape.__shape_fields__}
    values.update(changes)
    return type(shape)(**values)


def to_dict(result: Any) -> Any:
    """A result (or a list of them) as plain JSON-ready data, in field order."""
    if isinstance(result, list):
        return [to_dict(item) for item in result]
    if isinstance(result, Shape):
        found: dict[str, Any] = {}
        for item in result.__shape_fields__:
            if item.shown is not None and not item.shown(result):
                continue
            found[item.name] = to_dict(getattr(result, item.name))
        return found
    return result


def to_json(result: Any, indent: int | None = 2) -> str:
    """A result (or a list of them) as JSON text: UTF-8 characters kept as they are,
    except those a terminal would act on (see :func:`explomemo.printable.json_text`)."""
    return json_text(json.dumps(to_dict(result), indent=indent, ensure_ascii=False))


class RecordedFile(Shape):
    """A file a memo rests on, as it was when recorded."""

    path: str = described("Path relative to root, with / separators.")
    sha256: str
    size: int


def _is_changed(checked: CheckedFile) -> bool:
    return checked.state == "changed"


def _is_missing(checked: CheckedFile) -> bool:
    return checked.state == "missing"


class CheckedFile(RecordedFile):
    """A recorded file with its state now (a changed one with its diff, a missing one moved_to)."""

    state: FileStateName
    diff: str | None = shown_when(
        _is_changed, "Unified diff, recorded -> current content; null: diff_source says why."
    )
    diff_source: DiffSource | None = shown_when(
        _is_changed,
        "snapshot or git: the recorded content's source; else why no diff: unavailable,"
        " too_large (>1 MiB), budget.",
    )
    added: int | None = shown_when(_is_changed, "Lines added.")
    removed: int | None = shown_when(_is_changed, "Lines removed.")
    moved_to: str | None = shown_when(
        _is_missing, "A path in root now holding the recorded content (from git), or null."
    )


class RecordResult(Shape):
    """Result of memory_exploration_record."""

    recorded: bool = True
    id: int
    project: str
    root: str
    replaced: bool
    semantic_index: bool = described(
        "False when no embedding model was available: found by words until one is."
    )
    origin: Origin
    files: list[RecordedFile]


def _is_whole(match: Match) -> bool:
    return match.whole


def _has_agent_type(memo: Any) -> bool:
    return memo.agent_type is not None and getattr(memo, "whole", True)


def _has_cost(memo: Any) -> bool:
    return memo.cost_tokens is not None and getattr(memo, "whole", True)


class Match(Shape):
    """One recalled memo: whole (its conclusion and files), or lean (``whole`` false)."""

    id: int
    question: str
    conclusion: str | None = shown_when(_is_whole, None)
    score: float
    matched_by: Literal["embedding", "words", "both"]
    status: Literal["fresh", "stale"]
    recorded_at: str
    origin: Origin | None = shown_when(lambda match: match.origin is not None, None)
    # True for a memo that came in through import (docs/reference.md); undescribed in the
    # tools' output schemas, whose bytes every session pays for.
    imported: bool = shown_when(lambda memo: memo.imported, None, default=False)
    files: list[CheckedFile] | None = shown_when(_is_whole, None)
    # A lean stale match's changed and missing files: {"a.py": "+3 -1", "b.py": "missing"}.
    # Undescribed in the output schema (every session pays for its bytes); the values say it.
    changed: dict[str, str] | None = shown_when(lambda match: match.changed is not None, None)
    whole: bool = shown_when(
        lambda match: not match.whole,
        "false: lean; memory_exploration_show gives it whole.",
        default=True,
    )


#: A lean match's question at most, in characters, its cut marked by its last one (…).
LEAN_QUESTION_CHARS = 120


def _lines_changed(f: CheckedFile) -> str:
    """A changed or missing file of a lean match: ``+added -removed`` (``changed`` when they
    are not known), or ``missing``."""
    if f.state == "missing":
        return "missing"
    if f.added is None or f.removed is None:
        return "changed"
    return f"+{f.added} -{f.removed}"


def shortened(text: str) -> str:
    """``text`` cut to :data:`LEAN_QUESTION_CHARS`, its cut marked by its last one (…): a
    lean match's question, and the query a recall echoes."""
    if len(text) > LEAN_QUESTION_CHARS:
        return text[: LEAN_QUESTION_CHARS - 1] + "…"
    return text


def lean_match(match: Match, files: list[CheckedFile] | None = None) -> Match:
    """``match`` lean: its question cut to :data:`LEAN_QUESTION_CHARS`, no conclusion nor
    files; for a stale one, ``files`` (described, diffs or not) give its changed and missing
    files, each with the lines it changed (see :func:`_lines_changed`)."""
    question = shortened(match.question)
    changed = None
    if match.status == "stale" and files is not None:
        changed = {f.path: _lines_changed(f) for f in files if f.state != "unchanged"}
    return replace(
        match, question=question, conclusion=None, files=None, changed=changed, whole=False
    )


#: A recall's answer at most, in characters of its JSON indented by two (as
#: :func:`to_json` writes it; the MCP tool's compact text is shorter): about 10,000
#: tokens, 5 % of a 200k-token context. Matches are kept in rank order while the
#: answer fits: the first always (whole when it clearly answers, its diffs cut further to
#: fit), the others lean.
RECALL_CHARS = 40_000


def match_chars(match: Match) -> int:
    """What ``match`` adds to a recall's JSON as :data:`RECALL_CHARS` counts it: there
    each of its lines is indented four more spaces, and it takes a comma and a new line."""
    text = to_json(match)
    return len(text) + 4 * text.count("\n") + 6


class RecallResult(Shape):
    """Result of memory_exploration_recall."""

    project: str
    root: str
    query: str
    semantic_index: bool
    pending_vectors: int = shown_when(
        lambda result: result.pending_vectors > 0,
        "Memos searched by words only (vectors not ready yet).",
        default=0,
    )
    matches: list[Match]
    omitted: int = shown_when(
        lambda result: result.omitted > 0,
        f"Matches left out to keep the answer within {RECALL_CHARS:,} characters.",
        default=0,
    )
    stale_left_out: int = shown_when(
        lambda result: result.stale_left_out > 0,
        "Stale matches not returned.",
        default=0,
    )

    @property
    def served_whole(self) -> list[Match]:
        """The matches that came whole, conclusion and files: what the agent was served."""
        return [match for match in self.matches if match.whole]


class StaleMemo(Shape):
    """A memo with at least one changed or missing file."""

    id: int
    question: str
    changed: list[str]
    missing: list[str]


class StaleResult(Shape):
    """Result of memory_exploration_stale."""

    project: str
    root: str
    checked: int
    stale: list[StaleMemo]


class ForgetResult(Shape):
    """Result of memory_exploration_forget."""

    forgotten: bool = True
    id: int
    project: str = described("The project the memo belonged to.")


class StaleEntry(StaleMemo):
    """A stale memo in the CLI's report, which may span projects."""

    project: str


class StaleReport(Shape):
    """What ``explomemo stale`` found: how many memos were checked, and the stale ones."""

    checked: int
    stale: list[StaleEntry]


class MemoSummary(Shape):
    """A memo as ``explomemo list`` shows it (no re-hashing)."""

    id: int
    project: str
    question: str
    root: str
    recorded_at: str
    origin: Origin
    # True for a memo that came in through import (docs/reference.md); undescribed in the
    # tools' output schemas, whose bytes every session pays for.
    imported: bool = shown_when(lambda memo: memo.imported, None, default=False)
    agent_type: str | None = shown_when(_has_agent_type, None)
    cost_tokens: int | None = shown_when(_has_cost, None)
    files: int


class MemoDetail(Shape):
    """One memo in full, with its files' states (``explomemo show``)."""

    id: int
    project: str
    question: str
    conclusion: str
    root: str
    recorded_at: str
    origin: Origin
    # True for a memo that came in through import (docs/reference.md); undescribed in the
    # tools' output schemas, whose bytes every session pays for.
    imported: bool = shown_when(lambda memo: memo.imported, None, default=False)
    agent_type: str | None = shown_when(_has_agent_type, None)
    cost_tokens: int | None = shown_when(_has_cost, None)
    status: Literal["fresh", "stale"]
    files: list[CheckedFile]


class ExportedFile(Shape):
    """A file line of an export."""

    path: str
    sha256: str
    xxh3: str
    size: int
    git_blob: str | None = shown_when(
        lambda f: f.git_blob is not None,
        "The git blob id of the recorded content (absent for memos recorded before blob ids).",
    )


class ExportedMemo(Shape):
    """One line of ``explomemo export``: a memo with everything needed to check it.

    An export holds no absolute root (the ``root`` that earlier versions wrote is
    ignored when read: a root is never taken from a file). ``root_in_repo`` is the
    memo's root relative to the top of the git work tree it was recorded in, left out
    for a memo recorded at the top or outside git (``.``, the top, is read too).
    """

    id: int
    project: str
    question: str
    conclusion: str
    root_in_repo: str | None = shown_when(
        lambda m: m.root_in_repo is not None,
        "The recorded root relative to the top of its git work tree, below the top.",
    )
    recorded_at: str
    origin: Origin = shown_when(
        lambda m: m.origin != "agent",
        "transcript or subagent for a memo a hook captured; absent (agent) for an agent's memo.",
        default="agent",
    )
    agent_type: str | None = shown_when(
        _has_agent_type, "A subagent memo's agent type (Explore, Plan, ...)."
    )
    cost_tokens: int | None = shown_when(
        _has_cost, "A subagent memo's run cost in tokens, when known."
    )
    files: list[ExportedFile]
    repository: str | None = shown_when(
        lambda m: m.repository is not None,
        "The first root commit of the repository it was recorded in; left out when unknown"
        " (outside git, a shallow clone), which matches any repository.",
    )


class ImportResult(Shape):
    """What ``explomemo import`` did."""

    read: int
    added: int
    replaced: int
    kept: int


Surface = Literal["recall", "show", "prompt", "delegation"]


def _is_delegation(savings: SurfaceSavings) -> bool:
    return savings.surface == "delegation"


class SurfaceSavings(Shape):
    """What one surface served of a project's memos (``explomemo stats``)."""

    surface: Surface = described(
        "recall (the tool or explomemo recall), show (the tool or explomemo show), prompt"
        " (the Claude Code prompt hook), delegation (delegated runs the Claude Code"
        " delegate hook answered from a memo)."
    )
    served: int = described(
        "Memos served, once per memo and session: fresh and whole (delegation: also stale"
        " memos handed to the run, which went on)."
    )
    bytes_spared: int = described(
        "The recorded sizes of their files, less the files the session had read anyway"
        " (delegation: 0, it spares runs)."
    )
    fresh: int | None = shown_when(
        _is_delegation, "Delegations answered from a fresh memo: the run did not happen."
    )
    stale: int | None = shown_when(
        _is_delegation,
        "Delegations answered from a stale memo: handed to the run with what changed; served,"
        " not spared.",
    )
    tokens_spared: int | None = shown_when(
        _is_delegation, "The tokens of the runs that made the fresh memos: the runs spared."
    )


class ProjectStats(Shape):
    """One project's memos and what serving them spared (``explomemo stats``)."""

    project: str
    memos: int
    fresh: int
    stale: int
    origins: dict[str, int] = described("Memos by origin (agent, transcript, subagent).")
    served: int = described("Memos served, by every surface.")
    bytes_spared: int = described("Bytes of reading spared, by every surface.")
    tokens_spared: int = described("Tokens of delegated runs spared (fresh delegation answers).")
    sessions: int = described("Sessions that were spared some reading or a delegated run.")
    surfaces: list[SurfaceSavings]


class StatsResult(Shape):
    """What ``explomemo stats`` prints: each project's memos and savings, by project."""

    projects: list[ProjectStats]
