"""Property-based: random record / forget / file edits / checks against a model of the truth."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
import types
from pathlib import Path

import pytest
from helpers import half_memos, integrity, open_cache
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from explomemo.check import validity
from explomemo.errors import NotFoundError, PathError
from explomemo.memos.exchange import export_memos, read_export, stale_from_export

NAMES = ["a.py", "b.py", "pkg/c.py", "pkg/deep/d.py"]


QUESTIONS = ["how is auth wired?", "where are JWTs checked?", "what owns the DB?"]


# Small contents, several of the same size, so "same size, other bytes" is common.
CONTENTS = [b"aa", b"ab", b"ba", b"abcd", b"abce", b"x" * 100, b"y" * 100, b""]


PROJECT = "proj"


def _timestamp_granularity_s() -> float:
    """How far apart two changes must be for their ctimes to differ (measured)."""
    with tempfile.NamedTemporaryFile() as f:
        seen: list[int] = []
        deadline = time.monotonic() + 0.05
        while time.monotonic() < deadline:
            os.utime(f.name, None)
            ctime = os.stat(f.name).st_ctime_ns
            if not seen or ctime != seen[-1]:
                seen.append(ctime)
        if len(seen) < 3:
            return 0.05
        steps = [b - a for a, b in itertools.pairwise(seen) if b > a]
        return max(steps) / 1e9 * 2 + 0.0005


class MemoModel(RuleBasedStateMachine):
    """Random sequences of operations, checked against the model after every step."""

    pause_after_edit = 0.0

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="explomemo-model-"))
        self.root = self.tmp / "root"
        (self.root / "pkg" / "deep").mkdir(parents=True)
        self.db = self.tmp / "memos.db"
        self.disk: dict[str, bytes | None] = {}
        self.versions: dict[str, list[tuple[bytes, int]]] = {n: [] for n in NAMES}
        for i, name in enumerate(NAMES):
            self._write(name, CONTENTS[i % len(CONTENTS)])
        self.memos: dict[str, tuple[int, dict[str, bytes]]] = {}
        self.cache = open_cache(self.db)

    def teardown(self) -> None:
        self.cache.close()
        try:
            assert integrity(self.db) == "ok"
            assert half_memos(self.db) == {}
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # File edits ------------------------------------------------------------

    def _path(self, name: str) -> Path:
        return self.root / name

    def _write(self, name: str, content: bytes) -> None:
        with open(self._path(name), "wb") as f:
            f.write(content)
        self._edited(name, content)

    def _edited(self, name: str, content: bytes | None) -> None:
        self.disk[name] = content
        if content is not None:
            self.versions[name].append((content, os.stat(self._path(name)).st_mtime_ns))
        if self.pause_after_edit:
            time.sleep(self.pause_after_edit)

    @rule(name=st.sampled_from(NAMES), content=st.sampled_from(CONTENTS))
    def write(self, name: str, content: bytes) -> None:
        self._write(name, content)

    @rule(name=st.sampled_from(NAMES), content=st.sampled_from(CONTENTS))
    def replace_by_rename(self, name: str, content: bytes) -> None:
        staging = self._path(name).with_suffix(".tmp")
        staging.write_bytes(content)
        os.replace(staging, self._path(name))
        self._edited(name, content)

    @precondition(lambda self: any(v is not None for v in self.disk.values()))
    @rule(data=st.data())
    def same_size_other_bytes_old_mtime(self, data: st.DataObject) -> None:
        """Change bytes without changing the size, then put the old mtime back."""
        name = data.draw(st.sampled_from(sorted(n for n, v in self.disk.items() if v is not None)))
        old = self.disk[name]
        assert old is not None
        others = [c for c in CONTENTS if len(c) == len(old) and c != old]
        if not others:
            return
        st_before = os.stat(self._path(name))
        self._write(name, data.draw(st.sampled_from(others)))
        os.utime(self._path(name), ns=(st_before.st_atime_ns, st_before.st_mtime_ns))

    @precondition(lambda self: any(v is not None for v in self.disk.values()))
    @rule(data=st.data(), rewrite=st.booleans())
    def touch_same_bytes(self, data: st.DataObject, rewrite: bool) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, v in self.disk.items() if v is not None)))
        if rewrite:
            self._write(name, self.disk[name] or b"")
        else:
            os.utime(self._path(name), None)
            self._edited(name, self.disk[name])

    @precondition(lambda self: any(v is not None for v in self.disk.values()))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, v in self.disk.items() if v is not None)))
        self._path(name).unlink()
        self._edited(name, None)

    @precondition(lambda self: any(self.versions[n] for n in NAMES))
    @rule(data=st.data())
    def restore_old_version_with_old_mtime(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from([n for n in NAMES if self.versions[n]]))
        content, mtime_ns = data.draw(st.sampled_from(self.versions[name]))
        path = self._path(name)
        if path.exists():
            path.unlink()
        path.write_bytes(content)
        os.utime(path, ns=(mtime_ns, mtime_ns))
        self.disk[name] = content
        if self.pause_after_edit:
            time.sleep(self.pause_after_edit)

    # Memo operations -------------------------------------------------------

    @rule(
        question=st.sampled_from(QUESTIONS),
        names=st.lists(st.sampled_from(NAMES), min_size=1, max_size=4),
        spell=st.sampled_from(["plain", "upper", "spaces"]),
    )
    def record(self, question: str, names: list[str], spell: str) -> None:
        asked = {
            "plain": question,
            "upper": question.upper(),
            "spaces": "  " + question.replace(" ", "   ") + "\t",
        }[spell]
        if any(self.disk[n] is None for n in names):
            with pytest.raises(PathError):
                self.cache.record(
                    question=asked,
                    conclusion="c",
                    files=names,
                    project=PROJECT,
                    root=str(self.root),
                )
            return
        result = self.cache.record(
            question=asked,
            conclusion=f"about {question}",
            files=names,
            project=PROJECT,
            root=str(self.root),
        )
        earlier = self.memos.get(question)
        assert result.replaced == (earlier is not None)
        if earlier is not None:
            assert result.id == earlier[0], "replacing must keep the memo's id"
        recorded = {n: self.disk[n] for n in names}
        assert sorted(f.path for f in result.files) == sorted(recorded)
        self.memos[question] = (result.id, {n: c for n, c in recorded.items() if c is not None})

    @rule(question=st.sampled_from(QUESTIONS))
    def forget(self, question: str) -> None:
        if question not in self.memos:
            with pytest.raises(NotFoundError):
                self.cache.forget(project=PROJECT, memo_id=10_000 + len(question))
            return
        memo_id, _ = self.memos.pop(question)
        assert self.cache.forget(project=PROJECT, memo_id=memo_id).id == memo_id

    # The truth -------------------------------------------------------------

    def expected(self) -> dict[int, tuple[list[str], list[str]]]:
        stale: dict[int, tuple[list[str], list[str]]] = {}
        for memo_id, files in self.memos.values():
            changed = sorted(n for n, c in files.items() if self.disk[n] not in (None, c))
            missing = sorted(n for n in files if self.disk[n] is None)
            if changed or missing:
                stale[memo_id] = (changed, missing)
        return stale

    @invariant()
    def stale_matches_the_model(self) -> None:
        want = self.expected()
        got = self.cache.stale(project=PROJECT, root=str(self.root))
        assert got.checked == len(self.memos)
        assert {s.id: (sorted(s.changed), sorted(s.missing)) for s in got.stale} == want

    @rule()
    def fresh_process_agrees(self) -> None:
        """A new cache (stat cache loaded from the database, as a new CLI run) agrees."""
        want = self.expected()
        with open_cache(self.db) as other:
            if self.memos:
                report = other.stale_report(project=PROJECT)  # each memo's recorded root
                assert {s.id: (sorted(s.changed), sorted(s.missing)) for s in report.stale} == want
            else:
                # A project without memos is refused (a misspelt name), as by export.
                with pytest.raises(NotFoundError, match=PROJECT):
                    other.stale_report(project=PROJECT)
            for memo_id, files in self.memos.values():
                shown = other.show(memo_id, root=str(self.root))
                states = {f.path: f.state for f in shown.files}
                assert set(states) == set(files)
                for name, content in files.items():
                    now = self.disk[name]
                    expect = (
                        "missing" if now is None else ("unchanged" if now == content else "changed")
                    )
                    assert states[name] == expect, (memo_id, name, states)
                assert shown.status == ("stale" if memo_id in want else "fresh")
            # Read back by the reader that `stale --from` uses.
            export = self.tmp / "export.jsonl"
            # A project without memos has no export (export refuses it: a typo).
            lines = export_memos(other, PROJECT) if self.memos else iter(())
            export.write_text("".join(line + "\n" for line in lines))
            exported = read_export(export)
        from_export = stale_from_export(exported, str(self.root))
        assert {s.id: (sorted(s.changed), sorted(s.missing)) for s in from_export.stale} == want


class TrustedStatCacheModel(MemoModel):
    """Every stat-cache entry looks 10 s old, so it is trusted when the stat matches."""

    pause_after_edit = _timestamp_granularity_s()

    def __init__(self) -> None:
        super().__init__()
        self._real_time = validity.time
        fake = types.SimpleNamespace(time_ns=lambda: time.time_ns() + 10_000_000_000)
        validity.time = fake  # type: ignore[assignment]

    def teardown(self) -> None:
        validity.time = self._real_time
        super().teardown()


_SETTINGS = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_model_real_clock() -> None:
    """Property-based: random record, forget, file edits and checks against a model of the
    truth."""
    MemoModel.TestCase.settings = _SETTINGS
    MemoModel.TestCase().runTest()


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_model_trusted_stat_cache() -> None:
    """Property-based: random record, forget, file edits and checks against a model of the
    truth."""
    TrustedStatCacheModel.TestCase.settings = _SETTINGS
    TrustedStatCacheModel.TestCase().runTest()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_old_mtime_put_back_on_the_real_clock(tmp_path: Path) -> None:
    """Past the racy window the stat cache is trusted; a same-size edit with the old
    mtime put back (os.utime) is still caught, and putting the bytes back is fresh."""
    from explomemo.check import hashing

    root = tmp_path / "root"
    root.mkdir()
    target = root / "auth.py"
    target.write_bytes(b"check_jwt()\n")
    with open_cache(tmp_path / "memos.db") as cache:
        memo = cache.record(
            question="how is auth wired?",
            conclusion="c",
            files=["auth.py"],
            project=PROJECT,
            root=str(root),
        )
        original = os.stat(target)
        time.sleep(validity.RACY_NS / 1e9 + 0.3)
        assert cache.stale(project=PROJECT, root=str(root)).stale == []  # reads, caches
        hashing.COUNTERS.reset()
        assert cache.stale(project=PROJECT, root=str(root)).stale == []
        assert hashing.COUNTERS.files == 0, "an old, unchanged file must not be re-read"

        target.write_bytes(b"skip_jwt() \n")  # same size
        os.utime(target, ns=(original.st_atime_ns, original.st_mtime_ns))
        assert os.stat(target).st_size == original.st_size
        assert os.stat(target).st_mtime_ns == original.st_mtime_ns
        stale = cache.stale(project=PROJECT, root=str(root)).stale
        assert [(s.id, s.changed) for s in stale] == [(memo.id, ["auth.py"])]
        with open_cache(tmp_path / "memos.db") as other:  # a new run, stat cache from the db
            assert [s.id for s in other.stale(project=PROJECT, root=str(root)).stale] == [memo.id]

        target.write_bytes(b"check_jwt()\n")
        os.utime(target, ns=(original.st_atime_ns, original.st_mtime_ns))
        assert cache.stale(project=PROJECT, root=str(root)).stale == []
        os.utime(target, None)  # touch: same bytes
        assert cache.stale(project=PROJECT, root=str(root)).stale == []
