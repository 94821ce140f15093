"""Roots reached through symbolic links: the paths a user or an agent sees are accepted.

A shell's working directory is often reached through a link (``/tmp`` on
macOS, a linked home or workspace), and agents pass the absolute paths they
see there. A path that resolves inside the real root is accepted whichever
way root was reached; a link inside root that leads out is still refused.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from reliability_helpers import RawServer, assert_tool_refused, cli_subprocess, counts

RECORD = "memory_exploration_record"


@pytest.fixture
def linked(tmp_path: Path) -> dict[str, Path]:
    """real/proj (a.py, sub/b.py, out -> ../../outside), link -> real, alias -> real/proj/sub."""
    proj = tmp_path / "real" / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "a.py").write_text("a = 1\n")
    (proj / "sub" / "b.py").write_text("b = 2\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("secret\n")
    (proj / "out").symlink_to(outside)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "alias").symlink_to(proj / "sub")
    return {
        "real": proj,
        "logical": tmp_path / "link" / "proj",
        "alias": tmp_path / "alias",
        "base": tmp_path,
    }


def _record(
    db: Path, cwd: Path, pwd: str, *files: str, root: str | None = None
) -> subprocess.CompletedProcess[str]:
    args = ["--db", str(db), "record", "--project", "p", "--question", f"q {files}"]
    args += ["--conclusion", "c", *(["--root", root] if root else []), "--", *files]
    return cli_subprocess(args, env={"PWD": pwd}, cwd=cwd)


@pytest.mark.timeout(120)
def test_cli_accepts_absolute_paths_under_a_linked_working_directory(
    linked: dict[str, Path],
) -> None:
    db = linked["base"] / "m.db"
    logical, real = linked["logical"], linked["real"]
    # The shell's view: cwd reached through "link", $PWD says so.
    done = _record(db, logical, str(logical), f"{logical}/a.py", f"{logical}/sub/b.py")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [f["path"] for f in result["files"]] == ["a.py", "sub/b.py"]
    assert result["root"] == str(logical)  # the root as the user reached it
    # The physical path, and a second link into root, lead to the same files.
    done = _record(db, logical, str(logical), f"{real}/a.py", f"{linked['alias']}/b.py")
    assert done.returncode == 0, done.stderr
    assert [f["path"] for f in json.loads(done.stdout)["files"]] == ["a.py", "sub/b.py"]
    # A root given through the link, with files named by the physical path.
    done = _record(db, linked["base"], "/", f"{real}/a.py", root=str(logical))
    assert done.returncode == 0, done.stderr
    # A $PWD that is not the working directory is not believed.
    done = _record(db, logical, str(linked["base"]), "a.py")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["root"] == str(real)
    assert counts(db)["memos"] == 4


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "bad",
    [
        "{logical}/out/secret.py",  # a link inside root that leads out
        "{real}/out/secret.py",
        "{base}/outside/secret.py",
        "{logical}/../../outside/secret.py",
        "{alias}/../../../outside/secret.py",
    ],
)
def test_cli_still_refuses_paths_that_lead_out(linked: dict[str, Path], bad: str) -> None:
    db = linked["base"] / "m.db"
    path = bad.format(**{k: str(v) for k, v in linked.items()})
    done = _record(db, linked["logical"], str(linked["logical"]), path)
    assert done.returncode == 2, done.stdout
    assert done.stderr.count("\n") == 1 and path in done.stderr
    assert "outside root" in done.stderr
    assert counts(db)["memos"] == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("pwd", ["logical", "inherited"])
def test_serve_accepts_absolute_paths_under_a_linked_working_directory(
    linked: dict[str, Path], pwd: str
) -> None:
    """The client starts the server in a linked folder; $PWD may or may not say so."""
    db = linked["base"] / "m.db"
    logical = linked["logical"]
    env = {"PWD": str(logical) if pwd == "logical" else str(linked["base"])}
    with RawServer(db, cwd=logical, env=env) as server:
        reply = server.call(
            RECORD,
            {
                "question": "where are a and b?",
                "conclusion": "c",
                "project": "p",
                "files": [f"{logical}/a.py", f"{logical}/sub/b.py", f"{linked['alias']}/b.py"],
            },
        )
        assert not reply.is_error, reply.text
        assert [f["path"] for f in reply.data["files"]] == ["a.py", "sub/b.py"]
        assert reply.data["root"] == str(logical if pwd == "logical" else linked["real"])
        refused = server.call(
            RECORD,
            {
                "question": "and the secret?",
                "conclusion": "c",
                "project": "p",
                "files": [f"{logical}/out/secret.py"],
            },
        )
        assert_tool_refused(refused, "out/secret.py", "outside root")
    assert counts(db)["memos"] == 1
