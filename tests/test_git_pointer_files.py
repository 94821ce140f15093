"""git is never started on a repository whose pointer files could hold it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Repo


@pytest.mark.xfail(strict=True, reason="git is started on a .git whose commondir is a FIFO")
def test_a_commondir_that_is_a_fifo_starts_no_git(tmp_path: Path) -> None:
    """Finding 10: a ``.git`` file whose git directory's ``commondir`` is a FIFO made
    ``show`` wait for git's 10 s timeout (git opens it and waits for a writer). No git
    is started there: the diff is unavailable at once. A git on PATH that leaves a
    marker shows whether one started."""
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
    (repo.path / ".git").write_text(f"gitdir: {tmp_path / 'gitdir'}\n")
    os.mkfifo(tmp_path / "gitdir" / "commondir")
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
