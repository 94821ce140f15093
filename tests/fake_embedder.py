"""A deterministic fake embedder for unit tests (the real model is tested too)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from explomemo.recall.embeddings import Embedder


class FakeEmbedder:
    """Maps each text to a vector chosen by a function; counts the texts it embeds."""

    def __init__(
        self, vector_of: Callable[[str], Sequence[float]], model_id: str = "fake-model"
    ) -> None:
        self.model_id = model_id
        self._vector_of = vector_of
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.embedded.extend(texts)
        rows = np.asarray([self._vector_of(t) for t in texts], dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        result: npt.NDArray[np.float32] = rows / norms
        return result


class HeldEmbedder:
    """Another embedder (the real one, or a fake) that embeds memo texts only once ``gate`` is
    set: a model held still, so a test sees what happens while vectors are being computed.

    Queries (one line) go through at once; memo texts (question, file names and
    conclusion on several lines) wait. ``embedded`` lists the texts it embedded.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.gate = threading.Event()
        self.embedded: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        if any("\n" in text for text in texts):
            assert self.gate.wait(60), "the test never opened the gate"
        self.embedded.extend(texts)
        return self.inner.embed(texts)
