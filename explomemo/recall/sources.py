"""Where a memo cache gets its embedder: the :class:`ModelSource` protocol, and
:class:`FixedModel` for an embedder in hand (or none: words only).

The server's source loads the model in the background
(:class:`~explomemo.recall.embeddings.ModelLoader`); the command line loads it
before it runs and hands it over in a :class:`FixedModel`. This module imports
nothing, so a cache opened for ``list`` or ``stale`` loads no model code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from explomemo.recall.embeddings import Embedder


class ModelSource(Protocol):
    """Where the embedder comes from: loaded in the background, or given."""

    @property
    def enabled(self) -> bool:
        """False when embeddings are off."""
        ...

    def ready(self) -> Embedder | None:
        """The embedder if available now."""
        ...

    def wait(self, timeout: float | None) -> Embedder | None:
        """The embedder, waiting up to ``timeout`` seconds."""
        ...

    def when_loaded(self, callback: Callable[[Embedder], None]) -> None:
        """Call ``callback`` with the embedder once it is loaded (at once if it is)."""
        ...


class FixedModel:
    """A ModelSource for an embedder already in hand (or None: words only)."""

    def __init__(self, embedder: Embedder | None) -> None:
        self.embedder = embedder

    @property
    def enabled(self) -> bool:
        """True when there is an embedder."""
        return self.embedder is not None

    def ready(self) -> Embedder | None:
        """The embedder."""
        return self.embedder

    def wait(self, timeout: float | None) -> Embedder | None:
        """The embedder, at once."""
        return self.embedder

    def when_loaded(self, callback: Callable[[Embedder], None]) -> None:
        """Call ``callback`` with the embedder now, if there is one."""
        if self.embedder is not None:
            callback(self.embedder)
