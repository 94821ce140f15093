"""Fixtures of the client tests (``explomemo setup``, the hooks)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from helpers import Repo


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """A repository named shop, the current directory being one of its subfolders; no claude."""
    repo = Repo(tmp_path / "shop")
    (repo.path / "pkg").mkdir()
    monkeypatch.chdir(repo.path / "pkg")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return repo


@pytest.fixture
def hook_env() -> Iterator[None]:
    """The environment a hook run in process sees: no ``EXPLOMEMO_`` setting nor
    ``CLAUDE_PROJECT_DIR`` of the machine's, embeddings off."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("EXPLOMEMO_")}
    environment.pop("CLAUDE_PROJECT_DIR", None)
    environment["EXPLOMEMO_EMBEDDINGS"] = "off"
    with mock.patch.dict(os.environ, environment, clear=True):
        yield
