"""Project identity: worktrees and same-named clones share memos; env and explicit names win."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import Repo, git, invoke_cli

from explomemo.memos.cache import MemoCache
from explomemo.projects import default_project, main_work_tree


@pytest.fixture
def api(tmp_path: Path) -> Repo:
    """A repository in a folder named my-api, with one commit."""
    repo = Repo(tmp_path / "main" / "my-api")
    repo.write("src/auth.py", "def check(token):\n    return token == 'ok'\n")
    repo.commit("first")
    return repo


def test_worktrees_and_a_same_named_clone_share_memos(
    api: Repo, tmp_path: Path, words_cache: MemoCache
) -> None:
    first = tmp_path / "wt" / "feature-x"
    second = tmp_path / "elsewhere" / "deeper" / "bugfix"
    git(api.path, "worktree", "add", "-q", str(first))
    git(api.path, "worktree", "add", "-q", "-b", "other", str(second))
    clone = tmp_path / "laptop" / "my-api"
    subprocess.run(["git", "clone", "-q", str(api.path), str(clone)], check=True)
    (first / "src" / "deep").mkdir()

    recorded = words_cache.record(
        question="Where are tokens checked?",
        conclusion="src/auth.py check() compares the token.",
        files=["src/auth.py"],
        root=str(first),
    )
    assert recorded.project == "my-api"
    for root in (api.path, first, second, clone):
        found = words_cache.recall(query="where are tokens checked", root=str(root))
        assert found.project == "my-api", root
        assert [m.id for m in found.matches] == [recorded.id], root
        assert found.matches[0].status == "fresh"
        assert words_cache.stale(root=str(root)).project == "my-api"
    # Below the top of a worktree: the same project (files are relative to root).
    assert words_cache.stale(root=str(first / "src" / "deep")).project == "my-api"
    assert main_work_tree(str(second)) == str(api.path)


def test_env_wins_over_the_repository_and_an_explicit_project_over_all(
    api: Repo, words_cache: MemoCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(api.path)
    monkeypatch.setenv("EXPLOMEMO_PROJECT", "from-env")
    by_env = words_cache.record(question="q1", conclusion="c", files=["src/auth.py"], root=root)
    assert by_env.project == "from-env"
    explicit = words_cache.record(
        question="q2", conclusion="c", files=["src/auth.py"], root=root, project="given"
    )
    assert explicit.project == "given"
    assert words_cache.stale(root=root).project == "from-env"
    assert words_cache.recall(query="q2", root=root, project="given").project == "given"
    monkeypatch.delenv("EXPLOMEMO_PROJECT")
    assert default_project(root) == "my-api"
    assert [m.project for m in words_cache.list()] == ["from-env", "given"]


def test_outside_git_the_root_folder_names_the_project(tmp_path: Path) -> None:
    plain = tmp_path / "plain-folder"
    plain.mkdir()
    assert default_project(str(plain)) == "plain-folder"


def test_a_bare_repository_worktree_is_named_after_the_bare_folder(
    api: Repo, tmp_path: Path
) -> None:
    bare = tmp_path / "store" / "shop.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(api.path), str(bare)], check=True)
    tree = tmp_path / "trees" / "topic"
    git(bare, "worktree", "add", "-q", str(tree))
    assert default_project(str(tree)) == "shop"


def test_a_hostile_git_entry_never_hangs_and_falls_back(tmp_path: Path) -> None:
    folder = tmp_path / "odd"
    folder.mkdir()
    os.mkfifo(folder / ".git")
    assert default_project(str(folder)) == "odd"
    (folder / ".git").unlink()
    (folder / ".git").write_text("gitdir: " + "x" * 10_000)
    assert main_work_tree(str(folder)) is None
    assert default_project(str(folder)) == "odd"


def test_forget_without_project_uses_the_default_and_names_it(
    api: Repo, words_cache: MemoCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    memo = words_cache.record(
        question="q", conclusion="c", files=["src/auth.py"], root=str(api.path)
    )
    monkeypatch.chdir(api.path)
    assert words_cache.forget(memo_id=memo.id).project == "my-api"


def test_project_names_are_trimmed_wherever_they_come_from(
    api: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``' p '`` from --project, EXPLOMEMO_PROJECT or a tool's ``project`` is project ``p``,
    as a question is trimmed: a stray space does not start a second project."""
    from helpers import call_tools_stdio

    db = tmp_path / "m.db"
    monkeypatch.chdir(api.path)

    def cli(*args: str) -> str:
        result = invoke_cli(["--db", str(db), *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    ask = ["--question", "Where are tokens checked?", "--conclusion", "in check()", "src/auth.py"]
    first = json.loads(cli("record", "--project", " p ", *ask))
    assert (first["project"], first["replaced"]) == ("p", False)
    monkeypatch.setenv("EXPLOMEMO_PROJECT", "\tp\n")
    again = json.loads(cli("record", *ask))
    assert (again["project"], again["id"], again["replaced"]) == ("p", first["id"], True)
    monkeypatch.delenv("EXPLOMEMO_PROJECT")
    record = {"question": "Where are tokens checked?", "conclusion": "in check()"}
    (reply,) = call_tools_stdio(
        db,
        [("memory_exploration_record", {**record, "files": ["src/auth.py"], "project": " p"})],
        cwd=api.path,
    )
    assert (reply.data["project"], reply.data["id"], reply.data["replaced"]) == ("p", 1, True)
    assert [m["project"] for m in json.loads(cli("list", "--json"))] == ["p"]
    # Every command that takes --project finds it by the trimmed name.
    assert len(json.loads(cli("list", "--json", "--project", "p "))) == 1
    assert json.loads(cli("stale", "--format", "json", "--project", " p"))["checked"] == 1
    assert json.loads(cli("export", "--project", " p "))["project"] == "p"
    assert "Where are tokens checked?" in cli("recall", "--project", " p", "tokens checked")
