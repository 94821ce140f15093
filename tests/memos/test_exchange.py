"""Export and import (memos/exchange.py): deterministic JSON Lines that round-trip byte for byte,
refused whole at the first bad line, written whole or not at all, and stale checks of an export."""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    DEEP,
    EMBEDDINGS_OFF,
    PYTHON,
    CliResult,
    Repo,
    _export_file,
    _export_line,
    assert_one_error_line,
    assert_skipped_line,
    cli_subprocess,
    counts,
    edited,
    git,
    hostile_clone,
    invoke_cli,
    open_cache,
    stale_json,
    user_files,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explomemo.cli.main import main
from explomemo.errors import ExportFileError, InputError
from explomemo.memos.cache import MemoCache
from explomemo.memos.exchange import (
    export_changes,
    export_memos,
    import_memos,
    read_export,
    stale_from_export,
)
from explomemo.shapes import ExportedFile, ExportedMemo, ImportResult


def _three_memos(cache: MemoCache, root: Path) -> list[str]:
    for project, question in (
        ("b", "How is B started?"),
        ("a", "How is A started?"),
        ("b", "How is B stopped?"),
    ):
        cache.record(
            question=question,
            conclusion=f"answer: {question}",
            files=["a.py"],
            project=project,
            root=str(root),
        )
    return list(export_memos(cache))


def _refusal(path: Path) -> str:
    with pytest.raises(ExportFileError) as refused:
        read_export(path)
    return str(refused.value)


BAD_EXPORT_LINES: list[tuple[str, str, str]] = [
    ("array", "[1]", "not a JSON object"),
    ("id-string", _export_line(1, id="1"), "id is missing or not a whole number"),
    ("project-number", _export_line(1, project=5), "project is missing or not a string"),
    (
        "question-long",
        _export_line(1, question="q" * 2001),
        "question is 2,001 characters long, over the limit of 2,000",
    ),
    (
        "date-number",
        _export_line(1, recorded_at=5),
        "recorded_at is not a UTC time such as 2026-11-30T10:00:00Z",
    ),
    (
        "date-words",
        _export_line(1, recorded_at="yesterday"),
        "recorded_at is not a UTC time such as 2026-11-30T10:00:00Z",
    ),
    ("no-files", _export_line(1, files=[]), "files is not a list of 1 to 64 files"),
    ("file-number", _export_line(1, files=[3]), "files[0] is not a JSON object"),
    (
        "path-dot-part",
        _export_line(1, files=[_export_file(path="a/./b.py")]),
        "files[0].path 'a/./b.py' is not a plain path relative to root (no leading /,"
        " no . or .. parts, / separators)",
    ),
    (
        "path-dot",
        _export_line(1, files=[_export_file(path=".")]),
        "files[0].path '.' is not a plain path relative to root (no leading /,"
        " no . or .. parts, / separators)",
    ),
    (
        "path-dot-dot",
        _export_line(1, files=[_export_file(path="..")]),
        "files[0].path '..' is not a plain path relative to root (no leading /,"
        " no . or .. parts, / separators)",
    ),
    (
        "origin-unknown",
        _export_line(1, origin="model"),
        "origin 'model' is not one of agent, transcript, subagent: it may come from a later"
        " explomemo",
    ),
    (
        "origin-long",
        _export_line(1, origin="m" * 30),
        "origin 'mmmmmmmmmmmmmmmmmmmm' is not one of agent, transcript, subagent: it may come"
        " from a later explomemo",
    ),
    (
        "repository-upper-case",
        _export_line(1, repository="A" * 40),
        "repository is not a commit id of 40 lowercase hex digits",
    ),
]


#: Any character UTF-8 can carry (no lone surrogates) but NUL: record refuses those.
CHARS = st.characters(codec="utf-8", exclude_characters="\x00")


#: Line breaks of every kind, which must not break an export's lines.
BREAKS = st.sampled_from(["\u2028", "\u2029", "\x85", "\r", "\n", "\x0b", "\x0c", "\x1c", "\x1e"])


TEXT = st.lists(st.one_of(CHARS, BREAKS), min_size=1, max_size=60).map("".join)


SOME_TEXT = TEXT.filter(lambda s: s.strip())


def _component_ok(name: str) -> bool:
    return name not in (".", "..") and len(name.encode()) <= 200


COMPONENT = (
    st.lists(
        st.one_of(st.characters(codec="utf-8", exclude_characters="\x00/"), BREAKS),
        min_size=1,
        max_size=12,
    )
    .map("".join)
    .filter(_component_ok)
)


PATH = st.lists(COMPONENT, min_size=1, max_size=3).map("/".join)


@st.composite
def memo_sets(draw: st.DrawFn) -> list[dict[str, Any]]:
    paths = draw(st.lists(PATH, min_size=1, max_size=4, unique=True))
    # No path may also be a folder of another.
    paths = [p for p in paths if not any(q.startswith(p + "/") for q in paths)]
    memos = []
    for _ in range(draw(st.integers(1, 4))):
        memos.append(
            {
                "project": draw(SOME_TEXT),
                "question": draw(SOME_TEXT),
                "conclusion": draw(SOME_TEXT),
                "files": draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3)),
            }
        )
    return memos


def _line(memo_id: int, **change: Any) -> dict[str, Any]:
    memo: dict[str, Any] = {
        "id": memo_id,
        "project": "p",
        "question": f"question {memo_id} \u2028 with \x85 odd \u2029 breaks",
        "conclusion": "c\u2028d",
        "root": "/somewhere",
        "recorded_at": "2026-01-01T00:00:00Z",
        "files": [{"path": "a.py", "sha256": "a" * 64, "xxh3": "b" * 32, "size": 3}],
    }
    memo.update(change)
    return memo


def _raw(memo: dict[str, Any]) -> str:
    # As an older export wrote it: U+2028, U+2029 and U+0085 raw.
    return json.dumps(memo, ensure_ascii=False)


SHA = "a" * 64


XXH = "b" * 32


def _file(**change: Any) -> dict[str, Any]:
    return {"path": "a.py", "sha256": SHA, "xxh3": XXH, "size": 3, **change}


BAD_LINES: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    ("id-zero", {"id": 0}, ("id 0", "out of range")),
    ("id-negative", {"id": -5}, ("id -5",)),
    ("id-2**63", {"id": 2**63}, ("id", str(2**63))),
    ("id-2**64", {"id": 2**64}, ("id", str(2**64))),
    ("id-float", {"id": 1.0}, ("id", "whole number")),
    ("id-bool", {"id": True}, ("id", "whole number")),
    ("id-string", {"id": "1"}, ("id", "whole number")),
    ("size-2**70", {"files": [_file(size=2**70)]}, ("files[0].size", str(2**70))),
    ("size-over-32-mib", {"files": [_file(size=32 * 1024 * 1024 + 1)]}, ("files[0].size",)),
    ("size-negative", {"files": [_file(size=-1)]}, ("files[0].size",)),
    (
        "duplicate-path",
        {"files": [_file(), _file(sha256="c" * 64)]},
        ("files[1].path", "appears twice"),
    ),
    (
        "65-files",
        {"files": [_file(path=f"f{i}.py") for i in range(65)]},
        ("files", "65", "64"),
    ),
    ("no-files", {"files": []}, ("files",)),
    ("sha-short", {"files": [_file(sha256="a" * 63)]}, ("files[0].sha256", "64")),
    ("sha-upper", {"files": [_file(sha256="A" * 64)]}, ("files[0].sha256",)),
    ("sha-not-hex", {"files": [_file(sha256="g" * 64)]}, ("files[0].sha256",)),
    ("xxh3-bad", {"files": [_file(xxh3="z" * 32)]}, ("files[0].xxh3", "32")),
    ("date-month-13", {"recorded_at": "2026-13-01T00:00:00Z"}, ("recorded_at",)),
    ("date-feb-30", {"recorded_at": "2026-02-30T00:00:00Z"}, ("recorded_at",)),
    ("date-words", {"recorded_at": "yesterday"}, ("recorded_at",)),
    ("date-offset", {"recorded_at": "2026-01-01T00:00:00+02:00"}, ("recorded_at",)),
    ("path-dotdot", {"files": [_file(path="../x.py")]}, ("files[0].path",)),
    ("path-absolute", {"files": [_file(path="/etc/passwd")]}, ("files[0].path",)),
    ("path-dot-part", {"files": [_file(path="a/./b.py")]}, ("files[0].path",)),
    ("path-nul", {"files": [_file(path="a\x00.py")]}, ("files[0].path", "NUL")),
    ("path-empty", {"files": [_file(path="")]}, ("files[0].path", "empty")),
    ("path-too-long", {"files": [_file(path="d/" * 2100 + "a.py")]}, ("files[0].path", "4,096")),
    ("question-empty", {"question": "  "}, ("question", "empty")),
    ("question-too-long", {"question": "q" * 2001}, ("question", "2,000")),
    ("conclusion-nul", {"conclusion": "a\x00b"}, ("conclusion", "NUL")),
    ("project-too-long", {"project": "p" * 201}, ("project", "200")),
    ("project-missing", {"project": None}, ("project",)),
]


@pytest.fixture
def big_db(tmp_path: Path) -> Path:
    """A database whose export is about 400 KB."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("a\n")
    db = tmp_path / "big.db"
    with open_cache(db) as cache:
        for i in range(20):
            cache.record(
                question=f"question {i}",
                conclusion=f"{i:02d}" * 9500,
                project="p",
                files=["a.py"],
                root=str(root),
            )
    return db


LIMIT = 256 * 1024


def _limited() -> None:
    # Writes past LIMIT bytes fail with EFBIG instead of killing the process.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def _export(
    db: Path, *args: str, stdout: Path | None = None, limited: bool = False
) -> subprocess.CompletedProcess[str]:
    """``explomemo export`` in a child process, its stdout sent to a file if given."""
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(stdout.open("wb")) if stdout else subprocess.PIPE
        return subprocess.run(
            [PYTHON, "-m", "explomemo", "--db", str(db), "export", *args],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **EMBEDDINGS_OFF},
            preexec_fn=_limited if limited else None,
            timeout=60,
            check=False,
        )


def _seeded(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    (root / "a.py").write_text("a\n")
    db = tmp_path / "m.db"
    with open_cache(db) as cache:
        cache.record(question="q", conclusion="c", project="p", files=["a.py"], root=str(root))
    return db


# Export order, and reading an export back --------------------------------------


@pytest.mark.timeout(60)
def test_export_sorts_by_project_then_id_and_reads_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_model: None
) -> None:
    """Kills exporting memos in id order instead of by project then id: with
    projects b, a, b recorded in that order the lines are (a, 2), (b, 1), (b, 3),
    through the CLI; ``import`` into a fresh database and ``stale --from`` read
    the file back (same bytes on a second export, the same stale memos)."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "shared.py").write_text("S = 1\n")
    (root / "only_b.py").write_text("B = 1\n")
    db = tmp_path / "one.db"
    for project, question, files in (
        ("b", "How is B started?", ["shared.py", "only_b.py"]),
        ("a", "How is A started?", ["shared.py"]),
        ("b", "How is B stopped?", ["only_b.py"]),
    ):
        run = invoke_cli(
            [
                "--db",
                str(db),
                "record",
                "--project",
                project,
                "--root",
                str(root),
                "--question",
                question,
                "--conclusion",
                "c",
                *files,
            ],
        )
        assert run.code == 0, run.err
    export = tmp_path / "memos.jsonl"
    assert invoke_cli(["--db", str(db), "export", "-o", str(export)]).code == 0
    text = export.read_text()
    assert [(m["project"], m["id"]) for m in map(json.loads, text.splitlines())] == [
        ("a", 2),
        ("b", 1),
        ("b", 3),
    ]
    assert invoke_cli(["--db", str(db), "export"]).out == text
    only_b = invoke_cli(["--db", str(db), "export", "--project", "b"]).out
    assert [(m["project"], m["id"]) for m in map(json.loads, only_b.splitlines())] == [
        ("b", 1),
        ("b", 3),
    ]
    fresh = tmp_path / "fresh.db"
    run = invoke_cli(["--db", str(fresh), "import", "--json", str(export), "--root", str(root)])
    assert json.loads(run.out) == {"read": 3, "added": 3, "replaced": 0, "kept": 0}
    assert invoke_cli(["--db", str(fresh), "export"]).out == text
    code, report = stale_json(
        capsys, "stale", "--from", str(export), "--root", str(root), "--check"
    )
    assert (code, report) == (0, {"checked": 3, "stale": []})
    (root / "shared.py").write_text("S = 2\n")
    code, report = stale_json(
        capsys, "stale", "--from", str(export), "--root", str(root), "--check"
    )
    assert code == 1
    assert [(e["project"], e["id"], e["changed"]) for e in report["stale"]] == [
        ("a", 2, ["shared.py"]),
        ("b", 1, ["shared.py"]),
    ]
    code, report = stale_json(
        capsys, "stale", "--from", str(export), "--root", str(root), "--project", "b"
    )
    assert [(e["project"], e["id"]) for e in report["stale"]] == [("b", 1)]


# Import keeps ids -----------------------------------------------------------------


def test_import_keeps_free_ids_renumbers_taken_ones_and_round_trips_byte_identical(
    one_file: Path, tmp_path: Path
) -> None:
    """Kills import dropping the exported id (``wanted_id``), taking an id that is not
    free, or counting ties as replacements: export → import → export gives the same
    bytes, a taken id gets a new one, a tie keeps the memo there, a newer one
    replaces it in place and an older one does not."""
    source = open_cache(tmp_path / "source.db")
    try:
        lines = _three_memos(source, one_file)
    finally:
        source.close()
    exported = tmp_path / "memos.jsonl"
    exported.write_text("".join(line + "\n" for line in lines))
    memos = read_export(exported)
    assert [(m.project, m.id) for m in memos] == [("a", 2), ("b", 1), ("b", 3)]
    target = open_cache(tmp_path / "target.db")
    try:
        assert import_memos(target, memos, str(one_file)) == ImportResult(
            read=3, added=3, replaced=0, kept=0
        )
        assert list(export_memos(target)) == lines
        assert import_memos(target, memos, str(one_file)) == ImportResult(
            read=3, added=0, replaced=0, kept=3
        )
        assert list(export_memos(target)) == lines
        newer = edited(tmp_path, lines[1], conclusion="revised", recorded_at="2099-01-01T00:00:00Z")
        older = edited(
            tmp_path, lines[2], conclusion="outdated", recorded_at="2000-01-01T00:00:00Z"
        )
        assert import_memos(target, [newer, older], str(one_file)) == ImportResult(
            read=2, added=0, replaced=1, kept=1
        )
        assert {m.id: m.conclusion for m in (target.show(i) for i in (1, 2, 3))} == {
            1: "revised",
            2: memos[0].conclusion,
            3: memos[2].conclusion,
        }
    finally:
        target.close()
    taken = open_cache(tmp_path / "taken.db")
    try:
        for question in ("z1", "z2", "z3"):
            taken.record(
                question=question, conclusion="z", files=["a.py"], project="z", root=str(one_file)
            )
        taken.forget(project="z", memo_id=1)
        taken.forget(project="z", memo_id=2)
        assert import_memos(taken, memos) == ImportResult(read=3, added=3, replaced=0, kept=0)
        assert {(m.id, m.project, m.question) for m in taken.list()} == {
            (1, "b", "How is B started?"),
            (2, "a", "How is A started?"),
            (3, "z", "z3"),
            (4, "b", "How is B stopped?"),
        }
        report = stale_from_export(memos, str(one_file))
        assert (report.checked, report.stale) == (3, [])
    finally:
        taken.close()


# Hook failure handling: whatever fails, one line on stderr and exit 0 --------


def test_stale_from_an_export_takes_its_diffs_from_the_root_given_not_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``export_changes`` reading git at the working directory instead of root."""
    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    repo.write("a.py", "A = 1\n")
    repo.commit("A")
    with open_cache(tmp_path / "memos.db") as cache:
        cache.record(question="q", conclusion="c", files=["a.py"], project="p", root=str(repo.path))
        lines = list(export_memos(cache))
    export = tmp_path / "memos.jsonl"
    export.write_text("".join(line + "\n" for line in lines))
    repo.write("a.py", "A = 2\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    memos = read_export(export)
    report = stale_from_export(memos, str(repo.path))
    (changed,) = export_changes(memos, report, str(repo.path))[report.stale[0].id]
    assert (changed.diff_source, changed.diff) == (
        "git",
        "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-A = 1\n+A = 2\n",
    )


# exchange.py: survivors of the final run (2026-12-01, main at dc59139) -------------


@pytest.mark.parametrize(
    ("line", "why"), [c[1:] for c in BAD_EXPORT_LINES], ids=[c[0] for c in BAD_EXPORT_LINES]
)
def test_each_refusal_of_an_export_line_is_its_whole_sentence(
    tmp_path: Path, line: str, why: str
) -> None:
    """Kills ``read_export``, ``_parse_line``, ``_text`` and ``_integer`` changing what a
    refused line's message says (a field named otherwise, a message lost or changed,
    the text of ``record``'s refusal kept whole); ``_parse_line`` taking a
    ``recorded_at`` that is not text to the date parser (``and`` for ``or``), and
    ``_normal_path`` taking ``.`` or ``..`` for a file's path. The last two cases kill
    ``_parse_line`` 91 (the origin's message changed), 184 (a ``repository`` that is text
    but not a commit id taken: ``and`` for ``or``) and 188-190 (its message lost or
    changed)."""
    export = tmp_path / "memos.jsonl"
    export.write_text(_export_line(7) + "\n" + line + "\n")
    assert _refusal(export) == (
        f"line 2 of {export} is not an explomemo memo ({why}):"
        " regenerate the file with explomemo export"
    )


def test_an_export_that_is_not_utf_8_or_repeats_an_id_is_refused_by_its_line(
    tmp_path: Path,
) -> None:
    """Kills ``read_export`` numbering the line that is not UTF-8 otherwise (line 3:
    two new lines before it), or changing the message of that refusal or of an id
    given twice."""
    export = tmp_path / "memos.jsonl"
    good = (_export_line(1) + "\n" + _export_line(2) + "\n").encode()
    export.write_bytes(good + b'{"id": 3, "question": "\xff"}\n')
    assert _refusal(export) == (
        f"line 3 of {export} is not UTF-8 text (byte 23 of the line): regenerate the file"
        " with explomemo export"
    )
    export.write_text(_export_line(7) + "\n" + _export_line(7, question="other") + "\n")
    assert _refusal(export) == (
        f"line 2 of {export} repeats memo id 7: each memo of an export has its own id;"
        " regenerate the file with explomemo export"
    )


def test_an_export_line_at_each_limit_is_read_and_blank_lines_are_skipped(
    tmp_path: Path,
) -> None:
    """Kills ``_parse_line`` refusing a line at one of its limits (64 files, a file of
    0 bytes, of 32 MiB), ``_path`` refusing a path of exactly 4,096 characters, and
    ``read_export`` stopping at a blank line (``break`` for ``continue``)."""
    long_path = "d/" * 2046 + "a.py"
    assert len(long_path) == 4096
    many = [_export_file(path=f"f{i}.py") for i in range(64)]
    limits = [_export_file(path="empty.py", size=0), _export_file(size=32 * 1024 * 1024)]
    export = tmp_path / "memos.jsonl"
    export.write_text(
        "\n".join(
            [
                _export_line(1, files=many),
                "",
                "   ",
                _export_line(2, files=limits),
                _export_line(2**63 - 1, files=[_export_file(path=long_path)]),
            ]
        )
        + "\n"
    )
    memos = read_export(export)
    assert [(m.id, len(m.files)) for m in memos] == [(1, 64), (2, 2), (2**63 - 1, 1)]
    assert [f.size for f in memos[1].files] == [0, 32 * 1024 * 1024]
    assert memos[2].files[0].path == long_path


@pytest.mark.timeout(30)
def test_an_export_that_cannot_be_read_says_why_and_a_fifo_never_blocks(tmp_path: Path) -> None:
    """Kills ``_read_regular`` opening without ``O_NONBLOCK`` (a FIFO with no writer would
    hang the import), or changing its messages: not a regular file (a FIFO, a folder),
    a path that cannot be opened, a file that cannot be read (``/proc/self/mem``:
    reading its start fails with EIO)."""
    fifo = tmp_path / "memos.fifo"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        assert _refusal(path) == (
            f"export file {path} is not a regular file: pass the path of a file written"
            " by explomemo export"
        )
    (tmp_path / "a.txt").write_text("x\n")
    under_a_file = tmp_path / "a.txt" / "memos.jsonl"
    assert _refusal(under_a_file) == (
        f"cannot read export file {under_a_file} (Not a directory): check the file"
    )
    memory = Path("/proc/self/mem")
    if memory.is_file():
        assert _refusal(memory) == (
            f"cannot read export file {memory} (Input/output error): check the file"
        )


def test_an_export_to_standard_output_is_its_exact_bytes_or_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``stdout._write_through`` writing to standard output's descriptor anything but
    the whole UTF-8 text (nothing, another encoding, the wrong descriptor), and
    ``write_whole`` changing its message when that write fails (``/dev/full``)."""
    from explomemo import stdout
    from explomemo.errors import OutputError

    text = "".join(line + "\n" for line in (_export_line(1, question="Wie groß?"),) * 3000)
    monkeypatch.setattr(stdout, "silence", lambda: None)
    with open(tmp_path / "out.jsonl", "w") as out:
        monkeypatch.setattr(sys, "stdout", out)
        stdout.write_whole(text, "the export", "write it with -o FILE")
    assert (tmp_path / "out.jsonl").read_bytes() == text.encode("utf-8")
    if not os.path.exists("/dev/full"):
        return
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        with pytest.raises(OutputError) as refused:
            stdout.write_whole(text, "the export", "write it with -o FILE")
    assert not refused.value.reader_gone
    assert str(refused.value) == (
        "cannot write the export to standard output (No space left on device): free space"
        " or raise the file size limit where it goes, or write it with -o FILE"
    )


def test_an_export_line_is_compact_json_holding_its_text_as_utf_8(
    words_cache: MemoCache, one_file: Path
) -> None:
    """Kills ``export_memos`` writing separators with spaces, or escaping every
    character outside ASCII (``ensure_ascii`` true or left out): a line is the
    memo's compact JSON, its text as written."""
    words_cache.record(
        question="Wie groß ist die Straße?",
        conclusion="Ça dépend",
        files=["a.py"],
        project="p",
        root=str(one_file),
    )
    (line,) = export_memos(words_cache)
    assert line == json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":"))
    assert '"question":"Wie groß ist die Straße?","conclusion":"Ça dépend"' in line


def test_import_counts_every_replacement_and_roots_memos_at_the_root_given(
    words_cache: MemoCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``import_memos`` counting only one replacement (``replaced = 1``), or
    rooting the memos of an export (which holds no root) at the working directory
    when a root is given."""
    root = tmp_path / "proj"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    export = tmp_path / "memos.jsonl"
    export.write_text("".join(_export_line(i) + "\n" for i in (1, 2)))
    first = import_memos(words_cache, read_export(export), str(root))
    assert (first.added, first.replaced) == (2, 0)
    assert {words_cache.show(i).root for i in (1, 2)} == {str(root)}
    newer = "2027-01-01T00:00:00Z"
    export.write_text("".join(_export_line(i, recorded_at=newer) + "\n" for i in (1, 2)))
    second = import_memos(words_cache, read_export(export), str(root))
    assert (second.added, second.replaced, second.kept) == (0, 2, 0)


def test_stale_from_an_export_reports_progress_and_names_a_bad_project(
    tmp_path: Path, one_file: Path
) -> None:
    """Kills ``stale_from_export`` dropping its progress callback, or naming a bad
    ``project`` otherwise."""
    from explomemo.errors import InputError

    export = tmp_path / "memos.jsonl"
    export.write_text(_export_line(1, files=[_export_file(path="a.py", size=600)]) + "\n")
    calls: list[tuple[int, int]] = []
    report = stale_from_export(
        read_export(export), str(one_file), lambda done, total: calls.append((done, total))
    )
    assert [e.changed for e in report.stale] == [["a.py"]]
    assert calls and calls[-1] == (1, 1)
    with pytest.raises(InputError, match=r"^project is empty: "):
        stale_from_export(read_export(export), str(one_file), project=" ")
    # Read by a caller that names no file: the sentence says "the export", and the
    # fix names no path.
    from explomemo.errors import NotFoundError

    with pytest.raises(NotFoundError) as caught:
        stale_from_export([], str(one_file), project="nope")
    assert str(caught.value) == (
        "project 'nope' has no memos in the export, which holds none:"
        " write it with explomemo export --project nope -o FILE"
    )


def test_stale_from_an_export_diffs_within_the_limits_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kills ``export_changes`` dropping the ``limits`` given (an agent's 6,000
    characters a file instead): with no limits the whole diff comes back."""
    from explomemo.changes.diffs import FILE_DIFF_CHARS, NO_LIMITS

    monkeypatch.setenv("EXPLOMEMO_SNAPSHOTS", "off")
    repo = Repo(tmp_path / "repo")
    repo.write("a.py", "".join(f"A{i} = {i}\n" for i in range(2000)))
    repo.commit("A")
    with open_cache(tmp_path / "memos.db") as cache:
        cache.record(question="q", conclusion="c", files=["a.py"], project="p", root=str(repo.path))
        lines = list(export_memos(cache))
    export = tmp_path / "memos.jsonl"
    export.write_text("".join(line + "\n" for line in lines))
    repo.write("a.py", "".join(f"A{i} = {i + 1}\n" for i in range(2000)))
    memos = read_export(export)
    report = stale_from_export(memos, str(repo.path))
    (changed,) = export_changes(memos, report, str(repo.path), NO_LIMITS)[report.stale[0].id]
    assert changed.diff is not None and len(changed.diff) > FILE_DIFF_CHARS
    assert "+A1999 = 2000" in changed.diff


def test_an_export_whose_reader_left_ends_quietly_with_exit_2(
    tmp_path: Path,
    one_file: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kills ``stdout.write_whole`` passing anything but the pipe's error on (in-process;
    the real closed pipe is tests/test_stdout.py's, left out of mutation runs as slow)."""
    from explomemo import stdout

    db = str(tmp_path / "m.db")
    record = ["--db", db, "record", "--project", "p", "--root", str(one_file)]
    assert invoke_cli([*record, "--question", "q", "--conclusion", "c", "a.py"]).code == 0

    def closed(text: str) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(stdout, "_write_through", closed)
    monkeypatch.setattr("explomemo.stdout.silence", lambda: None)
    run = invoke_cli(["--db", db, "export"])
    assert (run.code, run.out, run.err) == (2, "", "")


def test_a_library_export_names_a_bad_project(words_cache: MemoCache) -> None:
    """Kills ``export_memos`` checking the project under another name (the CLI checks
    ``--project`` while parsing, so only a library caller meets this check)."""
    from explomemo.errors import InputError

    with pytest.raises(InputError, match=r"^project is empty: "):
        list(export_memos(words_cache, project=""))
    with pytest.raises(InputError, match=r"^project is 201 characters long"):
        list(export_memos(words_cache, project="p" * 201))


# A folder where a file is expected ------------------------------------------


def test_an_export_file_that_is_a_folder_is_refused(tmp_path: Path) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    folder = tmp_path / "src"
    folder.mkdir()
    assert_one_error_line(
        invoke_cli(["import", "--json", str(folder)]), str(folder), "not a regular file"
    )
    run = cli_subprocess(["stale", "--from", str(folder), "--check"], cwd=tmp_path)
    assert_one_error_line(
        CliResult(run.returncode, run.stdout, run.stderr), str(folder), "not a regular file"
    )


# JSON nested past Python's recursion limit ------------------------------------


def test_an_export_line_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    deep = tmp_path / "deep.jsonl"
    deep.write_text(DEEP + "\n")
    # The test's folder is named after it: "nested" alone is in the path.
    expected = (f"line 1 of {deep} is not an explomemo memo (JSON nested too deeply)",)
    assert_one_error_line(invoke_cli(["import", "--json", str(deep)]), *expected)
    run = cli_subprocess(["stale", "--from", str(deep), "--check"], cwd=tmp_path)
    assert_one_error_line(CliResult(run.returncode, run.stdout, run.stderr), *expected)


# --project of list and export --------------------------------------------------


def test_an_export_of_a_project_without_memos_leaves_the_file_alone(
    one_memo: tuple[Path, Path],
) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    db, export = one_memo
    before = export.read_bytes()
    run = invoke_cli(["--db", str(db), "export", "--project", "typo", "-o", str(export)])
    assert_one_error_line(run, "project 'typo' has no memos", str(db), "projects are 'p'")
    assert export.read_bytes() == before
    assert invoke_cli(["--db", str(db), "export", "--project", "typo"]).out == ""
    # A project that has memos, and no --project (every project), still export.
    assert invoke_cli(["--db", str(db), "export", "--project", "p"]).out.encode() == before


# Nits: grammar, wording, positions ----------------------------------------------


def test_an_overlong_number_in_an_export_is_named_plainly(tmp_path: Path) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    export = tmp_path / "memos.jsonl"
    export.write_text('{"id": ' + "1" * 5000 + "}\n")
    line = assert_one_error_line(
        invoke_cli(["import", "--json", str(export)]), "line 1", "5,000 digits"
    )
    assert "set_int_max_str_digits" not in line


def test_export_creates_the_folders_missing_on_its_way(one_memo: tuple[Path, Path]) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    db, export = one_memo
    target = export.parent / "new" / ".explomemo" / "memos.jsonl"
    assert invoke_cli(["--db", str(db), "export", "-o", str(target)]).code == 0
    assert target.read_bytes() == export.read_bytes()


# Round trip, fuzzed --------------------------------------------------------


@pytest.mark.timeout(600)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(memos=memo_sets(), content=st.binary(max_size=64))
def test_any_recordable_memo_survives_export_import_export(
    memos: list[dict[str, Any]], content: bytes
) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = base / "root"
        for path in {p for memo in memos for p in memo["files"]}:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(content + path.encode())
        source, target = base / "source.db", base / "target.db"
        with open_cache(source) as cache:
            for memo in memos:
                cache.record(**memo, root=str(root))
            recorded = {(m.project, m.question) for m in cache.list()}
        first, second = base / "first.jsonl", base / "second.jsonl"
        assert invoke_cli(["--db", str(source), "export", "-o", str(first)])[0] == 0
        assert (
            invoke_cli(["--db", str(target), "import", "--json", str(first), "--root", str(root)])[
                0
            ]
            == 0
        )
        assert invoke_cli(["--db", str(target), "export", "-o", str(second)])[0] == 0
        assert first.read_bytes() == second.read_bytes()
        assert invoke_cli(["--db", str(target), "export"])[1].encode() == first.read_bytes()
        # One memo a line: a line break inside text never splits one.
        lines = first.read_bytes().split(b"\n")
        assert lines[-1] == b"" and len(lines) - 1 == len(recorded)
        exported = {(m["project"], m["question"]) for m in map(json.loads, lines[:-1])}
        assert exported == recorded
        code, out, _ = invoke_cli(
            ["stale", "--from", str(first), "--root", str(root), "--format", "json", "--check"]
        )
        assert code == 0 and json.loads(out) == {"checked": len(recorded), "stale": []}


@settings(max_examples=60, deadline=None)
@given(
    before=TEXT,
    after=TEXT,
    surrogate=st.integers(0xD800, 0xDFFF),
    field=st.sampled_from(["question", "conclusion", "project"]),
)
def test_lone_surrogates_are_refused_at_record_time(
    before: str, after: str, surrogate: int, field: str
) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "a.py").write_text("a\n")
        args = {"question": "q", "conclusion": "c", "project": "p", "files": ["a.py"]}
        args[field] = before + chr(surrogate) + after
        with open_cache(root / "m.db") as cache:
            with pytest.raises(InputError, match=field):
                cache.record(**args, root=str(root))
            assert cache.list() == []


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    good=st.integers(0, 6),
    bad_at=st.integers(0, 6),
    bad=st.sampled_from(
        [
            ("{not json", "not JSON"),
            ('"just a string"', "not a JSON object"),
            (_raw(_line(99, id=0)), "id 0 is out of range"),
            (_raw(_line(99, question="")), "question"),
            (_raw(_line(99, files=[])), "files"),
        ]
    ),
)
def test_one_bad_line_is_named_among_odd_line_breaks(
    good: int, bad_at: int, bad: tuple[str, str]
) -> None:
    """Export and import under hostile and careless use: a line breaking a rule record
    enforces is named by its number (among any line breaks), and skipped with a warning
    when other lines can be read; a file of which no line can be read is refused whole,
    and then nothing is written."""
    bad_at = min(bad_at, good)
    lines = [_raw(_line(i + 1)) for i in range(good)]
    lines.insert(bad_at, bad[0])
    with tempfile.TemporaryDirectory() as tmp:
        export = Path(tmp) / "memos.jsonl"
        export.write_text("\n".join(lines) + "\n", encoding="utf-8")
        for args in (["import", "--json", str(export)], ["stale", "--from", str(export)]):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["--db", str(Path(tmp) / "m.db"), *args])
            message = err.getvalue()
            assert message.count("\n") == 1
            assert f"line {bad_at + 1} of {export}" in message, message
            assert bad[1] in message, message
            if good:
                assert code == 0 and "it was skipped" in message
            else:
                assert code == 2 and out.getvalue() == ""
        if good:
            with sqlite3.connect(Path(tmp) / "m.db") as conn:
                assert conn.execute("SELECT count(*) FROM memos").fetchone() == (good,)
        else:
            assert not (Path(tmp) / "m.db").exists()


def test_odd_line_breaks_in_an_older_export_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    # The memos' root is the working directory: one outside any git repository, so that no
    # root_in_repo is written back whatever folder the suite runs from.
    monkeypatch.chdir(tmp_path)
    export = tmp_path / "old.jsonl"
    export.write_text("".join(_raw(_line(i)) + "\n" for i in (1, 2, 3)), encoding="utf-8")
    db = tmp_path / "m.db"
    run = invoke_cli(["--db", str(db), "import", "--json", str(export)])
    assert run.code == 0, run.err
    assert json.loads(run.out)["added"] == 3
    again = invoke_cli(["--db", str(db), "export"])
    # Written back with those characters escaped: one memo a line for any reader.
    assert again.out.splitlines() == again.out.split("\n")[:-1]
    # An older export's root is not written back (an export holds no absolute root).
    older = [{k: v for k, v in _line(i).items() if k != "root"} for i in (1, 2, 3)]
    assert [json.loads(line) for line in again.out.splitlines()] == older


# Every rule record enforces, on import -----------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("cid", "change", "names"), BAD_LINES, ids=[c[0] for c in BAD_LINES])
def test_import_refuses_what_record_refuses(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cid: str,
    change: dict[str, Any],
    names: tuple[str, ...],
) -> None:
    """Export and import under hostile and careless use: a line breaking a rule record
    enforces is skipped with a warning naming the line and the field; the other lines
    are imported (one bad memo must not block a team's import)."""
    db = tmp_path / "m.db"
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("abc")
    with open_cache(db) as cache:
        cache.record(question="kept", conclusion="c", project="p", files=["a.py"], root=str(root))
    export = tmp_path / "bad.jsonl"
    good = json.dumps(_line(7))
    export.write_text(good + "\n" + json.dumps(_line(8, **change)) + "\n")
    run = invoke_cli(["--db", str(db), "import", str(export)])
    assert_skipped_line(run, f"line 2 of {export}", *names)
    assert run.out == f"Read 1 memo from {export}: 1 added, 0 replaced, 0 kept.\n"
    with sqlite3.connect(db) as conn:
        assert sorted(conn.execute("SELECT id, imported FROM memos")) == [(1, 0), (7, 1)]


@pytest.mark.timeout(60)
def test_import_refuses_a_surrogate_escape_and_repeated_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Export and import under hostile and careless use: a line holding a lone surrogate,
    or repeating an id, is skipped by its number; the lines before it are imported."""
    db = tmp_path / "m.db"
    export = tmp_path / "bad.jsonl"
    export.write_text(
        json.dumps(_line(1)) + "\n" + json.dumps(_line(2, question="a\ud800b")) + "\n"
    )
    assert_skipped_line(
        invoke_cli(["--db", str(db), "import", "--json", str(export)]), "line 2", "question"
    )
    export.write_text(json.dumps(_line(4)) + "\n" + json.dumps(_line(4, question="other")) + "\n")
    assert_skipped_line(
        invoke_cli(["--db", str(db), "import", "--json", str(export)]), "line 2", "id 4"
    )
    with sqlite3.connect(db) as conn:
        assert sorted(conn.execute("SELECT id FROM memos")) == [(1,), (4,)]


@pytest.mark.parametrize("count", [0, 65])
def test_a_library_import_of_a_memo_on_no_file_or_too_many_is_refused(
    tmp_path: Path, count: int
) -> None:
    """``read_export`` refuses such a line, but a library caller builds ``ExportedMemo``
    itself: a memo resting on no file would pass every check as fresh, and ``export``
    would write a line its own ``import`` refuses (found by the second reader of
    ``exported_memos`` 69 and 71). The store refuses it, and nothing is written."""
    files = [ExportedFile(path=f"f{n}.py", sha256=SHA, xxh3="b" * 32, size=3) for n in range(count)]
    memo = ExportedMemo(
        id=1,
        project="p",
        question="q",
        conclusion="c",
        recorded_at="2026-01-01T00:00:00Z",
        files=files,
    )
    db = tmp_path / "m.db"
    with open_cache(db) as cache:
        with pytest.raises(InputError) as refused:
            import_memos(cache, [memo], root=str(tmp_path))
        assert cache.list() == []
    fix = {0: "give it the files its conclusion was read from", 65: "keep the 64 it rests on most"}
    assert str(refused.value) == (
        f"memo 'q' of project 'p' rests on {count} files, and a memo rests on 1 to 64: {fix[count]}"
    )


def test_imported_ids_can_be_shown_and_forgotten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The largest id SQLite holds goes in, and comes back out through show and forget."""
    db = tmp_path / "m.db"
    export = tmp_path / "ids.jsonl"
    export.write_text(json.dumps(_line(1)) + "\n" + json.dumps(_line(2**63 - 1)) + "\n")
    assert invoke_cli(["--db", str(db), "import", "--json", str(export)]).code == 0
    for memo_id in ("1", str(2**63 - 1)):
        assert invoke_cli(["--db", str(db), "show", memo_id, "--json"]).code == 0
        assert invoke_cli(["--db", str(db), "forget", memo_id]).code == 0
    assert counts(db)["memos"] == 0


def test_a_byte_order_mark_is_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    export = tmp_path / "bom.jsonl"
    export.write_bytes(b"\xef\xbb\xbf" + (json.dumps(_line(1)) + "\n").encode())
    db = tmp_path / "m.db"
    run = invoke_cli(["--db", str(db), "import", "--json", str(export)])
    assert run.code == 0, run.err
    assert json.loads(run.out)["added"] == 1
    run = invoke_cli(["stale", "--from", str(export), "--format", "json"])
    assert run.code == 0 and json.loads(run.out)["checked"] == 1
    # A mark anywhere else is not ignored: it is named.
    export.write_bytes((json.dumps(_line(1)) + "\n\ufeff" + json.dumps(_line(2))).encode())
    assert_skipped_line(invoke_cli(["--db", str(db), "import", "--json", str(export)]), "line 2")


# Only regular files are read -----------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["import", "--json", "stale-from"])
@pytest.mark.parametrize("source", ["/dev/zero", "fifo", "/dev/null"])
def test_an_export_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, command: str, source: str
) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    if source == "fifo":
        os.mkfifo(tmp_path / "fifo")
        source = str(tmp_path / "fifo")
    db = tmp_path / "m.db"
    args = ["import", "--json", source] if command == "import" else ["stale", "--from", source]
    done = cli_subprocess(["--db", str(db), *args], timeout=30)
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("explomemo: error:") and source in done.stderr
    assert "not a regular file" in done.stderr
    assert not db.exists()


# Writing an export ---------------------------------------------------------


@pytest.mark.timeout(60)
def test_export_to_stdout_that_cannot_be_written_exits_2(big_db: Path, tmp_path: Path) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    out = tmp_path / "out.jsonl"
    done = _export(big_db, stdout=out, limited=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("explomemo: error: cannot write the export to standard output")
    assert "File too large" in done.stderr
    assert out.stat().st_size == LIMIT  # what fitted; the exit code says it is not all


@pytest.mark.timeout(60)
def test_export_to_a_file_that_cannot_be_written_exits_2_and_keeps_it(
    big_db: Path, tmp_path: Path
) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    target = tmp_path / "out" / "memos.jsonl"
    target.parent.mkdir()
    target.write_text("the previous export\n")
    done = _export(big_db, "-o", str(target), limited=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and str(target) in done.stderr
    assert "File too large" in done.stderr
    assert target.read_text() == "the previous export\n"
    assert os.listdir(target.parent) == ["memos.jsonl"]  # no staging file left


def test_dash_is_standard_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    db = _seeded(tmp_path)
    monkeypatch.chdir(tmp_path)
    run = invoke_cli(["--db", str(db), "export", "-o", "-"])
    assert run.code == 0 and run.out == invoke_cli(["--db", str(db), "export"]).out
    assert json.loads(run.out)["question"] == "q"
    assert not (tmp_path / "-").exists()


def test_export_file_keeps_its_permissions_and_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    db = _seeded(tmp_path)
    target = tmp_path / "memos.jsonl"
    target.write_text("old\n")
    os.chmod(target, 0o600)
    os.chown(target, 1234, 1234) if os.geteuid() == 0 else None
    before = os.stat(target)
    assert invoke_cli(["--db", str(db), "export", "-o", str(target)]).code == 0
    after = os.stat(target)
    assert json.loads(target.read_text())["question"] == "q"
    assert stat.S_IMODE(after.st_mode) == 0o600
    assert (after.st_uid, after.st_gid) == (before.st_uid, before.st_gid)
    fresh = tmp_path / "new" / "memos.jsonl"
    assert invoke_cli(["--db", str(db), "export", "-o", str(fresh)]).code == 0
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o666 & ~umask


def test_export_writes_through_a_symbolic_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    db = _seeded(tmp_path)
    real = tmp_path / "shared" / "memos.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "memos.jsonl"
    link.symlink_to(real)
    assert invoke_cli(["--db", str(db), "export", "-o", str(link)]).code == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert json.loads(real.read_text())["question"] == "q"
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere" / "x.jsonl")
    run = invoke_cli(["--db", str(db), "export", "-o", str(dangling)])
    assert_one_error_line(run, str(dangling), "does not exist")
    assert dangling.is_symlink() and not (tmp_path / "nowhere").exists()


@pytest.mark.timeout(60)
def test_export_refuses_targets_that_are_not_regular_files(tmp_path: Path) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    db = _seeded(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    # What /dev/stdout is: a link to the process's descriptor 1 (here a pipe).
    # Links of its own, not /dev/stdout and /dev/null themselves: a regression
    # run as root must not replace the system's.
    (tmp_path / "stdout").symlink_to("/proc/self/fd/1")
    (tmp_path / "null").symlink_to("/dev/null")
    for target, kind in (
        (tmp_path / "fifo", "a FIFO"),
        (tmp_path / "stdout", "/proc"),
        (tmp_path / "null", "a device"),
    ):
        done = cli_subprocess(["--db", str(db), "export", "-o", str(target)], timeout=30)
        assert done.returncode == 2, done
        assert done.stderr.count("\n") == 1 and str(target) in done.stderr, done.stderr
        assert kind in done.stderr and "-o -" in done.stderr
        assert done.stdout == ""
    assert (tmp_path / "stdout").is_symlink() and (tmp_path / "null").is_symlink()
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)
    leftovers = [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    assert leftovers == []


def test_export_to_dev_stdout_when_it_is_a_file(tmp_path: Path) -> None:
    """A link to /proc/self/fd/1 with standard output sent to a file (``>> log``) is
    refused: renaming an export over that file would replace the whole log."""
    db = _seeded(tmp_path)
    out = tmp_path / "out.jsonl"
    (tmp_path / "stdout").symlink_to("/proc/self/fd/1")
    done = _export(db, "-o", str(tmp_path / "stdout"), stdout=out)
    assert done.returncode == 2, done.stderr
    assert "-o -" in done.stderr
    assert (tmp_path / "stdout").is_symlink()
    assert out.read_bytes() == b""


def test_windows_line_ends_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An export checked out with CRLF line ends (git's autocrlf) reads the same."""
    export = tmp_path / "crlf.jsonl"
    export.write_bytes(b"".join((json.dumps(_line(i)) + "\r\n").encode() for i in (1, 2)))
    run = invoke_cli(["stale", "--from", str(export), "--format", "json"])
    assert run.code == 0, run.err
    assert json.loads(run.out)["checked"] == 2


def test_stale_from_an_export_checks_one_project_in_the_library(tmp_path: Path) -> None:
    """Export and import under hostile and careless use: an export breaking a rule record
    enforces is refused whole, naming the line and the field, and nothing is written."""
    from explomemo.memos.exchange import export_memos, read_export, stale_from_export

    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("a\n")
    with open_cache(tmp_path / "m.db") as cache:
        for project in ("p", "q"):
            cache.record(
                question="q", conclusion="c", project=project, files=["a.py"], root=str(root)
            )
        export = tmp_path / "memos.jsonl"
        export.write_text("".join(line + "\n" for line in export_memos(cache)))
    (root / "a.py").write_text("changed\n")
    memos = read_export(export)
    assert stale_from_export(memos, str(root)).checked == 2
    report = stale_from_export(memos, str(root), project="q")
    assert report.checked == 1 and [entry.project for entry in report.stale] == ["q"]
    with pytest.raises(InputError, match="project"):
        stale_from_export(memos, str(root), project=" ")


def test_export_refuses_a_committed_link_out_of_the_work_tree(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 2: a repository whose ``.explomemo/memos.jsonl`` is a link into the home
    folder had the documented team command replace the file it leads to (a key file),
    and the link stayed, so ``git status`` showed nothing."""
    clone = hostile_clone(tmp_path, {".explomemo/memos.jsonl": home / "keys.txt"})
    monkeypatch.chdir(clone)
    db = str(tmp_path / "memos.db")
    recorded = invoke_cli(
        [
            "--db",
            db,
            "record",
            "--question",
            "What does app.py print?",
            "--conclusion",
            "hello",
            "app.py",
        ]
    )
    assert recorded.exit_code == 0, recorded.output
    before = user_files(home)
    result = invoke_cli(["--db", db, "export", "--project", "app", "-o", ".explomemo/memos.jsonl"])
    assert user_files(home) == before
    assert result.exit_code == 2, result.output
    assert f"export file .explomemo/memos.jsonl is a symbolic link that leads out of {clone}" in (
        result.stderr
    )
    assert git(clone, "status", "--porcelain") == ""


def test_export_writes_through_a_link_inside_the_work_tree(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link that stays inside the work tree is written through, as before."""
    clone = hostile_clone(tmp_path, {".explomemo/memos.jsonl": Path("../shared/memos.jsonl")})
    (clone / "shared").mkdir()
    (clone / "shared" / "memos.jsonl").write_text("")
    monkeypatch.chdir(clone)
    db = str(tmp_path / "memos.db")
    invoke_cli(["--db", db, "record", "--question", "Q?", "--conclusion", "C", "app.py"])
    result = invoke_cli(["--db", db, "export", "--project", "app", "-o", ".explomemo/memos.jsonl"])
    assert result.exit_code == 0, result.output
    assert (clone / ".explomemo" / "memos.jsonl").is_symlink()
    assert '"question":"Q?"' in (clone / "shared" / "memos.jsonl").read_text()


def test_import_never_takes_an_absolute_root_from_the_file(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 3: an export line of an older version naming an absolute ``root`` outside
    the clone, with a recorded SHA-256 a snapshot already holds (an empty file's), had
    ``show``, ``diff`` and ``stale --format markdown`` print a file from outside the clone
    whole, as the added lines of a diff."""
    clone = hostile_clone(tmp_path, {})
    monkeypatch.chdir(clone)
    db = str(tmp_path / "memos.db")
    (clone / "empty.txt").write_text("")
    recorded = invoke_cli(
        [
            "--db",
            db,
            "record",
            "--question",
            "Is empty.txt empty?",
            "--conclusion",
            "yes",
            "empty.txt",
        ]
    )
    assert recorded.exit_code == 0, recorded.output
    exported = invoke_cli(["--db", db, "export", "--project", "app"])
    line = json.loads(exported.stdout.splitlines()[0])
    line.update(question="What is in keys.txt?", root=str(home), id=2)
    line["files"][0]["path"] = "keys.txt"
    hostile = clone / "old-export.jsonl"
    hostile.write_text(json.dumps(line) + "\n")
    imported = invoke_cli(["--db", db, "import", "--json", str(hostile)])
    assert imported.exit_code == 0, imported.output
    listed = json.loads(invoke_cli(["--db", db, "list", "--json"]).stdout)
    assert {memo["root"] for memo in listed} == {str(clone)}
    ids = [str(memo["id"]) for memo in listed]
    shown = [
        invoke_cli(["--db", db, command, i]).stdout for command in ("show", "diff") for i in ids
    ]
    markdown = invoke_cli(["--db", db, "stale", "--format", "markdown"]).stdout
    for text in [*shown, markdown]:
        assert "PRIVATE KEY" not in text


def test_export_refuses_a_folder_link_that_leads_out_through_a_folder_of_the_users_with_git(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second reader's finding: with ``.explomemo`` committed as a link to the user's
    home, ``-o .explomemo/.config/app/settings.jsonl`` took ``~/.config/app`` (which
    holds a ``.git``) for the work tree and replaced the user's file. Every link on the
    path must lead inside the work tree that holds it."""
    (home / ".config" / "app" / ".git").mkdir(parents=True)
    settings = home / ".config" / "app" / "settings.jsonl"
    settings.write_text("user data\n")
    _export_through_link_is_refused(
        tmp_path, monkeypatch, home, ".explomemo/.config/app/settings.jsonl", settings
    )


def _export_through_link_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, link_to: Path, out: str, kept: Path
) -> None:
    """In a clone whose ``.explomemo`` is a committed link to ``link_to``, a memo recorded
    and exported with ``-o out`` is refused (exit 2, the link named) and ``kept`` keeps
    its text."""
    clone = hostile_clone(tmp_path, {".explomemo": link_to})
    monkeypatch.chdir(clone)
    db = str(tmp_path / "memos.db")
    assert (
        invoke_cli(["--db", db, "record", "--question", "Q?", "--conclusion", "C", "app.py"]).code
        == 0
    )
    result = invoke_cli(["--db", db, "export", "--project", "app", "-o", out])
    assert kept.read_text() == "user data\n"
    assert result.exit_code == 2, result.output
    assert f"export file {out} is a symbolic link that leads out of {clone}" in result.stderr


def test_export_follows_a_link_of_the_users_own_above_the_work_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link above the work tree (a home reached through ``/home -> /var/home``) is the
    user's, not the repository's: an export inside the work tree is written."""
    real = tmp_path / "var-home"
    (real / "src").mkdir(parents=True)
    (tmp_path / "home").symlink_to(real)
    repo = Repo(tmp_path / "home" / "src" / "app")
    repo.write("app.py", "A = 1\n")
    repo.commit("a")
    monkeypatch.chdir(repo.path)
    db = str(tmp_path / "memos.db")
    assert (
        invoke_cli(["--db", db, "record", "--question", "Q?", "--conclusion", "C", "app.py"]).code
        == 0
    )
    result = invoke_cli(["--db", db, "export", "--project", "app", "-o", ".explomemo/memos.jsonl"])
    assert result.exit_code == 0, result.output
    assert '"question":"Q?"' in (real / "src" / "app" / ".explomemo" / "memos.jsonl").read_text()


# exchange.py: survivors of the run of issue #21 --------------------------------------


def test_a_library_export_of_one_origin_holds_only_its_memos(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """``export_memos(origin=...)`` writes the memos of that origin only, as ``export
    --origin`` does. Kills ``export_memos`` 4 and 7 (the origin not passed on: every memo
    exported)."""
    export = tmp_path / "memos.jsonl"
    export.write_text(_export_line(1) + "\n" + _export_line(2, origin="transcript") + "\n")
    import_memos(words_cache, read_export(export), str(tmp_path))
    captured = [json.loads(line) for line in export_memos(words_cache, origin="transcript")]
    assert [(m["id"], m["origin"]) for m in captured] == [(2, "transcript")]
    agents = [json.loads(line) for line in export_memos(words_cache, origin="agent")]
    assert [(m["id"], "origin" in m) for m in agents] == [(1, False)]


def test_importing_memos_of_a_repository_again_keeps_or_replaces_them(
    words_cache: MemoCache, tmp_path: Path
) -> None:
    """Memos recorded in a repository (with its identity, ``repository``) are found again
    when their export is imported a second time: kept when no newer, replaced when newer,
    never added twice. Kills ``import_memos`` 26 and 30 (the memo's question looked up
    without its repository: not found, so the import tries to add it again)."""
    identity = "0123456789abcdef0123456789abcdef01234567"
    export = tmp_path / "memos.jsonl"
    export.write_text("".join(_export_line(i, repository=identity) + "\n" for i in (1, 2)))
    first = import_memos(words_cache, read_export(export), str(tmp_path))
    assert (first.added, first.replaced, first.kept) == (2, 0, 0)
    again = import_memos(words_cache, read_export(export), str(tmp_path))
    assert (again.added, again.replaced, again.kept) == (0, 0, 2)
    newer = _export_line(
        2, repository=identity, conclusion="newer", recorded_at="2027-01-01T00:00:00Z"
    )
    export.write_text(newer + "\n")
    third = import_memos(words_cache, read_export(export), str(tmp_path))
    assert (third.added, third.replaced, third.kept) == (0, 1, 0)
    assert [words_cache.show(i).conclusion for i in (1, 2)] == ["c", "newer"]


def test_export_from_a_subfolder_judges_a_link_reached_through_dot_dot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside git, ``-o ../memos.jsonl`` from a subfolder takes ``..`` as the system does:
    the link ``memos.jsonl`` of the folder above is judged by that folder, so a link to a
    neighbouring folder's file is refused, naming the folder, and the file is left alone.
    Kills ``export_folder`` 8 (``..`` kept as a part: the refusal names ``notes/sub/..``),
    9 (``..`` loses the path: the export fails with a TypeError) and 10 (the walk stops at
    ``..``: the folder above ``notes`` taken for the limit, and the neighbour's file
    replaced)."""
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    neighbour = tmp_path / "neighbour" / "keys.txt"
    neighbour.parent.mkdir()
    neighbour.write_text("secret\n")
    (notes / "memos.jsonl").symlink_to(neighbour)
    db = _seeded(tmp_path)
    monkeypatch.chdir(notes / "sub")
    run = invoke_cli(["--db", str(db), "export", "-o", "../memos.jsonl"])
    assert neighbour.read_text() == "secret\n"
    assert (notes / "memos.jsonl").is_symlink()
    assert run.code == 2, run.err
    assert_one_error_line(
        run,
        f"export file ../memos.jsonl is a symbolic link that leads out of {notes}"
        f" (to {neighbour}):",
    )


def test_export_refuses_a_committed_link_to_a_work_tree_of_the_users(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A committed ``.explomemo`` leading straight to a folder of the user's that holds a
    ``.git`` (``~/.config/app``): the link is judged by the clone that holds it, so
    ``-o .explomemo/settings.jsonl`` is refused and the user's file left alone. Kills
    ``export_folder`` 13 (links passed over unjudged: the next step, judged by the work
    tree found through the link, the user's, stays inside it, and the file is replaced)."""
    app = home / ".config" / "app"
    (app / ".git").mkdir(parents=True)
    settings = app / "settings.jsonl"
    settings.write_text("user data\n")
    _export_through_link_is_refused(
        tmp_path, monkeypatch, app, ".explomemo/settings.jsonl", settings
    )


def test_stale_from_an_export_in_the_library_gates_only_when_asked_and_names_the_export(
    tmp_path: Path,
) -> None:
    """A library caller that does not ask for the CI gate gets an empty report for an empty
    export; one that asks, and names no file, is told "the export" holds no memo.

    Kills ``stale_from_export`` defaulting ``require_memos`` to True (mutant 1) and its
    ``named`` changed for a caller that names no file (38, 40, 41)."""
    from explomemo.errors import NotFoundError

    report = stale_from_export([], str(tmp_path))
    assert (report.checked, report.stale) == (0, [])
    with pytest.raises(NotFoundError) as caught:
        stale_from_export([], str(tmp_path), require_memos=True)
    assert str(caught.value) == (
        "the export holds no memo, so there is nothing to check:"
        " write it with explomemo export --project P -o FILE"
    )


# exchange.py: survivors of issue #36's run --------------------------------------


def test_a_memo_recorded_at_the_latest_time_is_read_and_one_second_later_is_refused(
    tmp_path: Path,
) -> None:
    """``latest`` is the last time accepted, and the refusal of a later one is its whole
    sentence. Kills ``_parse_line`` 84 (``>=`` for ``>``) and 86, 87 (its message
    changed)."""
    export = tmp_path / "memos.jsonl"
    export.write_text(_export_line(7, recorded_at="2026-12-07T06:10:00Z") + "\n")
    (memo,) = read_export(export, latest="2026-12-07T06:10:00Z")
    assert memo.recorded_at == "2026-12-07T06:10:00Z"
    with pytest.raises(ExportFileError) as refused:
        read_export(export, latest="2026-12-07T06:09:59Z")
    assert str(refused.value) == (
        f"line 1 of {export} is not an explomemo memo (recorded_at 2026-12-07T06:10:00Z is in"
        " the future (this machine's clock says 2026-12-07T06:09:59Z, give or take a few"
        " minutes)): regenerate the file with explomemo export"
    )


def test_a_run_that_cost_no_token_is_read_as_zero(tmp_path: Path) -> None:
    """The store holds a ``cost_tokens`` of 0 (its CHECK says ``>= 0``), so an export of it
    reads. Kills ``_parse_line`` 135 (the least made 1)."""
    export = tmp_path / "memos.jsonl"
    export.write_text(_export_line(7, origin="subagent", cost_tokens=0) + "\n")
    (memo,) = read_export(export)
    assert memo.cost_tokens == 0


def test_a_skipped_repeated_id_is_one_sentence(tmp_path: Path) -> None:
    """The warning of a line skipped for its id ends its sentence once. Kills
    ``read_export`` 46, 47 (the refusal's ``;`` kept: "its own id;; it was skipped")."""
    export = tmp_path / "memos.jsonl"
    export.write_text(_export_line(7) + "\n" + _export_line(7, question="other") + "\n")
    skipped: list[str] = []
    assert [m.question for m in read_export(export, skipped)] == ["question 7"]
    assert skipped == [
        f"line 2 of {export} repeats memo id 7: each memo of an export has its own id;"
        " it was skipped: regenerate the file with explomemo export"
    ]


def test_import_compares_dates_in_utc_whatever_the_local_zone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a machine 12 hours behind UTC, at 06:05 UTC, ``import`` reads a memo recorded at
    06:00 UTC and refuses one recorded at 06:11 (past its 5 minutes of allowance). Kills
    ``read_for_import`` 3 (the local time taken for UTC: the memo of 06:00 is refused) and
    14 (``%M-%D`` for ``%m-%d``: "2026-10-12/07/26", earlier than any date of December)."""
    import time
    from datetime import UTC, datetime

    from explomemo.memos import exchange

    fixed = datetime(2026, 12, 7, 6, 5, tzinfo=UTC)

    class Clock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return (
                fixed.astimezone(tz) if tz is not None else fixed.astimezone().replace(tzinfo=None)
            )

    monkeypatch.setenv("TZ", "UTC+12")
    time.tzset()
    try:
        monkeypatch.setattr(exchange, "datetime", Clock)
        export = tmp_path / "memos.jsonl"
        export.write_text(
            _export_line(1, recorded_at="2026-12-07T06:00:00Z")
            + "\n"
            + _export_line(2, recorded_at="2026-12-07T06:11:00Z")
            + "\n"
        )
        skipped: list[str] = []
        assert [m.id for m in exchange.read_for_import(export, skipped)] == [1]
        assert len(skipped) == 1 and skipped[0].startswith(
            f"line 2 of {export} is not an explomemo memo (recorded_at 2026-12-07T06:11:00Z is"
            " in the future (this machine's clock says 2026-12-07T06:10:00Z,"
        )
    finally:
        monkeypatch.undo()
        time.tzset()


def test_an_export_line_nested_too_deeply_is_refused_in_process(tmp_path: Path) -> None:
    """The quick twin of ``test_an_export_line_nested_too_deeply_is_refused``, which mutmut
    skips as slow (it starts a process): kills ``_parse_line`` 7-10 (the message changed)."""
    deep = tmp_path / "deep.jsonl"
    deep.write_text(DEEP + "\n")
    assert _refusal(deep) == (
        f"line 1 of {deep} is not an explomemo memo (JSON nested too deeply):"
        " regenerate the file with explomemo export"
    )


def test_repo_folders_end_in_a_slash_for_memos_below_the_top(tmp_path: Path) -> None:
    """The quick twin of ``test_an_export_of_memos_from_two_folders_checks_fresh_in_a_clone``
    (mutmut skips it as slow): kills ``repo_folders`` 2 (``"XX/XX"`` for ``"/"``)."""
    from explomemo.memos.exchange import repo_folders

    export = tmp_path / "memos.jsonl"
    export.write_text(
        "".join(
            _export_line(n, **({} if where is None else {"root_in_repo": where})) + "\n"
            for n, where in ((1, "src/app"), (2, "."), (3, None))
        )
    )
    assert repo_folders(read_export(export)) == {1: "src/app/"}


def test_an_export_refused_for_secrets_names_each_memo_and_each_secret(
    tmp_path: Path, words_cache: MemoCache
) -> None:
    """The refusal names the memo (or memos) holding secrets, which secret in which field,
    and how to go on, as one whole sentence. Kills ``_refuse_secrets`` 3-6 (the field names
    changed), 15 (the kinds joined with ``XX, XX``), 18 (one memo's sentence for two),
    21-26 (the ids of two memos lost) and 28 (the fix changed)."""
    from explomemo.memos.exchange import exported_memos

    # Fake secrets of realistic shape, put together here so that no scanner of this
    # repository takes the test's source for a leak.
    github = "ghp_" + "R8kQ2mXv7LpA3nZ9wYc4TbE6uJ1sHd5fGo0i"
    aws_id = "AKIA" + "Q3ZX7NB2LW5KT9RM"
    root = tmp_path / "shop"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")

    def record(question: str, conclusion: str) -> int:
        memo = words_cache.record(
            question=question, conclusion=conclusion, files=["a.py"], root=str(root)
        )
        return memo.id

    def refusal() -> str:
        with pytest.raises(InputError) as refused:
            list(exported_memos(words_cache))
        return str(refused.value)

    def fix(memo_id: int) -> str:
        return (
            ", and an export is meant to be committed: nothing was exported; run `explomemo"
            f" scrub` to redact the secrets in the database, or `explomemo forget {memo_id}`"
        )

    record("where is x set?", "in a.py")
    first = record(f"does {github} still deploy?", f"yes, as {aws_id} does, and {github}")
    assert refusal() == (
        f"memo {first} holds a secret (github token in its question, aws access key id in its"
        " conclusion, github token in its conclusion)" + fix(first)
    )
    second = record("which key deploys?", f"the key {aws_id}")
    assert refusal() == (
        f"memos {first}, {second} hold secrets (memo {first}: github token in its question,"
        " aws access key id in its conclusion, github token in its conclusion)" + fix(first)
    )
