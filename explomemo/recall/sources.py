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

    @property
    def loading(self) -> bool:
        """True while the model is being loaded (it may come later)."""
        ...

    def ready(self) -> Embedder | None:
        """The embedder if available now."""
        ...

    def skips(self, needs: Callable[[str], bool]) -> bool:
        """Whether a search may do without the embedder: it is not loaded yet, and
        ``needs(model id)`` says the memos searched hold no vector of it and more of
        them lack one than the search would embed."""
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

    @property
    def loading(self) -> bool:
        """False: the embedder is in hand, or there is none."""
        return False

    def ready(self) -> Embedder | None:
        """The embedder."""
        return self.embedder

    def skips(self, needs: Callable[[str], bool]) -> bool:
        """False: the embedder is in hand."""
        return False

    def wait(self, timeout: float | None) -> Embedder | None:
        """The embedder, at once."""
        return self.embedder

    def when_loaded(self, callback: Callable[[Embedder], None]) -> None:
        """Call ``callback`` with the embedder now, if there is one."""
        if self.embedder is not None:
            callback(self.embedder)


class LazyModel:
    """A ModelSource for a command: the embedder ``load`` gives, loaded the first time it is
    asked for, never when a search can do without it (see :meth:`skips`)."""

    def __init__(self, model_id: str | None, load: Callable[[], Embedder | None]) -> None:
        #: The id of the model ``load`` loads (None: embeddings off).
        self.model_id = model_id
        self._load = load
        self._loaded = False
        self._embedder: Embedder | None = None

    @property
    def enabled(self) -> bool:
        """False when embeddings are off."""
        return self.model_id is not None

    @property
    def loading(self) -> bool:
        """False: it loads when asked, in the caller's thread."""
        return False

    def ready(self) -> Embedder | None:
        """The embedder, loaded now if it was not yet."""
        if not self._loaded and self.model_id is not None:
            self._embedder = self._load()
            self._loaded = True
        return self._embedder

    def wait(self, timeout: float | None) -> Embedder | None:
        """The embedder, loaded now if it was not yet."""
        return self.ready()

    def when_loaded(self, callback: Callable[[Embedder], None]) -> None:
        """Call ``callback`` with the embedder (loaded now), if there is one."""
        embedder = self.ready()
        if embedder is not None:
            callback(embedder)

    def skips(self, needs: Callable[[str], bool]) -> bool:
        """True when the model is not loaded yet and the search does not need it (right
        after a large import, no memo has its vectors): loading it would cost the command
        a second or more for nothing."""
        return not self._loaded and self.model_id is not None and not needs(self.model_id)
