"""A repository's identity: its first root commit, found with the hardened git, kept in the
database so a new process walks no history already walked."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import Repo, git, git_commands, open_cache

from explomemo.changes import gitrepo
from explomemo.changes.gitrepo import GitRepo, repository_identity
from explomemo.files import resolve_root
from explomemo.projects import head_commit


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a new process would: nothing found yet."""
    monkeypatch.setattr(gitrepo, "_identities", {})


def _repo(path: Path, *names: str) -> Repo:
    repo = Repo(path)
    for name in names:
        repo.write(name, f"{name} of {path.name}\n")
        repo.commit(f"add {name}")
    return repo


def test_the_identity_is_the_smallest_root_commit_of_head(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "app", "a.py", "b.py")
    first = git(repo.path, "rev-list", "--max-parents=0", "HEAD")
    assert repository_identity(str(repo.path)) == first
    # Another history merged in: two roots, the smaller id is the identity.
    other = _repo(tmp_path / "other", "c.py")
    git(repo.path, "fetch", "-q", str(other.path), "main:other")
    git(repo.path, "merge", "-q", "--allow-unrelated-histories", "-m", "join", "other")
    roots = git(repo.path, "rev-list", "--max-parents=0", "HEAD").split()
    assert len(roots) == 2
    gitrepo._identities.clear()
    assert repository_identity(str(repo.path)) == min(roots)
    # From a subfolder and a worktree: the same repository.
    (repo.path / "sub").mkdir()
    assert repository_identity(str(repo.path / "sub")) == min(roots)
    git(repo.path, "worktree", "add", "-q", str(tmp_path / "wt"))
    assert repository_identity(str(tmp_path / "wt")) == min(roots)


def test_no_identity_without_a_full_history(tmp_path: Path) -> None:
    """A shallow clone's cut-off commits look like roots; a repository without commits has
    none; outside git or for a missing folder there is no repository."""
    source = _repo(tmp_path / "source", "a.py", "b.py")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{source.path}", str(shallow))
    assert git(shallow, "rev-parse", "--is-shallow-repository") == "true"
    empty = Repo(tmp_path / "empty")
    plain = tmp_path / "plain"
    plain.mkdir()
    for folder in (shallow, empty.path, plain, tmp_path / "missing", "relative/path"):
        assert repository_identity(str(folder)) is None, folder


def test_a_known_head_answers_without_walking_its_history(tmp_path: Path) -> None:
    """A commit's roots never change: what was found for it answers for it, and for a HEAD
    that descends from it only the commits since are walked."""
    repo = _repo(tmp_path / "app", "a.py")
    at = GitRepo.at(resolve_root(str(repo.path)))
    assert at is not None
    head = git(repo.path, "rev-parse", "HEAD")
    first = git(repo.path, "rev-list", "--max-parents=0", "HEAD")
    assert at.root_commit() == (head, first)
    # A made-up root for HEAD: taken as it is, so nothing was walked.
    made_up = "0" * 40
    assert at.root_commit((head, made_up)) == (head, made_up)
    # New commits on top: only they are walked (none is a root), so the made-up root stays.
    repo.write("b.py", "b\n")
    later = repo.commit("b")
    assert at.root_commit((head, made_up)) == (later, made_up)
    # A commit HEAD does not descend from (another repository's) is no help: a full walk.
    other = _repo(tmp_path / "other", "x.py")
    foreign = git(other.path, "rev-parse", "HEAD")
    assert at.root_commit((foreign, made_up)) == (later, first)
    # Something that is no commit id is never passed to git.
    assert at.root_commit(("--output=/tmp/x", made_up)) == (later, first)


def test_a_known_head_is_answered_by_one_git_command_and_only_for_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What was found for a commit answers for that commit at once: git reads HEAD and
    nothing else (no ``merge-base``, no ``rev-list``). And only for that commit: a root
    said to be another commit's is no answer for HEAD, even when it happens to be HEAD's
    id. Kills ``GitRepo.root_commit__mutmut_32`` (``known[1] == head`` for ``known[0]``),
    which walked for a known HEAD and took the known root of any commit whose root was
    said to be HEAD."""
    repo = _repo(tmp_path / "app", "a.py", "b.py")
    at = GitRepo.at(resolve_root(str(repo.path)))
    assert at is not None
    head = git(repo.path, "rev-parse", "HEAD")
    first = git(repo.path, "rev-list", "--max-parents=0", "HEAD")
    assert head != first
    ran = git_commands(monkeypatch)
    assert at.root_commit((head, "0" * 40)) == (head, "0" * 40)
    assert ran == ["rev-parse"]
    # Another repository's commit, its root made up as HEAD's id: a full walk.
    foreign = git(_repo(tmp_path / "other", "x.py").path, "rev-parse", "HEAD")
    assert at.root_commit((foreign, head)) == (head, first)


def test_a_head_that_is_not_a_commit_has_no_identity(tmp_path: Path) -> None:
    """A branch file holding a tree's id (written by hand: ``update-ref`` refuses it) passes
    the check of HEAD's id, and ``rev-list --max-parents=0`` prints nothing for a tree: no
    root, so no identity, None, not an error. Kills ``GitRepo.root_commit__mutmut_66``
    (``if roots or True``: ``min`` of no roots raised ValueError), found by the second
    reader once grafts were off."""
    repo = _repo(tmp_path / "app", "a.py")
    tree = git(repo.path, "write-tree")
    (repo.path / ".git" / "refs" / "heads" / "main").write_text(f"{tree}\n")
    assert git(repo.path, "rev-list", "--max-parents=0", "HEAD") == ""
    at = GitRepo.at(resolve_root(str(repo.path)))
    assert at is not None
    assert at.root_commit() is None
    assert repository_identity(str(repo.path)) is None


def test_a_grafts_file_does_not_move_the_identity(tmp_path: Path) -> None:
    """git 2.39 still honours the deprecated ``info/grafts`` file, which gives a commit
    other parents, and ``--no-replace-objects`` does not turn it off: a repository carrying
    one (a copied ``.git``, an archive) took a commit of its own history for its root, or,
    with every commit given a parent, had no root at all. The identity is the history's
    own root either way."""
    repo = _repo(tmp_path / "app", "a.py", "b.py", "c.py")
    first, second, third = git(repo.path, "rev-list", "--reverse", "HEAD").split()
    grafts = repo.path / ".git" / "info" / "grafts"
    grafts.parent.mkdir(exist_ok=True)
    for graft, roots in ((f"{second}\n", second), (f"{first} {third}\n", "")):
        grafts.write_text(graft)
        assert git(repo.path, "rev-list", "--max-parents=0", "HEAD") == roots
        gitrepo._identities.clear()
        at = GitRepo.at(resolve_root(str(repo.path)))
        assert at is not None
        assert at.root_commit() == (third, first)
        assert repository_identity(str(repo.path)) == first


def test_the_database_keeps_the_head_found_for_the_next_process(
    tmp_path: Path, db_path: Path
) -> None:
    repo = _repo(tmp_path / "app", "a.py")
    first = git(repo.path, "rev-list", "--max-parents=0", "HEAD")
    with open_cache(db_path) as cache:
        assert repository_identity(str(repo.path), cache.store) == first
        with cache.store.read() as conn:
            real = str(repo.path.resolve())
            head = git(repo.path, "rev-parse", "HEAD")
            assert cache.store.known_head(conn, real) == (head, first)
        # What the next process reads: a made-up root for this HEAD shows it is used.
        with cache.store.write() as conn:
            cache.store.save_head(conn, real, head, "0" * 40)
        gitrepo._identities.clear()
        assert repository_identity(str(repo.path), cache.store) == "0" * 40


def test_an_unmoved_head_is_read_from_gits_files_and_runs_no_git(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prompt hook runs before every prompt: while HEAD stays where the database saw
    it, the identity comes from HEAD's file and the database alone."""
    repo = _repo(tmp_path / "app", "a.py")
    first = git(repo.path, "rev-list", "--max-parents=0", "HEAD")
    with open_cache(db_path) as cache:
        assert repository_identity(str(repo.path), cache.store) == first
        gitrepo._identities.clear()

        def no_git(*args: object, **kwargs: object) -> None:
            raise AssertionError("git ran")

        with monkeypatch.context() as patch:
            patch.setattr(GitRepo, "_run", no_git)
            assert repository_identity(str(repo.path), cache.store) == first
        # HEAD moved: git says, and the database keeps the new HEAD.
        gitrepo._identities.clear()
        repo.write("b.py", "b\n")
        later = repo.commit("b")
        assert repository_identity(str(repo.path), cache.store) == first
        with cache.store.read() as conn:
            assert cache.store.known_head(conn, str(repo.path.resolve())) == (later, first)


def test_head_is_read_only_from_plain_files_inside_the_repository(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "app", "a.py")
    head = git(repo.path, "rev-parse", "HEAD")
    assert head_commit(str(repo.path)) == head
    assert head_commit(str(repo.path / "sub-that-does-not-exist")) == head
    wt = tmp_path / "wt"
    git(repo.path, "worktree", "add", "-q", "-b", "side", str(wt))
    assert head_commit(str(wt)) == head
    git(repo.path, "checkout", "-q", "--detach")
    assert head_commit(str(repo.path)) == head
    git(repo.path, "checkout", "-q", "main")
    # Packed refs are git's to read.
    git(repo.path, "pack-refs", "--all")
    assert head_commit(str(repo.path)) is None
    # A HEAD leading out of the git directory is never followed.
    outside = tmp_path / "outside"
    outside.write_text(head + "\n")
    for pointer in ("ref: refs/heads/../../../outside", "ref: /etc/passwd", "ref: HEAD"):
        (repo.path / ".git" / "HEAD").write_text(pointer + "\n")
        assert head_commit(str(repo.path)) is None, pointer
    assert head_commit(str(tmp_path)) is None


def test_an_unmoved_head_past_the_root_commit_runs_no_git(
    tmp_path: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database's HEAD is compared with HEAD's commit, not with the identity beside
    it: on a history of two commits (HEAD is not the root commit) an unmoved HEAD still
    answers from git's files and the database alone. Kills
    ``gitrepo.x__identity_at__mutmut_18`` (``== known[1]`` for ``== known[0]``), which
    ran git whenever HEAD was not the root commit itself."""
    repo = _repo(tmp_path / "app", "a.py", "b.py")
    first = git(repo.path, "rev-list", "--max-parents=0", "HEAD")
    assert git(repo.path, "rev-parse", "HEAD") != first
    with open_cache(db_path) as cache:
        assert repository_identity(str(repo.path), cache.store) == first
        gitrepo._identities.clear()

        def no_git(*args: object, **kwargs: object) -> None:
            raise AssertionError("git ran")

        monkeypatch.setattr(GitRepo, "_run", no_git)
        assert repository_identity(str(repo.path), cache.store) == first


def test_a_moved_head_walks_only_the_commits_since_the_databases_head(
    tmp_path: Path, db_path: Path
) -> None:
    """When HEAD has moved on from the commit the database keeps, that commit and its
    identity are handed to the walk: only the new commits are walked, so a made-up
    identity saved for the old HEAD is what the new HEAD gets (and is kept for it).
    Kills ``gitrepo.x__identity_at__mutmut_24`` (``root_commit(None)``), which walked
    the whole history again at every move of HEAD."""
    repo = _repo(tmp_path / "app", "a.py")
    real = str(repo.path.resolve())
    head = git(repo.path, "rev-parse", "HEAD")
    made_up = "0" * 40
    with open_cache(db_path) as cache:
        with cache.store.write() as conn:
            cache.store.save_head(conn, real, head, made_up)
        repo.write("b.py", "b\n")
        later = repo.commit("b")
        assert repository_identity(str(repo.path), cache.store) == made_up
        with cache.store.read() as conn:
            assert cache.store.known_head(conn, real) == (later, made_up)
