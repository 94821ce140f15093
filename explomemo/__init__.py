"""explomemo: an exploration-memo cache for coding agents, keyed by file hashes.

The public library API is what this module names (``__all__``): the memo cache
:class:`MemoCache` and :class:`FixedModel`, the model source it takes; the
errors, all of them :class:`ExplomemoError`; and the result shapes the cache
returns. Each is imported when first used, so ``import explomemo`` loads
nothing else and the short commands stay fast. Everything else is internal
and may move; ``docs/design.md`` shows how the package is laid out::

    import explomemo

    with explomemo.MemoCache.open() as cache:  # words only; see FixedModel
        result = cache.recall(query="how is auth wired?", root="/path/to/repo")
"""

from __future__ import annotations

# Not typing's: importing typing would cost `import explomemo` a dozen modules.
TYPE_CHECKING = False

__version__ = "0.1.0"

#: Each public name and the module that defines it.
_PUBLIC = {
    "MemoCache": "explomemo.memos.cache",
    "FixedModel": "explomemo.recall.sources",
    "ModelSource": "explomemo.recall.sources",
    **dict.fromkeys(
        (
            "ExplomemoError",
            "InputError",
            "PathError",
            "NotFoundError",
            "StoreError",
            "NoDatabaseError",
            "ExportFileError",
            "ModelError",
            "SetupError",
            "HookInputError",
            "DeadlineError",
            "TranscriptError",
            "OutputError",
        ),
        "explomemo.errors",
    ),
    **dict.fromkeys(
        (
            "RecordedFile",
            "CheckedFile",
            "RecordResult",
            "Match",
            "RecallResult",
            "StaleMemo",
            "StaleResult",
            "ForgetResult",
            "StaleEntry",
            "StaleReport",
            "MemoSummary",
            "MemoDetail",
            "ExportedFile",
            "ExportedMemo",
            "ImportResult",
            "SurfaceSavings",
            "ProjectStats",
            "StatsResult",
        ),
        "explomemo.shapes",
    ),
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'explomemo' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from typing import Any

    from explomemo.errors import (
        DeadlineError as DeadlineError,
    )
    from explomemo.errors import (
        ExplomemoError as ExplomemoError,
    )
    from explomemo.errors import (
        ExportFileError as ExportFileError,
    )
    from explomemo.errors import (
        HookInputError as HookInputError,
    )
    from explomemo.errors import (
        InputError as InputError,
    )
    from explomemo.errors import (
        ModelError as ModelError,
    )
    from explomemo.errors import (
        NoDatabaseError as NoDatabaseError,
    )
    from explomemo.errors import (
        NotFoundError as NotFoundError,
    )
    from explomemo.errors import (
        OutputError as OutputError,
    )
    from explomemo.errors import (
        PathError as PathError,
    )
    from explomemo.errors import (
        SetupError as SetupError,
    )
    from explomemo.errors import (
        StoreError as StoreError,
    )
    from explomemo.errors import (
        TranscriptError as TranscriptError,
    )
    from explomemo.memos.cache import MemoCache as MemoCache
    from explomemo.recall.sources import FixedModel as FixedModel
    from explomemo.recall.sources import ModelSource as ModelSource
    from explomemo.shapes import (
        CheckedFile as CheckedFile,
    )
    from explomemo.shapes import (
        ExportedFile as ExportedFile,
    )
    from explomemo.shapes import (
        ExportedMemo as ExportedMemo,
    )
    from explomemo.shapes import (
        ForgetResult as ForgetResult,
    )
    from explomemo.shapes import (
        ImportResult as ImportResult,
    )
    from explomemo.shapes import (
        Match as Match,
    )
    from explomemo.shapes import (
        MemoDetail as MemoDetail,
    )
    from explomemo.shapes import (
        MemoSummary as MemoSummary,
    )
    from explomemo.shapes import (
        ProjectStats as ProjectStats,
    )
    from explomemo.shapes import (
        RecallResult as RecallResult,
    )
    from explomemo.shapes import (
        RecordedFile as RecordedFile,
    )
    from explomemo.shapes import (
        RecordResult as RecordResult,
    )
    from explomemo.shapes import (
        StaleEntry as StaleEntry,
    )
    from explomemo.shapes import (
        StaleMemo as StaleMemo,
    )
    from explomemo.shapes import (
        StaleReport as StaleReport,
    )
    from explomemo.shapes import (
        StaleResult as StaleResult,
    )
    from explomemo.shapes import (
        StatsResult as StatsResult,
    )
    from explomemo.shapes import (
        SurfaceSavings as SurfaceSavings,
    )
