"""A deterministic fake embedder for unit tests (the real model is tested too)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt


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
