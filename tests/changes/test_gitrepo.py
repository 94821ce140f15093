"""Reading a root's git object store (changes/gitrepo.py): blobs by id, tracked paths, history,
and a hostile git environment that must run nothing and write nothing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    Repo,
    _blob_id,
    git,
    invoke_cli,
    open_cache,
)

from explomemo.changes.gitrepo import GitRepo
from explomemo.files import resolve_root

PYTHON = sys.executable


HOOKS = [
    "pre-commit", "post-checkout", "post-merge", "post-index-change", "reference-transaction",
    "pre-auto-gc", "post-rewrite", "fsmonitor-watchman", "pre-push", "post-commit",
]  # fmt: skip


TOKENS_DIFF = (
    "--- a/tokens.py\n+++ b/tokens.py\n@@ -1,2 +1,2 @@\n def verify(req):\n"
    "-    return req.headers['Authorization']\n+    return req.cookies['session']\n"
)


def trap(path: Path, markers: Path, name: str) -> str:
    path.write_text(f"#!/bin/sh\ntouch '{markers}/{name}'\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def fingerprint(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder`` (.git included): its bytes and its mtime."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            found[str(path.relative_to(folder))] = (
                hashlib.sha256(path.read_bytes()).hexdigest(),
                path.stat().st_mtime_ns,
            )
    return found


def hostile_repo(tmp_path: Path) -> tuple[Repo, Path, dict[str, str]]:
    markers = tmp_path / "markers"
    markers.mkdir()
    traps = tmp_path / "traps"
    traps.mkdir()
    repo = Repo(tmp_path / "repo")
    repo.write("tokens.py", "def verify(req):\n    return req.headers['Authorization']\n")
    repo.write("old.py", "OLD = 1\n")
    repo.commit("A")
    hooks = traps / "hooks"
    hooks.mkdir()
    for name in HOOKS:
        trap(hooks / name, markers, f"hook-{name}")
        trap(repo.path / ".git" / "hooks" / name, markers, f"git-hook-{name}")
    server = Repo(tmp_path / "server")
    server.write("x", "x\n")
    server.commit("x")
    for key, value in {
        "core.hooksPath": str(hooks),
        "core.fsmonitor": trap(traps / "fsmonitor", markers, "fsmonitor"),
        "log.showSignature": "true",
        "gpg.program": trap(traps / "gpg", markers, "gpg"),
        "core.pager": trap(traps / "pager", markers, "pager"),
        "pager.log": trap(traps / "pager-log", markers, "pager-log"),
        "diff.external": trap(traps / "external", markers, "external-diff"),
        "filter.trap.smudge": trap(traps / "smudge", markers, "smudge"),
        "filter.trap.clean": trap(traps / "clean", markers, "clean"),
        "diff.trap.textconv": trap(traps / "textconv", markers, "textconv"),
        "core.repositoryformatversion": "1",
        "extensions.partialClone": "origin",
        "remote.origin.url": str(server.path),
        "remote.origin.promisor": "true",
        "remote.origin.uploadpack": trap(traps / "upload-pack", markers, "upload-pack"),
    }.items():
        git(repo.path, "config", key, value)
    (repo.path / ".git" / "info" / "attributes").write_text("* filter=trap diff=trap\n")
    # Plain git falls into the traps: reading the index runs the fsmonitor, and
    # looking up an object the repository lacks runs the promisor's upload-pack.
    for command in (["status"], ["cat-file", "-p", "1" * 40]):
        subprocess.run(
            ["git", *command],
            cwd=repo.path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert {p.name for p in markers.iterdir()} >= {"fsmonitor", "upload-pack"}
    for marker in markers.iterdir():
        marker.unlink()
    elsewhere = Repo(tmp_path / "elsewhere")
    elsewhere.write("tokens.py", "something else\n")
    elsewhere.commit("other")
    env = {
        **os.environ,
        "EXPLOMEMO_EMBEDDINGS": "off",
        "EXPLOMEMO_SNAPSHOTS": "off",
        "GIT_DIR": str(elsewhere.path / ".git"),
        "GIT_WORK_TREE": str(elsewhere.path),
        "GIT_INDEX_FILE": str(elsewhere.path / ".git" / "index"),
        "GIT_TRACE": str(markers / "trace"),
        "GIT_CONFIG_PARAMETERS": f"'core.fsmonitor'='{traps / 'fsmonitor'}'",
    }
    return repo, markers, env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "explomemo", *args], capture_output=True, text=True, env=env, timeout=120
    )


def _version(n: int) -> str:
    """Content number ``n`` of a file: every version has the same size."""
    return f"VALUE = {n:04d}  # one of several versions of the same size\n"


def _without_blob_ids(db: Path) -> None:
    """Forget every recorded git blob id, as a database of an older version holds none."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE memo_files SET git_blob = NULL")
    conn.close()


def test_hostile_git_runs_nothing_and_writes_nothing(tmp_path: Path) -> None:
    """A hostile git environment (the repository's configuration, the caller's variables) must
    not make explomemo run anything or write into the repository."""
    from mcp import Client, StdioServerParameters

    repo, markers, env = hostile_repo(tmp_path)
    db = tmp_path / "db" / "x.db"
    untracked = "def f():\n    return 1\n"
    repo.write("scratch.py", untracked)
    base = ["--db", str(db), "record", "--project", "demo", "--root", str(repo.path)]
    for question, files in [
        ("How are tokens verified?", ["tokens.py", "old.py", "scratch.py"]),
        ("Tokens, recorded before blob ids", ["tokens.py"]),
    ]:
        done = cli(env, *base, "--question", question, "--conclusion", "c", *files)
        assert done.returncode == 0, done.stderr
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE memo_files SET git_blob = NULL WHERE memo_id = 2")
    conn.close()
    assert sorted(p.name for p in markers.iterdir()) == []
    repo.write("tokens.py", "def verify(req):\n    return req.cookies['session']\n")
    git(repo.path, "mv", "old.py", "new.py")  # plain git: it falls into the traps
    repo.write("scratch.py", untracked + "# edited\n")
    for marker in markers.iterdir():
        marker.unlink()
    before = fingerprint(repo.path)

    shown = cli(env, "--db", str(db), "show", "1", "--json")
    assert shown.returncode == 0, shown.stderr
    files = {f["path"]: f for f in json.loads(shown.stdout)["files"]}
    assert (files["tokens.py"]["diff"], files["tokens.py"]["diff_source"]) == (TOKENS_DIFF, "git")
    assert files["old.py"]["moved_to"] == "new.py"
    # Its blob is in no object store: looking it up must not fetch from the promisor remote.
    assert files["scratch.py"]["diff_source"] == "unavailable"
    old = json.loads(cli(env, "--db", str(db), "show", "2", "--json").stdout)["files"][0]
    assert (old["diff"], old["diff_source"]) == (TOKENS_DIFF, "git")
    assert cli(env, "--db", str(db), "diff", "1").returncode == 0
    github = cli(env, "--db", str(db), "stale", "--format", "github").stdout
    assert "::warning file=tokens.py,line=2," in github

    params = StdioServerParameters(
        command=PYTHON, args=["-m", "explomemo", "--db", str(db), "serve"], cwd=repo.path, env=env
    )

    async def recall() -> Any:
        async with Client(params) as client:
            result = await client.call_tool(
                "memory_exploration_recall",
                {"query": "How are tokens verified?", "project": "demo"},
            )
            return result.structured_content

    matches = asyncio.run(recall())["matches"]
    tokens = [f for m in matches for f in m.get("files", []) if f["path"] == "tokens.py"]
    assert tokens and all(f["diff_source"] == "git" for f in tokens)
    assert sorted(p.name for p in markers.iterdir()) == []
    assert fingerprint(repo.path) == before


# git subprocesses: the hostile repository, read in this process -------------


def test_git_read_in_process_ignores_the_callers_variables_and_the_repositorys_programs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kills ``gitrepo`` passing on a ``GIT_*`` variable of the caller's, reading the
    global or system configuration, or losing a guard of its environment or command
    line: the hostile repository ``hostile_repo`` builds, read by the library in
    this process (where a mutation run sees the calls), shows its diffs from git,
    runs none of its programs and writes nothing into it."""

    repo, markers, env = hostile_repo(tmp_path)
    caller = {k: v for k, v in env.items() if k.startswith(("GIT_", "EXPLOMEMO_"))}
    # The caller's global configuration would point git at another object store.
    elsewhere = tmp_path / "elsewhere" / ".git" / "objects"
    (tmp_path / "gitconfig").write_text(
        f"[core]\n\tfsmonitor = {tmp_path / 'traps' / 'fsmonitor'}\n"
    )
    caller["GIT_CONFIG_GLOBAL"] = str(tmp_path / "gitconfig")
    caller["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(elsewhere)
    db = tmp_path / "db" / "x.db"
    untracked = "def f():\n    return 1\n"
    repo.write("scratch.py", untracked)
    record = ["--db", str(db), "record", "--project", "demo", "--root", str(repo.path)]
    with monkeypatch.context() as hostile:
        for key, value in caller.items():
            hostile.setenv(key, value)
        for question, files in [
            ("How are tokens verified?", ["tokens.py", "old.py", "scratch.py"]),
            ("Tokens, recorded before blob ids", ["tokens.py"]),
        ]:
            run = invoke_cli(
                [*record, "--question", question, "--conclusion", "c", *files],
            )
            assert run.code == 0, run.err
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE memo_files SET git_blob = NULL WHERE memo_id = 2")
    conn.close()
    repo.write("tokens.py", "def verify(req):\n    return req.cookies['session']\n")
    git(repo.path, "mv", "old.py", "new.py")
    repo.write("scratch.py", untracked + "# edited\n")
    for marker in markers.iterdir():
        marker.unlink()
    before = fingerprint(repo.path)
    with monkeypatch.context() as hostile:
        for key, value in caller.items():
            hostile.setenv(key, value)
        shown = invoke_cli(["--db", str(db), "show", "1", "--json"])
        old = invoke_cli(["--db", str(db), "show", "2", "--json"])
    assert shown.code == old.code == 0, (shown.err, old.err)
    files = {f["path"]: f for f in json.loads(shown.out)["files"]}
    assert (files["tokens.py"]["diff"], files["tokens.py"]["diff_source"]) == (TOKENS_DIFF, "git")
    assert files["old.py"]["moved_to"] == "new.py"
    assert files["scratch.py"]["diff_source"] == "unavailable"
    first = json.loads(old.out)["files"][0]
    assert (first["diff"], first["diff_source"]) == (TOKENS_DIFF, "git")
    assert sorted(p.name for p in markers.iterdir()) == []
    assert fingerprint(repo.path) == before


# Hook failure handling: whatever fails, one line on stderr and exit 0 --------


@pytest.mark.skipif(os.geteuid() != 0, reason="handing a repository to another user takes root")
def test_a_repository_of_another_user_is_read_only_when_the_users_own_config_trusts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kills ``GitRepo.at`` or ``_user_safe_directories`` losing git's ``safe.directory``
    rule either way: a repository owned by another user gives no diff, until the
    user's global git configuration lists it; then its history gives the diff."""
    from explomemo.changes import gitrepo

    repo = Repo(tmp_path / "theirs")
    repo.write("tokens.py", "def verify(req):\n    return req.headers['Authorization']\n")
    repo.commit("A")
    db = tmp_path / "memos.db"
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    record = ["--db", str(db), "record", "--project", "demo", "--root", str(repo.path)]
    run = invoke_cli([*record, "--question", "q", "--conclusion", "c", "tokens.py"])
    assert run.code == 0, run.err
    repo.write("tokens.py", "def verify(req):\n    return req.cookies['session']\n")
    for folder, _, names in os.walk(repo.path):
        for name in [".", *names]:
            os.chown(os.path.join(folder, name), 12345, 12345, follow_symlinks=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    # What git's safe.directory entries were, read once per process: not yet.
    monkeypatch.setattr(gitrepo, "_trusted_folders", None, raising=False)

    def diff_source() -> str:
        shown = invoke_cli(["--db", str(db), "show", "1", "--json"])
        assert shown.code == 0, shown.err
        source: str = json.loads(shown.out)["files"][0]["diff_source"]
        return source

    (home / ".gitconfig").write_text(f"[safe]\n\tdirectory = {tmp_path / 'elsewhere'}\n")
    assert diff_source() == "unavailable"
    monkeypatch.setattr(gitrepo, "_trusted_folders", None, raising=False)
    (home / ".gitconfig").write_bytes(
        b"[safe]\n\tdirectory = /srv/caf\xe9\n"
        + f"\tdirectory = {tmp_path / 'elsewhere'}\n\tdirectory = {repo.path}\n".encode()
    )
    # The user's own configuration is read whatever the caller's GIT_* variables say,
    # and from wherever the process runs (here a folder deleted since).
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert diff_source() == "git"


def test_a_content_recorded_without_a_blob_id_is_found_wherever_git_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``GitRepo.find_content`` losing a place to look (the index, history on
    any branch), misreading ``log --raw`` (abbreviated ids, only the last line, only
    a commit's new side) or ``sizes`` asking for one id only: contents staged only,
    in the middle of history, on another branch, and older than the history searched
    (then the one commit searched names it as its old side) each give their diff."""
    from explomemo.changes import gitrepo

    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    db = tmp_path / "memos.db"
    ids: dict[str, int] = {}

    def remember(name: str, version: int) -> None:
        repo.write("a.py", _version(version))
        with open_cache(db) as cache:
            ids[name] = cache.record(
                question=f"memo {name}",
                conclusion="c",
                files=["a.py"],
                project="p",
                root=str(repo.path),
            ).id

    for version in (1, 2, 3):
        if version == 2:
            remember("middle", 2)
        repo.write("a.py", _version(version))
        repo.commit(f"v{version}")
    git(repo.path, "checkout", "-q", "-b", "other")
    remember("branch", 4)
    repo.commit("v4")
    git(repo.path, "checkout", "-q", "main")
    remember("staged", 5)
    git(repo.path, "add", "a.py")
    repo.write("a.py", _version(6))
    _without_blob_ids(db)
    # git is asked for the sizes of all the versions at once, in the order of their
    # ids: the one wanted must not come first, or only one asked for would do.
    assert min(_blob_id(_version(v)) for v in (1, 2, 3, 4, 5)) != _blob_id(_version(2))
    with open_cache(db) as cache:
        for name, version in (("middle", 2), ("branch", 4), ("staged", 5)):
            (found,) = cache.show(ids[name]).files
            assert found.diff_source == "git", name
            assert f"-VALUE = {version:04d}" in (found.diff or ""), name
            assert "+VALUE = 0006" in (found.diff or ""), name
    # Only the newest commit searched: it names the version it replaced as its old side.
    monkeypatch.setattr(gitrepo, "HISTORY_DEPTH", 1)
    line = Repo(tmp_path / "line")
    line.write("a.py", _version(1))
    with open_cache(db) as cache:
        first = cache.record(
            question="first", conclusion="c", files=["a.py"], project="p", root=str(line.path)
        ).id
    line.commit("v1")
    line.write("a.py", _version(2))
    line.commit("v2")
    line.write("a.py", _version(6))
    _without_blob_ids(db)
    with open_cache(db) as cache:
        (found,) = cache.show(first).files
    assert (found.diff_source, "-VALUE = 0001" in (found.diff or "")) == ("git", True)


def test_contents_without_blob_ids_are_found_for_every_path_of_a_memo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``GitRepo.find_contents`` reading the index for one path only (``ls-files``
    without ``-z``, or its answer split otherwise: only the first entry's id), taking
    a path that starts with ``-`` for an option (``--`` lost), or giving ``log`` a
    depth that is not a whole number (``HISTORY_DEPTH / len(paths)``): two staged
    contents, ``-dash.py`` first, each give their diff; so do two contents that only
    the newest commit names, with one commit searched per path."""
    from explomemo.changes import gitrepo

    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    names = ["-dash.py", "b.py"]
    offset = {"-dash.py": 0, "b.py": 10}  # each file its own contents
    db = tmp_path / "memos.db"

    def write(repo: Repo, version: int) -> None:
        for name in names:
            repo.write(name, _version(version + offset[name]))

    def record(repo: Repo) -> int:
        with open_cache(db) as cache:
            return cache.record(
                question=repo.path.name,
                conclusion="c",
                files=names,
                project="p",
                root=str(repo.path),
            ).id

    def old_sides(memo: int) -> dict[str, str]:
        _without_blob_ids(db)
        with open_cache(db) as cache:
            return {f.path: f.diff or "" for f in cache.show(memo).files}

    repo = Repo(tmp_path / "repo")
    write(repo, 1)
    repo.commit("v1")
    write(repo, 2)
    staged = record(repo)
    git(repo.path, "add", "--", *names)
    write(repo, 3)
    diffs = old_sides(staged)
    for name in names:
        assert f"-VALUE = {2 + offset[name]:04d}" in diffs[name], name
    monkeypatch.setattr(gitrepo, "HISTORY_DEPTH", 1)
    line = Repo(tmp_path / "line")
    write(line, 1)
    first = record(line)
    line.commit("v1")
    write(line, 2)
    line.commit("v2")
    write(line, 3)
    diffs = old_sides(first)
    for name in names:
        assert f"-VALUE = {1 + offset[name]:04d}" in diffs[name], name


def test_git_is_found_and_run_when_the_caller_has_no_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``gitrepo._environment`` passing on a missing ``PATH`` as nothing (git
    would not start): without ``PATH``, git is looked for where ``os.defpath`` says."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.commit("A")
    with open_cache(tmp_path / "memos.db") as cache:
        memo = cache.record(
            question="q", conclusion="c", files=["a.py"], project="p", root=str(repo.path)
        ).id
    repo.write("a.py", "A = 2\n")
    if shutil.which("git", path=os.defpath) is None:
        pytest.skip("git is not in os.defpath")
    monkeypatch.delenv("PATH")
    with open_cache(tmp_path / "memos.db") as cache:
        (found,) = cache.show(memo).files
    assert found.diff_source == "git"


def test_blobs_asked_together_each_come_back_whatever_git_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``_parse_batch`` stopping at a blob git lacks, or losing its place after a
    blob: the recorded blob ids of three changed files are asked for at once, and git
    lacks the one (never committed) whose id comes first."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    committed = {name: f"{name.upper()} = 1\n" for name in ("b", "c")}
    for name, text in committed.items():
        repo.write(f"{name}.py", text)
    repo.commit("b and c")
    lacking = next(
        text
        for n in range(100)
        if _blob_id(text := f"# scratch {n}\n") < min(_blob_id(t) for t in committed.values())
    )
    repo.write("scratch.py", lacking)
    with open_cache(tmp_path / "memos.db") as cache:
        memo = cache.record(
            question="q",
            conclusion="c",
            files=["b.py", "c.py", "scratch.py"],
            project="p",
            root=str(repo.path),
        ).id
    for name in ("b", "c", "scratch"):
        repo.write(f"{name}.py", "changed\n")
    with open_cache(tmp_path / "memos.db") as cache:
        sources = {f.path: f.diff_source for f in cache.show(memo).files}
    assert sources == {"b.py": "git", "c.py": "git", "scratch.py": "unavailable"}


@pytest.mark.parametrize("case", ["commondir", "pointer through a link"])
def test_a_commondir_that_is_a_fifo_starts_no_git(tmp_path: Path, case: str) -> None:
    """Finding 10: a ``.git`` file whose git directory's ``commondir`` is a FIFO made
    ``show`` wait for git's 10 s timeout (git opens it and waits for a writer). No git
    is started there: the diff is unavailable at once. A git on PATH that leaves a
    marker shows whether one started. A second reader's case: ``gitdir: lnk/../gd``,
    where ``lnk`` is a link, names another folder for the kernel than for a lexical
    ``..`` (there, a ``HEAD`` that is a FIFO)."""
    repo = Repo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.commit("a")
    db = tmp_path / "memos.db"
    env = {
        **os.environ,
        "EXPLOMEMO_SNAPSHOTS": "off",
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
    }
    (tmp_path / "bin").mkdir()
    marker = tmp_path / "git-ran"
    wrapper = tmp_path / "bin" / "git"
    wrapper.write_text(f"#!/bin/sh\ntouch '{marker}'\nexec '{shutil.which('git')}' \"$@\"\n")
    wrapper.chmod(0o755)
    explomemo = [sys.executable, "-m", "explomemo", "--db", str(db)]
    subprocess.run(
        [*explomemo, "record", "--question", "What is A?", "--conclusion", "1", "a.py"],
        cwd=repo.path,
        env=env,
        check=True,
        capture_output=True,
    )
    (repo.path / "a.py").write_text("A = 2\n")
    (repo.path / ".git").rename(tmp_path / "gitdir")
    if case == "commondir":
        (repo.path / ".git").write_text(f"gitdir: {tmp_path / 'gitdir'}\n")
        os.mkfifo(tmp_path / "gitdir" / "commondir")
    else:
        far = tmp_path / "far"
        (far / "deep").mkdir(parents=True)
        shutil.copytree(tmp_path / "gitdir", far / "gd")
        (far / "gd" / "HEAD").unlink()
        os.mkfifo(far / "gd" / "HEAD")
        shutil.copytree(tmp_path / "gitdir", repo.path / "gd")
        (repo.path / "lnk").symlink_to(far / "deep")
        (repo.path / ".git").write_text("gitdir: lnk/../gd\n")
    marker.unlink(missing_ok=True)
    shown = subprocess.run(
        [*explomemo, "show", "1", "--json"],
        cwd=repo.path,
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    (changed,) = json.loads(shown.stdout)["files"]
    assert (changed["state"], changed["diff"], changed["diff_source"]) == (
        "changed",
        None,
        "unavailable",
    )
    assert not marker.exists()


def test_git_repo_at_a_git_file_leading_to_a_fifo_starts_no_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test above, in process, where mutmut sees which tests call ``GitRepo.at``: for
    a ``.git`` file whose git directory's ``commondir`` is a FIFO, no git starts (mutant
    ``GitRepo.at`` 5, ``or`` made ``and``, started it and waited for its timeout)."""
    repo = Repo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.commit("a")
    (repo.path / ".git").rename(tmp_path / "gitdir")
    (repo.path / ".git").write_text(f"gitdir: {tmp_path / 'gitdir'}\n")
    os.mkfifo(tmp_path / "gitdir" / "commondir")
    (tmp_path / "bin").mkdir()
    marker = tmp_path / "git-ran"
    wrapper = tmp_path / "bin" / "git"
    wrapper.write_text(f"#!/bin/sh\ntouch '{marker}'\nexec '{shutil.which('git')}' \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    assert GitRepo.at(resolve_root(str(repo.path))) is None
    assert not marker.exists()
