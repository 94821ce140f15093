"""`explomemo recall` right after a large import answers by words and says so; `explomemo index`
computes the vectors it lacked (issue 22); a few memos without vectors it embeds itself
(issue 37)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import MEMOS, assert_one_error_line, invoke_cli, open_cache, record_all

from explomemo.memos import cache as cache_module


def _recall(db: Path, app: Path, *extra: str) -> str:
    run = invoke_cli(
        [
            "--db", str(db), "recall", "--project", "svc", "--root", str(app), *extra,
            "where is the JWT signature checked?",
        ]
    )  # fmt: skip
    assert run.code == 0, run.err
    return run.out


def test_recall_embeds_a_few_memos_without_vectors_itself(app: Path, db_path: Path) -> None:
    """As after `import` of a small export: the first recall loads the model, embeds them,
    and finds the memo by meaning."""
    with open_cache(db_path) as cache:
        ids = record_all(cache, app)
    found = json.loads(_recall(db_path, app, "--json"))
    assert "pending_vectors" not in found and found["semantic_index"]
    assert found["matches"][0]["id"] == ids["auth"]
    assert found["matches"][0]["matched_by"] in {"embedding", "both"}
    assert invoke_cli(["--db", str(db_path), "index"]).out == "Computed the vectors of 0 memos.\n"


def test_recall_says_which_memos_it_searched_by_words_until_index_computes_them(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "INLINE_BACKLOG", 2)  # 3 memos: more than it embeds
    with open_cache(db_path) as cache:
        ids = record_all(cache, app)
    pending = json.loads(_recall(db_path, app, "--json"))
    assert pending["pending_vectors"] == len(MEMOS)
    assert [(m["id"], m["matched_by"]) for m in pending["matches"]][:1] == [(ids["auth"], "words")]
    assert f"({len(MEMOS)} memos searched by words only" in _recall(db_path, app)
    indexed = invoke_cli(["--db", str(db_path), "index", "--project", "svc"])
    assert indexed.code == 0, indexed.err
    assert indexed.out == f"Computed the vectors of {len(MEMOS)} memos.\n"
    assert invoke_cli(["--db", str(db_path), "index"]).out == "Computed the vectors of 0 memos.\n"
    found = json.loads(_recall(db_path, app, "--json"))
    assert "pending_vectors" not in found
    assert found["matches"][0]["id"] == ids["auth"]
    assert found["matches"][0]["matched_by"] in {"embedding", "both"}
    assert "searched by words only" not in _recall(db_path, app)


def test_index_refuses_an_unknown_project_and_embeddings_off(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_cache(db_path) as cache:
        record_all(cache, app)
    unknown = invoke_cli(["--db", str(db_path), "index", "--project", "nope"])
    assert_one_error_line(unknown, "'nope' has no memos", "'svc'")
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
    off = invoke_cli(["--db", str(db_path), "index"])
    assert_one_error_line(off, "embeddings are off")


def test_recall_before_any_vector_does_not_load_the_model(
    app: Path, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "INLINE_BACKLOG", 2)  # 3 memos: more than it embeds
    with open_cache(db_path) as cache:
        record_all(cache, app)
    # A model that cannot load: loading it would print a warning.
    monkeypatch.setenv("EXPLOMEMO_MODEL_PATH", str(tmp_path / "no-model-here"))
    run = invoke_cli(
        ["--db", str(db_path), "recall", "--project", "svc", "--root", str(app), "--json", "JWT"]
    )
    assert run.code == 0 and run.err == "", run.err
    assert json.loads(run.out)["pending_vectors"] == len(MEMOS)
    record = invoke_cli(
        [
            "--db", str(db_path), "record", "--project", "svc", "--root", str(app),
            "--question", "Where are the tokens?", "--conclusion", "app/tokens.py.",
            "app/tokens.py",
        ]
    )  # fmt: skip
    assert record.code == 0
    assert "warning:" in record.err and "is not a directory" in record.err
