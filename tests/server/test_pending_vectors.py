"""A server's recall does not depend on when it is asked (issue 37): held on events, never timed.

The model and the vector thread are held still (a loader whose load waits, a read of the
vectors that waits); a recall waits for them rather than answer by words, embeds the few
memos another process wrote without vectors, and only a large backlog (an import) is
searched by words meanwhile, counted in ``pending_vectors``, and found by meaning once the
vector thread stored its vectors, including after a server closed while it filled.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    MEMOS,
    PYTHON,
    _replies,
    as_default_project,
    cli_subprocess,
    open_cache,
    record_all,
    record_all_with_vectors,
)

from explomemo.recall.embeddings import Embedder, ModelLoader
from explomemo.server.tools import create_server

RECALL = "memory_exploration_recall"
#: How long a test waits for the vector thread it released (a failure, not a measure).
PATIENCE = 120


def _recall(query: str, app: Path) -> tuple[str, dict[str, Any]]:
    return (RECALL, {"query": query, "project": "svc", "root": str(app)})


def _vectors_stored(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(
            conn.execute(
                "SELECT count(*) FROM memos WHERE embedding IS NOT NULL"
                " AND question_embedding IS NOT NULL"
            ).fetchone()[0]
        )


async def _until(
    ask: Callable[[], Awaitable[dict[str, Any]]], done: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """Ask again until ``done`` holds of the answer (the vector thread works meanwhile)."""
    for _ in range(PATIENCE * 10):
        answer = await ask()
        if done(answer):
            return answer
        await asyncio.sleep(0.1)
    raise AssertionError(f"never came: the last answer was {answer}")


def _asker(client: Any, query: str, app: Path) -> Callable[[], Awaitable[dict[str, Any]]]:
    """What asks ``client`` to recall ``query`` in project svc, for the answer's JSON."""

    async def ask() -> dict[str, Any]:
        (reply,) = await _replies(client, [_recall(query, app)])
        data: dict[str, Any] = reply.data
        return data

    return ask


def _serve(db: Path, load: Callable[[Mapping[str, str]], Embedder | None]) -> Any:
    from mcp import Client

    return Client(create_server(db, env={}, loader=ModelLoader({}, load=load)))


def test_a_fresh_servers_first_recall_embeds_the_few_memos_without_vectors(
    embedder: Embedder, app: Path, db_path: Path
) -> None:
    with open_cache(db_path) as cache:
        ids = record_all(cache, app)

    async def run() -> None:
        async with _serve(db_path, lambda env: embedder) as client:
            first = await _asker(client, "where is the JWT signature checked?", app)()
            assert first["semantic_index"] is True and "pending_vectors" not in first
            assert first["matches"][0]["id"] == ids["auth"]
            assert first["matches"][0]["matched_by"] in {"embedding", "both"}

    asyncio.run(run())
    assert _vectors_stored(db_path) == len(MEMOS)


def test_a_recall_waits_for_the_model_still_loading(
    embedder: Embedder, app: Path, db_path: Path
) -> None:
    ids = record_all_with_vectors(db_path, app, embedder)
    loaded = threading.Event()

    def load(env: Mapping[str, str]) -> Embedder:
        assert loaded.wait(PATIENCE), "the test never let the model load"
        return embedder

    async def run() -> None:
        async with _serve(db_path, load) as client:
            asking = asyncio.ensure_future(
                _asker(client, "where is the JWT signature checked?", app)()
            )
            await asyncio.sleep(0.2)
            loaded.set()
            first = await asking
            assert first["semantic_index"] is True and "pending_vectors" not in first
            assert first["matches"][0]["id"] == ids["auth"]
            assert first["matches"][0]["matched_by"] in {"embedding", "both"}

    try:
        asyncio.run(run())
    finally:
        loaded.set()


def test_a_memo_another_process_wrote_is_found_by_meaning_at_once(
    embedder: Embedder, app: Path, db_path: Path
) -> None:
    """As the Stop hook's capture, or the CLI without a model: the server's index, read
    before, takes the memo in and its recall embeds it."""
    record_all_with_vectors(db_path, app, embedder)
    question = "Where are background jobs scheduled?"

    async def run() -> None:
        async with _serve(db_path, lambda env: embedder) as client:
            ask = _asker(client, "which module schedules background jobs?", app)
            await ask()  # the project's vectors are in memory now
            written = cli_subprocess(
                [
                    "--db",
                    str(db_path),
                    "record",
                    "--project",
                    "svc",
                    "--root",
                    str(app),
                    "--question",
                    question,
                    "--conclusion",
                    "app/db.py runs the scheduler loop for background jobs.",
                    "app/db.py",
                ],
                env={"EXPLOMEMO_EMBEDDINGS": "off"},
            )
            assert written.returncode == 0, written.stderr
            assert _vectors_stored(db_path) == len(MEMOS)
            at_once = await ask()
            assert "pending_vectors" not in at_once
            assert at_once["matches"][0]["question"] == question
            assert at_once["matches"][0]["matched_by"] in {"embedding", "both"}

    asyncio.run(run())
    assert _vectors_stored(db_path) == len(MEMOS) + 1


@pytest.mark.slow
def test_a_server_closed_while_it_fills_keeps_its_vectors_and_the_next_finishes(
    app: Path, db_path: Path, tmp_path: Path
) -> None:
    """Through real ``explomemo serve`` processes over stdio, on a freshly imported export."""
    from mcp import Client, StdioServerParameters

    source = tmp_path / "source.db"
    count = 100
    with open_cache(source) as cache:
        for n in range(count):
            cache.record(
                question=f"How does part {n} of the billing service work?",
                conclusion=f"app/db.py holds part {n}: it reconciles invoices number {n}.",
                files=["app/db.py"],
                project="svc",
                root=str(app),
            )
    export = tmp_path / "memos.jsonl"
    for args in (
        ["--db", str(source), "export", "-o", str(export)],
        ["--db", str(db_path), "import", "--json", str(export), "--root", str(app)],
    ):
        done = cli_subprocess(args, cwd=app)
        assert done.returncode == 0, done.stderr
    assert _vectors_stored(db_path) == 0
    params = StdioServerParameters(
        command=PYTHON,
        args=["-m", "explomemo", "--db", str(db_path), "serve"],
        cwd=app,
        env={k: v for k, v in os.environ.items() if not k.startswith("EXPLOMEMO_")},
    )

    async def first_server() -> dict[str, Any]:
        async with Client(params) as client:
            answer = await _asker(client, "what does part 17 reconcile?", app)()
            for _ in range(PATIENCE * 10):
                if _vectors_stored(db_path):
                    break
                await asyncio.sleep(0.1)
            return answer

    answer = asyncio.run(first_server())
    assert answer["pending_vectors"] > 0
    assert answer["matches"]
    kept = _vectors_stored(db_path)
    # Closed while filling: what was stored stays, the rest is left for the next start.
    assert 0 < kept < count

    async def second_server() -> dict[str, Any]:
        async with Client(params) as client:
            ask = _asker(client, "what does part 17 reconcile?", app)

            return await _until(ask, lambda answer: "pending_vectors" not in answer)

    finished = asyncio.run(second_server())
    assert finished["matches"][0]["matched_by"] in {"embedding", "both"}
    assert _vectors_stored(db_path) == count


def test_a_server_reads_its_projects_vectors_ahead(
    app: Path, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started in the project's folder, a server reads the project's vectors once the model
    is loaded: its first recall finds them in memory, without a read of its own."""
    from fake_embedder import FakeEmbedder

    from explomemo.recall import vectors as vectors_module

    # A model id of its own: queries are remembered by model id, and other tests' fake
    # models have other dimensions.
    fake = FakeEmbedder(
        lambda text: [1.0, 0.0] if "pool" in text else [0.0, 1.0], model_id="fake-ahead"
    )
    record_all_with_vectors(db_path, app, fake)
    as_default_project(app, monkeypatch)
    read = threading.Event()
    step = vectors_module.Vectors._build_step

    def reading(self: Any, job: Any) -> None:
        step(self, job)
        read.set()

    monkeypatch.setattr(vectors_module.Vectors, "_build_step", reading)

    async def run() -> None:
        async with _serve(db_path, lambda env: fake) as client:
            assert await asyncio.to_thread(read.wait, 30), "nothing was read ahead"
            monkeypatch.setattr(vectors_module.Vectors, "_built_within", None)
            first = await _asker(client, "how big is the connection pool?", app)()
            assert first["semantic_index"] is True and "pending_vectors" not in first
            assert first["matches"][0]["matched_by"] in {"embedding", "both"}

    asyncio.run(run())
