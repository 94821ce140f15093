"""Recording: every rule and refusal of docs/reference.md, with nothing written on refusal."""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
from pathlib import Path

import pytest

from explomemo.errors import ExplomemoError, InputError, PathError
from explomemo.memos.cache import MemoCache


def count_rows(db: Path) -> tuple[int, int, int]:
    """(memos, memo_files, fts rows) in the database."""
    with sqlite3.connect(db) as conn:
        return tuple(  # type: ignore[return-value]
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("memos", "memo_files", "memos_fts")
        )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "auth.py").write_text("def check(token): ...\n")
    (root / "src" / "retry.py").write_text("RETRIES = 3\n")
    return root


def _refusals(project: Path, tmp_path: Path) -> list[tuple[str, dict[str, object], str]]:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (project / "link_out").symlink_to(outside)
    (project / "dir_link").symlink_to(tmp_path)
    os.mkfifo(project / "fifo")
    big = project / "big.bin"
    with open(big, "wb") as stream:
        stream.truncate(32 * 1024 * 1024 + 1)
    exact = project / "exact.bin"
    with open(exact, "wb") as stream:
        stream.truncate(32 * 1024 * 1024)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(project / "sock"))
    many = []
    for i in range(65):
        (project / f"f{i}.txt").write_text(str(i))
        many.append(f"f{i}.txt")
    base: dict[str, object] = {
        "question": "q",
        "conclusion": "c",
        "project": "p",
        "root": str(project),
        "files": ["src/auth.py"],
    }
    return [
        ("dotdot", {**base, "files": ["../secret.txt"]}, "outside root"),
        ("dotdot-inner", {**base, "files": ["src/../../secret.txt"]}, "outside root"),
        ("absolute-outside", {**base, "files": [str(outside)]}, "outside root"),
        ("symlink-out", {**base, "files": ["link_out"]}, "symbolic link"),
        ("symlinked-parent-out", {**base, "files": ["dir_link/secret.txt"]}, "symbolic link"),
        ("missing", {**base, "files": ["src/nope.py"]}, "does not exist"),
        ("directory", {**base, "files": ["src"]}, "a directory"),
        ("fifo", {**base, "files": ["fifo"]}, "a FIFO"),
        ("socket", {**base, "files": ["sock"]}, "a socket"),
        ("too-big", {**base, "files": ["big.bin"]}, "larger than 32 MiB"),
        ("65-files", {**base, "files": many}, "more than 64"),
        ("no-files", {**base, "files": []}, "files is empty"),
        ("root-missing", {**base, "root": str(tmp_path / "nowhere")}, "does not exist"),
        ("root-file", {**base, "root": str(project / "src" / "auth.py")}, "not a directory"),
        ("root-relative", {**base, "root": "proj"}, "not an absolute path"),
        ("empty-question", {**base, "question": "  "}, "question is empty"),
        ("long-question", {**base, "question": "x" * 2001}, "question is 2,001 characters"),
        ("long-conclusion", {**base, "conclusion": "x" * 20001}, "over the limit of 20,000"),
        ("long-project", {**base, "project": "p" * 201}, "project is 201 characters"),
        ("nul-question", {**base, "question": "a\x00b"}, "NUL byte"),
        ("surrogate", {**base, "conclusion": "bad \udc80"}, "lone surrogate"),
        ("nul-path", {**base, "files": ["src/a\x00.py"]}, "NUL byte"),
    ]


def test_record_hashes_files_relative_to_root(words_cache: MemoCache, project: Path) -> None:
    result = words_cache.record(
        question="How is auth wired?",
        conclusion="check() in src/auth.py",
        files=["src/auth.py", str(project / "src" / "retry.py"), "./src/auth.py"],
        project="api",
        root=str(project),
    )
    assert result.recorded and not result.replaced and result.id == 1
    assert result.root == str(project)
    assert [(f.path, f.size) for f in result.files] == [("src/auth.py", 22), ("src/retry.py", 12)]
    expected = hashlib.sha256((project / "src" / "auth.py").read_bytes()).hexdigest()
    assert result.files[0].sha256 == expected
    assert result.semantic_index is False


def test_same_question_replaces_and_keeps_id(words_cache: MemoCache, project: Path) -> None:
    first = words_cache.record(
        question="How is  auth WIRED? ",
        conclusion="one",
        files=["src/auth.py"],
        project="api",
        root=str(project),
    )
    other = words_cache.record(
        question="How is auth wired?",
        conclusion="elsewhere",
        files=["src/auth.py"],
        project="web",
        root=str(project),
    )
    second = words_cache.record(
        question="  how is auth wired?",
        conclusion="two",
        files=["src/retry.py"],
        project="api",
        root=str(project),
    )
    assert second.replaced and second.id == first.id and other.id != first.id
    memos = words_cache.list(project="api")
    assert [(m.id, m.question, m.files) for m in memos] == [(first.id, "  how is auth wired?", 1)]
    assert words_cache.show(first.id).conclusion == "two"


def test_root_defaults_to_working_directory(
    words_cache: MemoCache, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project / "src")
    result = words_cache.record(question="q", conclusion="c", files=["auth.py"], project="p")
    assert result.root == str(project / "src")
    assert result.files[0].path == "auth.py"


def test_every_refusal_names_the_input_and_writes_nothing(
    words_cache: MemoCache, project: Path, tmp_path: Path, db_path: Path
) -> None:
    words_cache.record(
        question="seed", conclusion="c", files=["src/auth.py"], project="p", root=str(project)
    )
    before = count_rows(db_path)
    for name, arguments, message in _refusals(project, tmp_path):
        with pytest.raises(ExplomemoError) as caught:
            words_cache.record(**arguments)  # type: ignore[arg-type]
        assert message in str(caught.value), name
        assert isinstance(caught.value, InputError | PathError), name
        assert count_rows(db_path) == before, name


def test_exactly_32_mib_and_64_files_are_accepted(words_cache: MemoCache, project: Path) -> None:
    with open(project / "exact.bin", "wb") as stream:
        stream.truncate(32 * 1024 * 1024)
    files = []
    for i in range(63):
        (project / f"g{i}.txt").write_text(str(i))
        files.append(f"g{i}.txt")
    result = words_cache.record(
        question="q", conclusion="c", files=[*files, "exact.bin"], project="p", root=str(project)
    )
    assert len(result.files) == 64
    assert result.files[-1].size == 32 * 1024 * 1024


def test_symlink_inside_root_is_accepted(words_cache: MemoCache, project: Path) -> None:
    (project / "alias.py").symlink_to(project / "src" / "auth.py")
    result = words_cache.record(
        question="q", conclusion="c", files=["alias.py"], project="p", root=str(project)
    )
    assert result.files[0].path == "alias.py"
    assert words_cache.stale(project="p", root=str(project)).stale == []
