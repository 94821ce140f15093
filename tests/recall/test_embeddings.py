"""Embedding models (recall/embeddings.py): the shipped model, bad paths, and a model that
failed to load."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from explomemo.errors import ModelError
from explomemo.recall import embeddings
from explomemo.recall.embeddings import load_embedder


def test_the_shipped_model_loads_from_the_package_and_is_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = embeddings.default_model_dir()
    assert folder == Path(embeddings.__file__).resolve().parent / "model"
    model = load_embedder({})
    assert model is not None and model.model_id == embeddings.DEFAULT_MODEL_ID
    (row,) = model.embed(["where is the retry policy decided?"])
    assert row.shape == (384,) and abs(float(row @ row) - 1.0) < 1e-5
    monkeypatch.setattr(embeddings, "DEFAULT_ONNX_SHA256", "0" * 64)
    with pytest.raises(ModelError, match=r"SHA-256 is not the pinned .*reinstall explomemo"):
        embeddings.default_model_dir()


def test_the_shipped_model_is_the_int8_one_and_still_means_the_same() -> None:
    """The products run in int8 (MatMulInteger), and the meaning survives the quantization:
    a question's paraphrase is nearer to it than an unrelated question is."""
    graph = (embeddings.default_model_dir() / "model.onnx").read_bytes()
    # Op types are plain strings in the ONNX protobuf.
    assert graph.count(b"MatMulInteger") >= 36  # 6 layers: q, k, v, out, two feed-forward
    model = load_embedder({})
    assert model is not None
    question, paraphrase, unrelated = model.embed(
        [
            "How does the client decide how many times to retry a failed request?",
            "Where is the number of retries for a request that failed chosen?",
            "Which CSS framework styles the landing page?",
        ]
    )
    assert float(question @ paraphrase) > float(question @ unrelated) + 0.3


def test_bad_model_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"EXPLOMEMO_MODEL_PATH .* is not a directory"):
        load_embedder({"EXPLOMEMO_MODEL_PATH": str(tmp_path / "nope")})


def test_a_named_model_that_failed_to_load_is_not_tried_again_for_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Offline, fastembed spends 40 s retrying a download: every CLI command
    # would pay them again.
    import fastembed

    tried: list[str] = []
    real = fastembed.TextEmbedding

    def counting(name: str, *args: Any, **kwargs: Any) -> Any:
        tried.append(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(fastembed, "TextEmbedding", counting)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    env = {"EXPLOMEMO_MODEL": "example-org/no-such-model"}
    with pytest.raises(ModelError, match="'example-org/no-such-model' cannot be loaded"):
        load_embedder(env)
    with pytest.raises(ModelError, match=r"failed to load 0 min ago \(.*not supported.*\)"):
        load_embedder(env)
    assert tried == ["example-org/no-such-model"]
    (marker,) = (tmp_path / "cache" / "explomemo" / "failed-models").iterdir()
    then = time.time() - embeddings.RETRY_SECONDS - 1
    os.utime(marker, (then, then))
    with pytest.raises(ModelError, match="cannot be loaded"):
        load_embedder(env)
    assert len(tried) == 2


@pytest.mark.timeout(60)
def test_a_failed_model_marker_that_is_not_a_file_is_replaced_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A FIFO where the marker goes would hold a plain open() for ever.
    import hashlib

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    name = "example-org/no-such-model"
    folder = tmp_path / "cache" / "explomemo" / "failed-models"
    folder.mkdir(parents=True)
    marker = folder / hashlib.sha256(name.encode()).hexdigest()[:16]
    os.mkfifo(marker)
    with pytest.raises(ModelError, match="cannot be loaded"):
        load_embedder({"EXPLOMEMO_MODEL": name})
    assert marker.is_file() and "not supported" in marker.read_text()


def test_a_texts_vector_does_not_depend_on_the_texts_beside_it() -> None:
    """The embedding cache keeps one vector a text: a query embedded alone and a memo's text
    embedded in a batch must agree (the int8 model scales each run's activations as one)."""
    import numpy as np

    model = load_embedder({})
    assert model is not None
    text = "where is the retry policy decided?"
    (alone,) = model.embed([text])
    beside = model.embed([text, "How does the client pool connections? " * 30])[0]
    assert np.array_equal(alone, beside)
