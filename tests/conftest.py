"""Shared fixtures: a private home and database for every test, real git repositories, real
databases, the real offline model (the helpers they use are in helpers.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    INSIDE,
    SECRET,
    USER_FILES,
    WORD_MEMOS,
    Repo,
    World,
    invoke_cli,
    make_world,
    open_cache,
)

from explomemo.memos.cache import MemoCache
from explomemo.recall.embeddings import Embedder, load_embedder

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
    with open_cache(db_path) as cache:
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


#: The pinned npm package of the Claude Code CLI (.ci/run installs the same one).
CLAUDE_CODE = (Path(__file__).parent / "claude-code-package").read_text().strip()


@pytest.fixture(scope="session")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Claude Code CLI, installed once per session (or given by $EXPLOMEMO_TEST_CLAUDE)."""
    given = os.environ.get("EXPLOMEMO_TEST_CLAUDE")
    if given:
        return Path(given)
    npm = shutil.which("npm")
    if npm is None:
        if os.environ.get("CI"):
            pytest.fail("npm is missing: CI must run the Claude Code end-to-end tests")
        pytest.skip("npm is not installed: cannot install the Claude Code CLI")
    prefix = tmp_path_factory.mktemp("claude-code")
    subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            CLAUDE_CODE,
        ],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=900,
    )
    return prefix / "node_modules" / ".bin" / "claude"


# Fixtures shared by test files in several folders ------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("A = 1\n")
    (root / "pkg" / "b.py").write_text("B = 2\n")
    return root


@pytest.fixture
def word_root(tmp_path: Path) -> Path:
    root = tmp_path / "svc"
    for _, _, files in WORD_MEMOS:
        for f in files:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_text(f"# {f}\n")
    return root


@pytest.fixture
def one_file(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_bytes(b"version one\n" * 50)
    return root


@pytest.fixture
def app(tmp_path: Path) -> Path:
    root = tmp_path / "app-root"
    (root / "app").mkdir(parents=True)
    for name in ("middleware", "tokens", "http", "db"):
        (root / "app" / f"{name}.py").write_text(f"# {name}\n")
    return root


@pytest.fixture
def bad_cwd(tmp_path: Path) -> Path:
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffdir"))
    folder.mkdir()
    (folder / "a.py").write_text("A = 1\n")
    return folder


@pytest.fixture
def one_memo(tmp_path: Path) -> tuple[Path, Path]:
    """A database with one fresh memo of a.py, and an export of it; returns (db, export)."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    db = tmp_path / "m.db"
    base = ["--db", str(db)]
    record = ["record", "--project", "p", "--root", str(root)]
    assert invoke_cli([*base, *record, "--question", "q", "--conclusion", "c", "a.py"]).code == 0
    export = root / "memos.jsonl"
    assert invoke_cli([*base, "export", "-o", str(export)]).code == 0
    return db, export


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
    monkeypatch.chdir(tmp_path)
    return make_world(tmp_path)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    return root


@pytest.fixture
def root_tree(tmp_path: Path) -> Iterator[dict[str, Path]]:
    outside = tmp_path / "outside"
    (outside / "pkg").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "pkg" / "mod.py").write_bytes(SECRET)
    root = tmp_path / "root"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "a.py").write_bytes(INSIDE)
    (root / "pkg" / "mod.py").write_bytes(INSIDE + b"mod\n")
    (root / "pkg" / "sub" / "deep.py").write_bytes(INSIDE + b"deep\n")
    os.symlink("a.py", root / "link.py")  # a link that stays inside root: allowed
    os.symlink("pkg", root / "alias")  # a folder link inside root: allowed
    os.symlink(outside / "secret.txt", root / "out.py")
    os.symlink(outside / "pkg", root / "outdir")
    os.mkfifo(root / "fifo")
    (root / "plain").write_bytes(b"not a folder")
    yield {"root": root, "outside": outside}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's home holding their own configuration files."""
    folder = tmp_path / "home"
    for rel, text in USER_FILES.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(folder / ".claude-config"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return folder
