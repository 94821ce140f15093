"""Replacing a file whole or not at all (atomic.py): the data is on disk before the rename, and
the one rule for links keeps a write inside its folder.

The writer's refusals through ``explomemo setup`` (FIFOs, folders, links out of the
project) are tested with setup, in tests/clients/test_setup.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from explomemo.atomic import leads_out, replace_file
from explomemo.clients.setup import CONFIG_FILE


@pytest.mark.parametrize("existing", [False, True])
def test_the_staging_file_is_flushed_to_disk_before_it_is_renamed_over_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, existing: bool
) -> None:
    """Kills ``replace_file`` losing its ``os.fsync``: without it a crash just after the
    rename can leave an empty or half-written file where the old one was. The fsync
    must be of the staging file's descriptor (the file that becomes the target) and
    come before ``os.replace``."""
    target = tmp_path / "config.json"
    if existing:
        target.write_text('{"old": true}\n')
    calls: list[tuple[str, int]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(("fsync", os.fstat(fd).st_ino))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        assert Path(dst) == target
        calls.append(("replace", os.stat(src).st_ino))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    written = replace_file(target, b'{"new": true}\n', CONFIG_FILE, within=tmp_path)
    monkeypatch.undo()
    assert written == target and target.read_bytes() == b'{"new": true}\n'
    staging = target.stat().st_ino
    assert ("replace", staging) in calls, calls
    renamed = calls.index(("replace", staging))
    assert ("fsync", staging) in calls[:renamed], calls
    assert os.listdir(tmp_path) == ["config.json"]


def test_a_sibling_folder_whose_name_starts_with_the_folders_is_outside_it(
    tmp_path: Path,
) -> None:
    """Kills ``leads_out`` comparing bare string prefixes: ``/x/shop-other`` starts with
    ``/x/shop`` and is not inside it."""
    shop, other = tmp_path / "shop", tmp_path / "shop-other"
    for folder in (shop, other):
        (folder / ".cursor").mkdir(parents=True)
    real_other = os.path.realpath(other / ".cursor" / "mcp.json")
    assert leads_out(other / ".cursor" / "mcp.json", shop) == real_other
    (shop / "linked").symlink_to(other / ".cursor")
    assert leads_out(shop / "linked" / "mcp.json", shop) == real_other
    assert leads_out(shop / ".cursor" / "mcp.json", shop) is None
    assert leads_out(shop, shop) is None
    assert leads_out(shop / ".cursor", Path(f"{shop}/")) is None
