"""Shared fixtures: real git repositories, real databases, the real offline model."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from explomemo.cli.main import main
from explomemo.memos.cache import MemoCache
from explomemo.recall.embeddings import Embedder, load_embedder
from explomemo.recall.sources import FixedModel


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` and return its output."""
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
            "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
        },
    ).stdout.strip()


@dataclass
class CliResult:
    """What one in-process run of the CLI did."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """stdout and stderr, for assertion messages."""
        return self.stdout + self.stderr


def invoke_cli(args: Sequence[str]) -> CliResult:
    """Run ``explomemo.cli.main.main(args)`` in-process, capturing stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return CliResult(code, out.getvalue(), err.getvalue())


class Repo:
    """A real git repository built in the test."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        git(path, "init", "-q", "-b", "main")
        git(path, "config", "user.email", "dev@example.com")
        git(path, "config", "user.name", "Dev")

    def write(self, rel: str, text: str) -> Path:
        """Write a file (creating folders)."""
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def commit(self, message: str) -> str:
        """Commit everything; returns the commit id."""
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD")

    def checkout(self, rev: str) -> None:
        """Check out a commit."""
        git(self.path, "checkout", "-q", rev)


#: Variables that point explomemo (and the clients it sets up) at a user's own data.
_USER_VARIABLES = (
    "EXPLOMEMO_DB",
    "EXPLOMEMO_PROJECT",
    "EXPLOMEMO_MODEL",
    "EXPLOMEMO_MODEL_PATH",
    "EXPLOMEMO_EMBEDDINGS",
    "EXPLOMEMO_SNAPSHOTS",
    # Set by Claude Code for hooks (and so inherited by a suite run from one).
    "CLAUDE_PROJECT_DIR",
)


@pytest.fixture(scope="session", autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No test reads or writes the real user's folders: HOME and the XDG folders
    (where platformdirs puts the default database and the model folder) are
    temporary for the whole session, and explomemo's variables are unset."""
    home = tmp_path_factory.mktemp("home")
    private = {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }
    saved = {name: os.environ.get(name) for name in [*private, *_USER_VARIABLES]}
    os.environ.update(private)
    for name in _USER_VARIABLES:
        os.environ.pop(name, None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(autouse=True)
def _private_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's default database (EXPLOMEMO_DB) is its own, under ``tmp_path``."""
    monkeypatch.setenv("EXPLOMEMO_DB", str(tmp_path / "default-data" / "explomemo.db"))


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    """An empty git repository."""
    return Repo(tmp_path / "repo")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Where a test's database lives (not created yet)."""
    return tmp_path / "data" / "memos.db"


@pytest.fixture
def words_cache(db_path: Path) -> Iterator[MemoCache]:
    """A MemoCache without a model (word search only)."""
    with MemoCache.open(db_path, FixedModel(None)) as cache:
        yield cache


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real shipped model, loaded offline once per session."""
    model = load_embedder({})
    assert model is not None
    return model


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI and server run without embeddings (fast)."""
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
