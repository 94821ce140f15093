"""A recall's whole answer stays within its size budget, diffs and all (docs/reference.md,
"Limits"): through the CLI's ``recall --json`` and a real MCP client over stdio.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import Repo, call_tools_stdio, invoke_cli, open_cache

from explomemo.changes.diffs import ANSWER_DIFF_CHARS, FILE_DIFF_CHARS
from explomemo.shapes import RECALL_CHARS

QUERY = "where is the budget handled"


@pytest.fixture(autouse=True)
def _words_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the MCP server of these tests: found by words (no model to load)."""
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")


def recall_cli(db: Path, repo: Repo, *extra: str, query: str = QUERY) -> str:
    result = invoke_cli(
        ["--db", str(db), "recall", "--project", "demo", "--root", str(repo.path), *extra, query]
    )
    assert result.exit_code == 0, result.output
    return result.stdout.removesuffix("\n")


def record_all(db: Path, repo: Repo, memos: list[tuple[str, str, list[str]]]) -> None:
    with open_cache(db) as cache:
        for question, conclusion, files in memos:
            cache.record(
                question=question,
                conclusion=conclusion,
                files=files,
                project="demo",
                root=str(repo.path),
            )
        cache.wait_for_snapshots()


def test_many_stale_memos_of_many_changed_files_stay_within_the_budget(
    repo: Repo, db_path: Path
) -> None:
    # The review's case: 20 memos resting on the same 64 files of 300 lines, every line changed.
    names = [f"src/f{i:02d}.py" for i in range(64)]
    sizes = {}
    for i, name in enumerate(names):
        sizes[name] = (
            repo.write(name, "".join(f"line {n} of file {i}\n" for n in range(300))).stat().st_size
        )
    repo.commit("files")
    record_all(
        db_path,
        repo,
        [(f"{QUERY} part {n}", f"conclusion {n}", names) for n in range(20)]
        + [("where is the ledger kept?", "In the files.", names)],
    )
    for i, name in enumerate(names):
        repo.write(name, "".join(f"LINE {n} OF FILE {i}\n" for n in range(300)))

    # None of the 20 clearly answers: each comes lean, its changed files counted, no diff.
    text = recall_cli(db_path, repo, "--limit", "20", "--json")
    assert len(text) <= RECALL_CHARS
    answer = json.loads(text)
    shown = len(answer["matches"])
    assert shown >= 1 and answer.get("omitted", 0) == 20 - shown
    for match in answer["matches"]:
        assert match["whole"] is False and match["status"] == "stale"
        assert match["changed"] == dict.fromkeys(names, "+300 -300")
    assert '"diff' not in text
    (reply,) = call_tools_stdio(
        db_path,
        [
            (
                "memory_exploration_recall",
                {"query": QUERY, "project": "demo", "root": str(repo.path), "limit": 20},
            )
        ],
        cwd=repo.path,
    )
    assert not reply.is_error, reply.text
    assert len(reply.text) <= RECALL_CHARS
    assert reply.data == answer

    # One that clearly answers comes whole, its 64 diffs within the limits.
    text = recall_cli(db_path, repo, "--limit", "20", "--json", query="ledger kept")
    assert len(text) <= RECALL_CHARS
    (match,) = json.loads(text)["matches"]
    assert "whole" not in match and match["conclusion"] == "In the files."
    files = match["files"]
    diffs = [f["diff"] for f in files if f["diff"] is not None]
    assert diffs and all(len(d) <= FILE_DIFF_CHARS for d in diffs)
    assert sum(map(len, diffs)) <= ANSWER_DIFF_CHARS
    # Past the budget a changed file is its counts and why it has no diff.
    spent = [f for f in files if f["diff"] is None]
    assert spent and all(
        {k: v for k, v in f.items() if k not in ("path", "sha256")}
        == {
            "size": sizes[f["path"]],
            "state": "changed",
            "diff": None,
            "diff_source": "budget",
            "added": 300,
            "removed": 300,
        }
        for f in spent
    )


def test_matches_come_in_rank_order_while_the_answer_fits(repo: Repo, db_path: Path) -> None:
    # 64 changed files of long paths: even lean, 20 stale matches would not fit in 40,000.
    names = [f"{'d' * 100}/f{i:02d}.py" for i in range(64)]
    for name in names:
        repo.write(name, "X = 1\n")
    record_all(db_path, repo, [(f"{QUERY} part {n}", f"conclusion {n}", names) for n in range(20)])
    for name in names:
        repo.write(name, "X = 2\n")
    text = recall_cli(db_path, repo, "--limit", "20", "--json")
    answer = json.loads(text)
    assert len(text) <= RECALL_CHARS
    # None clearly answers: every match lean while they fit.
    lean = answer["matches"]
    assert all(m["whole"] is False and "conclusion" not in m for m in lean)
    assert all(m["changed"] == dict.fromkeys(names, "+1 -1") for m in lean)
    shown = len(lean)
    assert 2 < shown < 20 and answer["omitted"] == 20 - shown
    assert len(text) + len(json.dumps(lean[0], indent=2)) + 6 * 4 > RECALL_CHARS
    readable = recall_cli(db_path, repo, "--limit", "20")
    assert readable.endswith(
        f"({20 - shown} more matches left out to keep the answer within {RECALL_CHARS:,}"
        " characters: ask a narrower question to see them)"
    )
    # Under the budget nothing is left out, and the answer says nothing of it.
    answer = json.loads(recall_cli(db_path, repo, "--limit", "2", "--json"))
    assert len(answer["matches"]) == 2 and "omitted" not in answer


def test_the_best_match_comes_back_whole_even_alone_over_the_budget(
    repo: Repo, db_path: Path
) -> None:
    # A memo at the limits: a 2,000-character question, a 20,000-character conclusion
    # (new lines: twice that in JSON) and 64 files with long paths.
    names = [f"{'d' * 200}/f{i:02d}.py" for i in range(64)]
    for name in names:
        repo.write(name, "X = 1\n")
    question = (QUERY + " ") * 70
    question = question[:2000]
    conclusion = "a\n" * 10_000
    record_all(
        db_path,
        repo,
        [
            (question, conclusion, names),
            # Two that share a word of the query: it clearly answers, they come after it.
            ("where is the budget kept", "small", names[:1]),
            ("how is the cache handled", "small", names[:1]),
        ],
    )
    text = recall_cli(db_path, repo, "--limit", "20", "--json")
    answer = json.loads(text)
    assert len(text) > RECALL_CHARS
    (match,) = answer["matches"]
    assert (match["question"], match["conclusion"]) == (question, conclusion)
    assert len(match["files"]) == 64 and answer["omitted"] == 2
