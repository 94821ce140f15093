"""Origin: where a memo came from, in every memo shape, ``list --origin``, ``export
--origin``, exports (written only for captured memos) and imports (which keep it and let an
agent's memo win over a captured one)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from helpers import in_a_minute, invoke_cli, open_cache

from explomemo.check.hashing import git_blob_id
from explomemo.errors import InputError
from explomemo.memos.exchange import exported_memos
from explomemo.store.database import Store
from explomemo.store.pending import Capture, CapturedFile


def capture(
    db: Path,
    root: Path,
    question: str,
    conclusion: str = "captured answer",
    recorded_at: str = "2026-11-30T10:00:00Z",
) -> tuple[int, bool] | None:
    """Store a captured memo of ``root/a.py`` (project: the folder's name) as the Stop hook
    does."""
    data = (root / "a.py").read_bytes()
    import xxhash

    row = CapturedFile(
        "a.py",
        hashlib.sha256(data).hexdigest(),
        xxhash.xxh3_128_hexdigest(data),
        len(data),
        git_blob_id(data),
    )
    found = Capture(root.name, question, conclusion, str(root), recorded_at, [row], [])
    store = Store.open(db)
    try:
        with store.write() as conn:
            return store.save_capture(conn, found)
    finally:
        store.close()


@pytest.fixture
def root(project: Path) -> Path:
    """A folder (project ``root``) holding ``a.py``."""
    return project


def test_every_memo_shape_says_its_origin(db_path: Path, root: Path) -> None:
    capture(db_path, root, "where is a set?")
    with open_cache(db_path) as cache:
        mine = cache.record(question="what is a?", conclusion="one", files=["a.py"], root=str(root))
        assert mine.origin == "agent"
        listed = {m.question: m.origin for m in cache.list()}
        assert listed == {"where is a set?": "transcript", "what is a?": "agent"}
        recalled = cache.recall(query="where is a set", root=str(root))
        assert recalled.matches[0].origin == "transcript"
        assert cache.show(1, root=str(root)).origin == "transcript"
        assert cache.show(mine.id, root=str(root)).origin == "agent"


def test_a_capture_never_replaces_an_agents_memo_nor_a_later_capture(
    db_path: Path, root: Path
) -> None:
    with open_cache(db_path) as cache:
        cache.record(question="What is a?", conclusion="one", files=["a.py"], root=str(root))
    assert capture(db_path, root, "what is A?") is None
    assert capture(db_path, root, "where is a set?", recorded_at="2026-11-30T12:00:00Z") == (
        2,
        False,
    )
    # A capture made earlier (stored late, from the pending file) keeps the later one.
    assert capture(db_path, root, "where is a set?", "older", "2026-11-30T11:00:00Z") is None
    assert capture(db_path, root, "Where is a set?", "newer", "2026-11-30T13:00:00Z") == (2, True)
    with open_cache(db_path) as cache:
        assert [(m.origin, m.question) for m in cache.list()] == [
            ("agent", "What is a?"),
            ("transcript", "Where is a set?"),
        ]


def test_list_and_export_keep_one_origin_and_export_counts_the_captured(
    db_path: Path, root: Path, tmp_path: Path
) -> None:
    capture(db_path, root, "where is a set?")
    with open_cache(db_path) as cache:
        cache.record(question="what is a?", conclusion="one", files=["a.py"], root=str(root))
    run = invoke_cli(["--db", str(db_path), "list", "--origin", "transcript", "--json"])
    assert [m["question"] for m in json.loads(run.out)] == ["where is a set?"]
    run = invoke_cli(["--db", str(db_path), "list", "--origin", "agent", "--json"])
    assert [m["question"] for m in json.loads(run.out)] == ["what is a?"]
    assert invoke_cli(["--db", str(db_path), "list", "--origin", "model"]).code == 2

    whole = invoke_cli(["--db", str(db_path), "export"])
    assert whole.code == 0
    assert "wrote 1 captured memo (origin transcript" in whole.err
    lines = [json.loads(line) for line in whole.out.splitlines()]
    # Only a captured memo carries origin: committed exports of agent memos do not change.
    assert [line.get("origin") for line in lines] == ["transcript", None]
    agents = invoke_cli(["--db", str(db_path), "export", "--origin", "agent"])
    assert agents.err == "" and [json.loads(x)["question"] for x in agents.out.splitlines()] == [
        "what is a?"
    ]
    out = tmp_path / "captured.jsonl"
    only = invoke_cli(["--db", str(db_path), "export", "--origin", "transcript", "-o", str(out)])
    assert only.code == 0 and "wrote 1 captured memo" in only.err
    assert [json.loads(x)["origin"] for x in out.read_text().splitlines()] == ["transcript"]


def test_import_keeps_origin_and_an_agents_memo_wins_whatever_its_time(
    db_path: Path, root: Path, tmp_path: Path
) -> None:
    capture(db_path, root, "where is a set?", recorded_at="2026-11-30T10:00:00Z")
    with open_cache(db_path) as cache:
        cache.record(question="what is a?", conclusion="one", files=["a.py"], root=str(root))
    export = tmp_path / "e.jsonl"
    assert invoke_cli(["--db", str(db_path), "export", "-o", str(export)]).code == 0
    lines = [json.loads(x) for x in export.read_text().splitlines()]

    other = tmp_path / "other.db"
    run = invoke_cli(["--db", str(other), "import", "--json", str(export), "--root", str(root)])
    assert run.code == 0, run.err
    with open_cache(other) as cache:
        assert {m.question: m.origin for m in cache.list()} == {
            "where is a set?": "transcript",
            "what is a?": "agent",
        }
    # An older agent memo replaces a newer captured one; a newer captured memo never
    # replaces an older agent's.
    lines[0].pop("origin")
    lines[0]["recorded_at"] = "2020-01-01T00:00:00Z"
    lines[1]["origin"] = "transcript"
    # Newer than the agent's memo recorded above, and not in the future (that is refused).
    lines[1]["recorded_at"] = in_a_minute()
    export.write_text("".join(json.dumps(x) + "\n" for x in lines))
    run = invoke_cli(["--db", str(other), "import", "--json", str(export), "--root", str(root)])
    assert json.loads(run.out) == {"read": 2, "added": 0, "replaced": 1, "kept": 1}
    with open_cache(other) as cache:
        assert {m.question: m.origin for m in cache.list()} == {
            "where is a set?": "agent",
            "what is a?": "agent",
        }


def test_an_export_line_with_an_unknown_origin_is_refused(tmp_path: Path, root: Path) -> None:
    line = {
        "id": 1,
        "project": "root",
        "question": "q",
        "conclusion": "c",
        "recorded_at": "2026-11-30T10:00:00Z",
        "origin": "model",
        "files": [{"path": "a.py", "sha256": "0" * 64, "xxh3": "0" * 32, "size": 1}],
    }
    export = tmp_path / "e.jsonl"
    export.write_text(json.dumps(line) + "\n")
    run = invoke_cli(["--db", str(tmp_path / "x.db"), "import", "--json", str(export)])
    assert run.code == 2 and "origin 'model' is not one of agent, transcript, subagent" in run.err


def test_a_library_caller_asking_for_an_unknown_origin_is_told_the_two(db_path: Path) -> None:
    """The CLI's ``--origin`` takes only the two choices; a library caller reaches
    ``inputs.check_origin`` itself, and its message is all it gets (mutant
    ``check_origin`` 3 made it ``None``)."""
    wanted = "origin 'model' is not one of agent, transcript, subagent: pass one of those"
    with open_cache(db_path) as cache:
        with pytest.raises(InputError) as listing:
            cache.list(origin="model")
        with pytest.raises(InputError) as exporting:
            list(exported_memos(cache, None, "model"))
    assert str(listing.value) == str(exporting.value) == wanted


def test_between_captured_memos_of_either_origin_import_keeps_the_newer(
    tmp_path: Path, db_path: Path, root: Path
) -> None:
    """A subagent memo and a transcript memo of one question: the newer is kept, whichever
    origin it has (origin decides only against an agent's memo)."""
    capture(db_path, root, "where is a set?", "the turn's", recorded_at="2026-11-30T10:00:00Z")
    line = {
        "id": 7,
        "project": root.name,
        "question": "where is a set?",
        "conclusion": "the run's",
        "recorded_at": "2026-11-29T10:00:00Z",
        "origin": "subagent",
        "agent_type": "Explore",
        "cost_tokens": 78000,
        "files": [{"path": "a.py", "sha256": "0" * 64, "xxh3": "0" * 32, "size": 1}],
    }
    export = tmp_path / "memos.jsonl"
    for recorded_at, kept in (("2026-11-29T10:00:00Z", 1), ("2026-12-01T10:00:00Z", 0)):
        export.write_text(json.dumps({**line, "recorded_at": recorded_at}) + "\n")
        run = invoke_cli(
            ["--db", str(db_path), "import", "--json", str(export), "--root", str(root)]
        )
        assert run.code == 0, run.err
        assert json.loads(run.out)["kept"] == kept
    with open_cache(db_path) as cache:
        (memo,) = cache.list()
    assert (memo.origin, memo.agent_type, memo.cost_tokens) == ("subagent", "Explore", 78000)


def test_a_captured_turn_comes_lean_even_when_it_clearly_answers(db_path: Path, root: Path) -> None:
    """A captured turn was judged by no one: recall never serves it whole (nor counts it as
    served), while the same memo recorded by an agent comes whole."""
    question = "where is the retry backoff of the upstream client computed?"
    capture(db_path, root, question)
    with open_cache(db_path) as cache:
        (captured,) = cache.recall(query=question, root=str(root)).matches
        assert captured.origin == "transcript" and captured.whole is False
        assert captured.conclusion is None
        assert [s.served for s in cache.stats().projects[0].surfaces if s.surface == "recall"] == [
            0
        ]
        mine = cache.record(question=question, conclusion="in a.py", files=["a.py"], root=str(root))
        (recorded,) = cache.recall(query=question, root=str(root)).matches
    assert recorded.id == mine.id and recorded.whole is True and recorded.conclusion == "in a.py"
