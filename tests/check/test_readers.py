"""Reading files for a check in a helper process (check/readers.py): it reads and refuses as this
process does, and a helper that misbehaves is given up or replaced."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import xxhash
from helpers import PATHS, _helpers_take_part, _many_files

from explomemo.check import readers, validity
from explomemo.check.hashing import COUNTERS
from explomemo.files import Opener, resolve_root


def _assert_given_up(helper: readers.Helper, root: Path, why: str) -> None:
    """The helper's first read fails with ``why`` in the error, and the helper is killed."""
    try:
        with pytest.raises(readers.HelperError, match=why):
            helper.read(resolve_root(str(root)), ["a.py"], time.time_ns(), 0)
        assert helper._process.wait(10) is not None
    finally:
        helper.close()


@pytest.mark.timeout(30)
def test_a_helper_process_reads_and_refuses_as_this_one_does(
    root_tree: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    root = resolve_root(str(root_tree["root"]))
    # Started from a folder with a package of our name (as a checked project
    # may have): the helper must not import it.
    decoy = tmp_path / "decoy"
    (decoy / "explomemo").mkdir(parents=True)
    (decoy / "explomemo" / "__init__.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\n"
    )
    monkeypatch.chdir(decoy)
    taken_at = time.time_ns()
    with Opener(root) as opener:
        here = [readers.read_row(opener, rel, taken_at, 0) for rel in PATHS]
    helper = readers.Helper()
    COUNTERS.reset()
    try:
        there = helper.read(root, PATHS, taken_at, 0)
    finally:
        helper.close()
    assert there == here
    read = [rel for rel, row in zip(PATHS, there, strict=True) if row is not None]
    assert read == [*PATHS[:6], "pkg/./mod.py", "pkg/../a.py", "pkg//mod.py"]
    assert COUNTERS.files == len(read)  # the helper's reads are counted in this process
    assert not (tmp_path / "imported").exists()


@pytest.mark.timeout(30)
def test_a_helper_running_another_copy_is_refused(
    root_tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    monkeypatch.setattr(readers, "_THIS_FILE", "/another/explomemo/check/readers.py")
    _assert_given_up(readers.Helper(), root_tree["root"], "another")


@pytest.mark.timeout(30)
def test_a_helper_that_never_greets_is_given_up(
    root_tree: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    hanging = tmp_path / "hanging-python"
    hanging.write_text("#!/bin/sh\nexec sleep 60\n")
    hanging.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(hanging))
    monkeypatch.setattr(readers, "GREETING_SECONDS", 0.5)
    _assert_given_up(readers.Helper(), root_tree["root"], "greeting")


# The validator ----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_a_helper_process_that_dies_is_replaced_by_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fast path of a stale check (Opener, reused buffers, threads, one range query) must keep
    every guarantee of the slow one."""
    root_path = tmp_path / "proj"
    rels = _many_files(root_path, [300] * 200)
    root = resolve_root(str(root_path))
    expected = [
        validity.Expected(rel, root.absolute(rel), {300}, None, rel.rpartition("/")[0])
        for rel in rels
    ]
    monkeypatch.setattr(validity, "HELPERS_MIN_BYTES", 0)
    monkeypatch.setattr(validity, "RACY_NS", 10**18)  # no entry is trusted: all read each time
    batches = _helpers_take_part(monkeypatch)
    validator = validity.Validator(None, workers=2)
    try:
        first = validator.observe(root, expected)
        assert batches
        [helper] = validator._idle_helpers  # kept for the next read
        helper._process.kill()
        helper._process.wait()
        (root_path / rels[150]).write_bytes(b"y" * 300)
        _helpers_take_part(monkeypatch)  # this thread waits until the dead helper is handed one
        second = validator.observe(root, expected)
        assert validator._helpers_failed and not validator._idle_helpers
    finally:
        validator.close()
    assert second == {**first, rels[150]: xxhash.xxh3_128_hexdigest(b"y" * 300)}
