"""Fixtures of the client tests (``explomemo setup``)."""

from __future__ import annotations

from pathlib import Path

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
