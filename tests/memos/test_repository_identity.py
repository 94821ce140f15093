"""Project identity: a memo keeps its repository's root commit, and another repository of
the same folder name never gets it (SPEC "Project identity").

Two real repositories with unrelated histories live in folders named ``app`` and share a
byte-identical LICENSE: before this rule, a memo resting on that LICENSE was one project's
and came fresh into the other's sessions.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import chdir
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import EMBEDDINGS_OFF, Repo, call_tools, git, invoke_cli, open_cache

from explomemo.changes import gitrepo
from explomemo.clients.hooks.run import run_hook
from explomemo.memos import cache as cache_module
from explomemo.store import database as store_module
from explomemo.store.database import Store, load_migrations

LICENSE = "MIT License\n\nPermission is hereby granted, free of charge, to any person.\n"
QUESTION = "Which license covers this code?"
CONCLUSION = "The MIT license in LICENSE covers all of it."
PROMPT = "which license covers this code?"


@dataclass
class Apps:
    """Two unrelated repositories named ``app``, a clone and a worktree of the first."""

    a: Path
    b: Path
    clone: Path
    worktree: Path
    db: Path


def _app(folder: Path, readme: str) -> Path:
    repo = Repo(folder / "app")
    repo.write("LICENSE", LICENSE)
    repo.write("README.md", readme)
    repo.commit(f"start {readme}")
    return repo.path


@pytest.fixture
def apps(tmp_path: Path, no_model: None) -> Apps:
    a = _app(tmp_path / "a", "the first app\n")
    b = _app(tmp_path / "b", "another app\n")
    clone = tmp_path / "c" / "app"
    clone.parent.mkdir()
    git(tmp_path, "clone", "-q", str(a), str(clone))
    worktree = tmp_path / "w" / "app-feature"
    git(a, "worktree", "add", "-q", "-b", "feature", str(worktree))
    db = tmp_path / "data" / "memos.db"
    _record(db, a, QUESTION, CONCLUSION)
    return Apps(a, b, clone, worktree, db)


def _record(db: Path, root: Path, question: str, conclusion: str) -> bool:
    """Record through the CLI; whether it replaced a memo."""
    run = invoke_cli(
        [
            *("--db", str(db), "record", "--root", str(root)),
            *("--question", question, "--conclusion", conclusion, "LICENSE"),
        ]
    )
    assert run.code == 0, run.err
    return bool(json.loads(run.out)["replaced"])


def _recalled(db: Path, root: Path, *extra: str, query: str = PROMPT) -> list[str]:
    run = invoke_cli(["--db", str(db), "recall", "--root", str(root), "--json", *extra, query])
    assert run.code == 0, run.err
    found = json.loads(run.out)
    assert found["project"] == "app"
    return [m["conclusion"] for m in found["matches"]]


def _listed(db: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> list[str]:
    monkeypatch.chdir(cwd)
    run = invoke_cli(["--db", str(db), "list", "--json", *extra])
    assert run.code == 0, run.err
    return [m["question"] for m in json.loads(run.out)]


def _checked(db: Path, root: Path, *extra: str) -> int:
    run = invoke_cli(["--db", str(db), "stale", "--root", str(root), "--format", "json", *extra])
    assert run.code == 0, run.err
    return int(json.loads(run.out)["checked"])


def _hook(db: Path, cwd: Path, event: str, *extra: str) -> str:
    """What a real hook, a child process as Claude Code runs it, adds."""
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(db), "hook", event, *extra],
        input=json.dumps({"cwd": str(cwd), "prompt": PROMPT}),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **EMBEDDINGS_OFF, "CLAUDE_PROJECT_DIR": str(cwd)},
    )
    assert done.stderr == ""
    return done.stdout


def test_another_repository_of_the_same_name_never_gets_the_memo(
    apps: Apps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same repository, wherever it is checked out: its clone and its worktree.
    for here in (apps.a, apps.clone, apps.worktree):
        assert _recalled(apps.db, here) == [CONCLUSION], here
        assert _checked(apps.db, here) == 1, here
        assert CONCLUSION in _hook(apps.db, here, "prompt"), here
        assert "1 fresh memo of project" in _hook(apps.db, here, "session-start"), here
    assert _listed(apps.db, apps.clone, monkeypatch) == [QUESTION]
    # The other repository of that name: named or defaulted, the memo is left out.
    for named in ((), ("--project", "app")):
        assert _recalled(apps.db, apps.b, *named) == [], named
        assert _checked(apps.db, apps.b, *named) == 0, named
        assert _listed(apps.db, apps.b, monkeypatch, *named) == [], named
        # As setup writes the hooks: the project named on the command line.
        assert _hook(apps.db, apps.b, "prompt", *named) == "", named
        assert _hook(apps.db, apps.b, "session-start", *named) == "", named


def test_the_tools_leave_out_another_repositorys_memo(apps: Apps) -> None:
    recall = {"query": PROMPT, "root": str(apps.b)}
    stale = {"root": str(apps.b), "project": "app"}
    here, there, checked_here, checked_there = call_tools(
        apps.db,
        [
            ("memory_exploration_recall", {**recall, "root": str(apps.clone)}),
            ("memory_exploration_recall", recall),
            ("memory_exploration_stale", {**stale, "root": str(apps.worktree)}),
            ("memory_exploration_stale", stale),
        ],
    )
    assert [m["conclusion"] for m in here.data["matches"]] == [CONCLUSION]
    assert there.data["matches"] == []
    assert checked_here.data["checked"] == 1
    assert checked_there.data["checked"] == 0


def test_a_check_the_rule_leaves_with_no_memo_has_nothing_to_check(apps: Apps) -> None:
    ok = invoke_cli(["--db", str(apps.db), "stale", "--root", str(apps.clone), "--check"])
    assert ok.code == 0, ok.err
    empty = invoke_cli(["--db", str(apps.db), "stale", "--root", str(apps.b), "--check"])
    assert empty.code == 2 and "nothing to check" in empty.err, empty.output
    assert empty.err.count("\n") == 1


def test_record_never_replaces_another_repositorys_memo(apps: Apps) -> None:
    other = "A proprietary licence, says LICENSE."
    assert _record(apps.db, apps.b, QUESTION, other) is False
    assert _recalled(apps.db, apps.b) == [other]
    assert _recalled(apps.db, apps.a) == [CONCLUSION]
    # The same question again in the clone replaces the first repository's memo.
    assert _record(apps.db, apps.clone, QUESTION, "Still MIT.") is True
    assert _recalled(apps.db, apps.a) == ["Still MIT."]
    assert _recalled(apps.db, apps.b) == [other]


def test_a_memo_recorded_outside_git_matches_any(apps: Apps, tmp_path: Path) -> None:
    plain = tmp_path / "p" / "app"
    plain.mkdir(parents=True)
    (plain / "LICENSE").write_text(LICENSE)
    granted = "Permission to anyone, free of charge."
    _record(apps.db, plain, "What does the LICENSE grant, and to whom?", granted)
    for here in (apps.a, apps.b, plain):
        assert granted in _recalled(apps.db, here, query="what does the license grant?"), here


def test_an_export_carries_the_identity_through_import_and_stale_from(
    apps: Apps, tmp_path: Path
) -> None:
    export = apps.a / ".explomemo" / "memos.jsonl"
    run = invoke_cli(["--db", str(apps.db), "export", "-o", str(export)])
    assert run.code == 0, run.err
    (line,) = export.read_text().splitlines()
    root_commit = git(apps.a, "rev-list", "--max-parents=0", "HEAD")
    assert json.loads(line)["repository"] == root_commit
    # Checked from the file alone: the clone checks it, the other repository has nothing.
    ok = invoke_cli(["stale", "--from", str(export), "--root", str(apps.clone), "--check"])
    assert ok.code == 0, ok.output
    empty = invoke_cli(["stale", "--from", str(export), "--root", str(apps.b), "--check"])
    assert empty.code == 2 and "nothing to check" in empty.err, empty.output
    # An import keeps it: the other repository still does not get the memo.
    other_db = tmp_path / "other.db"
    run = invoke_cli(
        ["--db", str(other_db), "import", "--json", "--root", str(apps.clone), str(export)]
    )
    assert run.code == 0, run.err
    assert _recalled(other_db, apps.clone) == [CONCLUSION]
    assert _recalled(other_db, apps.b) == []
    again = invoke_cli(["--db", str(other_db), "export"])
    assert again.out == export.read_text()


def test_an_export_line_without_identity_matches_any(apps: Apps, tmp_path: Path) -> None:
    """Lines of earlier versions carry no identity: every repository checks them."""
    export = tmp_path / "old.jsonl"
    run = invoke_cli(["--db", str(apps.db), "export", "-o", str(export)])
    assert run.code == 0, run.err
    line = json.loads(export.read_text())
    line.pop("repository", None)
    export.write_text(json.dumps(line) + "\n")
    for here in (apps.a, apps.b):
        run = invoke_cli(["stale", "--from", str(export), "--root", str(here), "--check"])
        assert run.code == 0, run.output


def _todays_database(db: Path, monkeypatch: pytest.MonkeyPatch, roots: list[Path]) -> None:
    """A database as today's release (migrations 0001-0005) made it, a memo per root, all
    of project ``app``."""
    today = [m for m in load_migrations() if m.number <= 5]
    with monkeypatch.context() as patch:
        patch.setattr(store_module, "load_migrations", lambda: today)
        Store.open(db).close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (5,)
        for memo_id, root in enumerate(roots, start=1):
            conn.execute(
                "INSERT INTO memos (id, project, question, question_key, conclusion, root,"
                " recorded_at) VALUES (?, 'app', ?, ?, 'c', ?, '2026-01-01T00:00:00Z')",
                (memo_id, f"{QUESTION} {memo_id}", f"{QUESTION} {memo_id}".casefold(), str(root)),
            )
            conn.execute(
                "INSERT INTO memo_files (memo_id, path, sha256, xxh3, size) VALUES"
                " (?, 'LICENSE', 'aa', 'bb', 1)",
                (memo_id,),
            )
            conn.execute(
                "INSERT INTO memos_fts (rowid, question, conclusion, paths, project)"
                " VALUES (?, ?, 'c', 'LICENSE', 'app')",
                (memo_id, f"{QUESTION} {memo_id}"),
            )


def test_migration_gives_stored_memos_their_recorded_roots_identity(
    apps: Apps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memos of today's release: the identity of their recorded root where that repository
    still exists, none where it is gone or was never a repository."""
    plain = tmp_path / "plain" / "app"
    plain.mkdir(parents=True)
    gone = tmp_path / "gone" / "app"
    db = tmp_path / "today.db"
    _todays_database(db, monkeypatch, [apps.a, apps.b, plain, gone])
    run = invoke_cli(["--db", str(db), "list", "--json"])  # a command that only reads migrates
    assert run.code == 0, run.err
    assert len(json.loads(run.out)) == 4
    with sqlite3.connect(db) as conn:
        found = dict(conn.execute("SELECT id, repository FROM memos"))
    first = git(apps.a, "rev-list", "--max-parents=0", "HEAD")
    second = git(apps.b, "rev-list", "--max-parents=0", "HEAD")
    assert found == {1: first, 2: second, 3: None, 4: None}
    # Once: a repository that appears later under a gone root changes nothing.
    _app(gone.parent, "late\n")
    assert invoke_cli(["--db", str(db), "list"]).code == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT repository FROM memos WHERE id = 4").fetchone() == (None,)
    # And the rule holds for them: the first repository's memo is not the second's.
    monkeypatch.chdir(apps.b)
    listed = json.loads(invoke_cli(["--db", str(db), "list", "--json"]).out)
    assert sorted(m["id"] for m in listed) == [2, 3, 4]


def test_another_repositorys_memos_take_no_places_from_this_ones(
    apps: Apps, tmp_path: Path
) -> None:
    """Recall cuts its candidates short: memos of the other repository are left out before
    the cut, so many of them never push this repository's memo out."""
    with open_cache(apps.db) as cache:
        for n in range(30):
            cache.record(
                question=f"Which license covers module {n} of this code?",
                conclusion=f"The MIT license in LICENSE covers module {n}.",
                files=["LICENSE"],
                root=str(apps.a),
            )
        own = cache.record(
            question="Which license covers this code here?",
            conclusion="A licence of its own, in LICENSE.",
            files=["LICENSE"],
            root=str(apps.b),
        )
        found = cache.recall(query=PROMPT, root=str(apps.b), limit=1)
    assert [m.id for m in found.matches] == [own.id]


def test_stale_without_root_asks_each_memos_recorded_root(
    apps: Apps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked under its recorded root, a memo is asked about by that root, wherever the
    command runs; a memo whose recorded root now holds another repository is left out."""
    monkeypatch.chdir(apps.b)
    run = invoke_cli(["--db", str(apps.db), "stale", "--format", "json", "--check"])
    assert run.code == 0, run.err
    assert json.loads(run.out)["checked"] == 1
    shutil.rmtree(apps.a)
    _app(apps.a.parent, "an unrelated app in its place\n")
    monkeypatch.setattr(gitrepo, "_identities", {})  # a new process: nothing found yet
    run = invoke_cli(["--db", str(apps.db), "stale", "--project", "app", "--check"])
    assert run.code == 2 and "nothing to check" in run.err, run.output


def test_show_gives_another_repositorys_memo_to_nobody(apps: Apps) -> None:
    """memory_exploration_show by id is the project's memo of this repository only, and
    what it refuses is not counted as served."""
    there, here = call_tools(
        apps.db,
        [
            ("memory_exploration_show", {"id": 1, "root": str(apps.b)}),
            ("memory_exploration_show", {"id": 1, "root": str(apps.clone)}),
        ],
    )
    assert there.is_error and "no memo with id 1 in project 'app'" in there.text
    assert not here.is_error and here.data["conclusion"] == CONCLUSION
    (project,) = json.loads(invoke_cli(["--db", str(apps.db), "stats", "--json"]).out)["projects"]
    assert project["served"] == 1, project


def test_a_memo_given_its_identity_since_migrating_is_not_given_it_twice(apps: Apps) -> None:
    """A memo still listed as stored before identities (a capture or record replaced it
    meanwhile, giving it its repository) keeps the key it has: replacing it still works."""
    first = git(apps.a, "rev-list", "--max-parents=0", "HEAD")
    with sqlite3.connect(apps.db) as conn:
        conn.execute("INSERT INTO memos_without_repository (memo_id) VALUES (1)")
    assert invoke_cli(["--db", str(apps.db), "list"]).code == 0  # assigns identities
    with sqlite3.connect(apps.db) as conn:
        (key,) = conn.execute("SELECT question_key FROM memos WHERE id = 1").fetchone()
    assert key == f"{first}\n{QUESTION.casefold()}"
    assert _record(apps.db, apps.a, QUESTION, "again") is True


def test_pending_vectors_count_only_this_repositorys_memos(
    apps: Apps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memos of another repository of the name are not searched, so they are not memos
    "searched by words only" either: the count is this repository's."""
    monkeypatch.setattr(cache_module, "INLINE_BACKLOG", 0)  # a backlog the recall leaves
    for i in range(3):
        _record(apps.db, apps.b, f"B question {i} about the license", "B's answer")
    monkeypatch.delenv("EXPLOMEMO_EMBEDDINGS", raising=False)
    run = invoke_cli(["--db", str(apps.db), "recall", "--root", str(apps.a), "--json", PROMPT])
    assert run.code == 0, run.err
    found = json.loads(run.out)
    assert [m["conclusion"] for m in found["matches"]] == [CONCLUSION]
    assert found["pending_vectors"] == 1, found


def test_pending_vectors_with_an_index_count_only_this_repositorys_memos(
    apps: Apps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same count once a vector index exists: of the memos it lacks vectors for (all
    recorded without a model here), another repository's are not counted."""
    from fake_embedder import FakeEmbedder

    from explomemo import FixedModel, MemoCache

    monkeypatch.setattr(cache_module, "INLINE_BACKLOG", 0)  # a backlog the recall leaves

    for i in range(3):
        _record(apps.db, apps.b, f"B question {i} about the license", "B's answer")
    with MemoCache.open(apps.db, FixedModel(FakeEmbedder(lambda text: [1.0, 0.0]))) as cache:
        found = cache.recall(query=PROMPT, root=str(apps.a))
    assert found.semantic_index and found.pending_vectors == 1, found


def test_a_stale_from_gate_for_a_named_project_leaves_out_another_repositorys_memos(
    apps: Apps, tmp_path: Path
) -> None:
    """``stale --from FILE --project app --check`` in a repository of another folder name
    and history: the identity rule is applied to the project named, not the folder's, and
    the one line on stderr names the export file.

    Kills ``stale_from_export`` asking as the root's own project (``caller(None, root)``,
    exchange mutant 51) and naming None in that sentence (64)."""
    export = tmp_path / "memos.jsonl"
    assert invoke_cli(["--db", str(apps.db), "export", "-o", str(export)]).code == 0
    other = Repo(tmp_path / "o" / "other")
    other.write("LICENSE", LICENSE)
    other.commit("another history")
    root_commit = git(other.path, "rev-list", "--max-parents=0", "HEAD")
    run = invoke_cli(
        ["stale", "--from", str(export), "--root", str(other.path), "--project", "app", "--check"]
    )
    assert (run.code, run.out) == (2, ""), run.output
    assert run.err == (
        f"explomemo: error: export file {export} holds memos of project 'app' only from"
        f" another repository of that name (root commit not {root_commit}), so there is"
        " nothing to check here: record memos in this repository, or check from a clone of"
        " the one they were recorded in\n"
    )


def test_a_clone_under_another_folder_name_recalls_what_it_imported(tmp_path: Path) -> None:
    """A newcomer clones into ``newcomer``, imports the committed export (project ``app``)
    and recalls with no project: the memos of this repository are found, because the
    database keeps them under one project name for this repository's identity. Before,
    the project was the folder's name, and nothing matched."""
    origin = Repo(tmp_path / "app")
    origin.write("auth.py", "def verify(token): ...\n")
    origin.commit("auth")
    team = tmp_path / "team.db"
    with open_cache(team) as cache:
        cache.record(
            question="How is auth wired?",
            conclusion="auth.py verify() checks the token.",
            files=["auth.py"],
            root=str(origin.path),
        )
    export = tmp_path / "memos.jsonl"
    assert invoke_cli(["--db", str(team), "export", "-o", str(export)]).exit_code == 0
    clone = tmp_path / "newcomer"
    git(tmp_path, "clone", "-q", str(origin.path), str(clone))
    db = tmp_path / "mine.db"
    imported = invoke_cli(["--db", str(db), "import", str(export), "--root", str(clone)])
    assert imported.exit_code == 0, imported.stderr
    with chdir(clone):
        found = invoke_cli(["--db", str(db), "recall", "--json", "how is auth wired?"])
        assert found.exit_code == 0, found.stderr
        answer = json.loads(found.stdout)
        assert answer["project"] == "app"
        assert [m["question"] for m in answer["matches"]] == ["How is auth wired?"]
        # A memo recorded here with no project joins them.
        recorded = invoke_cli(
            ["--db", str(db), "record", "--question", "Where are tokens made?",
             "--conclusion", "auth.py", "auth.py"]
        )  # fmt: skip
        assert json.loads(recorded.stdout)["project"] == "app"
        # A hook given no project (an older setup wrote none) takes it as well.
        out = io.BytesIO()
        payload = json.dumps({"cwd": str(clone)}).encode()
        run_hook("session-start", db=db, project=None, stdin=io.BytesIO(payload), stdout=out)
        index = json.loads(out.getvalue())["hookSpecificOutput"]["additionalContext"]
        assert "of project 'app'" in index and "(imported) How is auth wired?" in index
        # setup names that project for the client's server and hooks too.
        assert invoke_cli(["--db", str(db), "setup", "cursor"]).exit_code == 0
        server = json.loads((clone / ".cursor" / "mcp.json").read_text())["mcpServers"]
        assert server["explomemo"]["env"]["EXPLOMEMO_PROJECT"] == "app"
    # A repository of its own in a folder of that name is not taken for it.
    stranger = Repo(tmp_path / "elsewhere" / "newcomer")
    stranger.write("auth.py", "x = 1\n")
    stranger.commit("other")
    with chdir(stranger.path):
        other = json.loads(invoke_cli(["--db", str(db), "recall", "--json", "auth"]).stdout)
    assert other["project"] == "newcomer" and other["matches"] == []
