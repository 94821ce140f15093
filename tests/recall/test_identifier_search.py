"""Code identifiers as terms of their own: matched exactly, by their parts, first when rare.

The names are made up, so no model could know them: what finds them is the
word search. The embedder is a fake whose cosines the tests choose, so a
memo can be made far from a query by meaning and near by words.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fake_embedder import FakeEmbedder
from helpers import open_cache, save_bare_memo, word_scores

from explomemo.changes.snapshots import SnapshotWriter
from explomemo.identifiers import memo_identifiers
from explomemo.memos.cache import MemoCache
from explomemo.recall import search
from explomemo.recall.sources import FixedModel
from explomemo.store import database as store_module
from explomemo.store.database import Store, load_migrations

#: question -> (conclusion, files, cosine of every query to the memo's vectors)
Memos = dict[str, tuple[str, list[str], float]]


WARNINGS: Memos = {
    "How are deprecations reported?": (
        "Deprecated options are collected in cfg/options.py; at start-up each one is logged"
        " once through the module logger.",
        ["cfg/options.py"],
        0.45,
    ),
    "What does the plugin loader warn about?": (
        "plug/loader.py emits FooDependencyWarning when a plugin pins an older host API;"
        " the warning names the plugin.",
        ["plug/loader.py"],
        0.05,
    ),
    "How is the retry policy decided?": (
        "net/http.py retries idempotent calls three times with exponential backoff.",
        ["net/http.py"],
        0.60,
    ),
}


def _angled(cosine: float, axis: int) -> list[float]:
    """A unit vector at ``cosine`` from the query's axis (0), leaning along ``axis``."""
    vector = [0.0] * 8
    vector[0] = cosine
    vector[axis] = math.sqrt(1 - cosine**2)
    return vector


def _embedder(memos: Memos) -> FakeEmbedder:
    """Every query on axis 0; each memo's texts at the memo's chosen cosine from it."""

    def vector_of(text: str) -> list[float]:
        for axis, (question, (_, _, cosine)) in enumerate(memos.items(), start=1):
            if text.startswith(question):
                return _angled(cosine, axis)
        return _angled(1.0, 1)

    return FakeEmbedder(vector_of)


@pytest.fixture
def code(tmp_path: Path) -> Path:
    root = tmp_path / "code"
    for rel in ("cfg/options.py", "plug/loader.py", "net/http.py", "net/headers.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "_blorpparse.py").write_text("# parse\n")
    return root


Recall = Callable[[str], list[str]]


@pytest.fixture(params=["model", "words alone"])
def mode(request: pytest.FixtureRequest) -> str:
    mode: str = request.param
    return mode


def _open(db_path: Path, memos: Memos, mode: str, root: Path) -> tuple[MemoCache, Recall]:
    model = FixedModel(_embedder(memos) if mode == "model" else None)
    cache = MemoCache.open(db_path, model)
    questions = {}
    for question, (conclusion, files, _) in memos.items():
        memo_id = cache.record(
            question=question, conclusion=conclusion, files=files, project="p", root=str(root)
        ).id
        questions[memo_id] = question

    def recall(query: str) -> list[str]:
        found = cache.recall(query=query, project="p", root=str(root))
        return [questions[m.id] for m in found.matches]

    return cache, recall


@pytest.fixture
def recall_warnings(db_path: Path, code: Path, mode: str) -> Iterator[Recall]:
    cache, recall = _open(db_path, WARNINGS, mode, code)
    yield recall
    cache.close()


HEADERS: Memos = {
    "How are request headers merged?": (
        "net/headers.py merges default headers with per-request headers; headers given per"
        " request win, and header names compare case-insensitively. Headers are kept in order.",
        ["net/headers.py"],
        0.70,
    ),
    "Where does the client read the proxy setting?": (
        "get_x_from_headers() in net/http.py reads X-Proxy from the response and stores it.",
        ["net/http.py"],
        0.20,
    ),
    "How does the foo cache expire?": (
        "The foo cache in cfg/options.py keeps foo entries for ten minutes; foo lookups refresh"
        " them. Foo misses go to the backend.",
        ["cfg/options.py"],
        0.70,
    ),
    "What goes wrong when the backend is down?": (
        "plug/loader.py raises FooError after the second failed call; callers catch it and"
        " fall back to the cached value. The __exit__ of the session closes it;"
        " net.http.Transport.close_all() drops the pool. Parsing is in pkg/_blorpparse.py.",
        ["plug/loader.py", "pkg/_blorpparse.py"],
        0.10,
    ),
}


@pytest.fixture
def recall_headers(db_path: Path, code: Path, mode: str) -> Iterator[Recall]:
    cache, recall = _open(db_path, HEADERS, mode, code)
    yield recall
    cache.close()


#: Names the plugin loader's memo alone holds, and words that favour another memo.
PINNING_QUERY = "FooDependencyWarning, retry policy, exponential backoff, idempotent"


def _pending(db_path: Path) -> list[int]:
    with sqlite3.connect(db_path) as check:
        rows = check.execute("SELECT memo_id FROM memos_without_identifiers ORDER BY memo_id")
        return [int(row[0]) for row in rows]


def _indexed(db_path: Path, memo_id: int) -> set[str]:
    with sqlite3.connect(db_path) as check:
        rows = check.execute(
            "SELECT identifier FROM memo_identifiers WHERE memo_id = ?", (memo_id,)
        )
        return {str(row[0]) for row in rows}


@pytest.fixture
def writer_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """The snapshot writer is handed nothing: each record's identifiers stay pending, as
    in the moment after its transaction commits, or after its process was stopped."""
    monkeypatch.setattr(SnapshotWriter, "submit", lambda *args, **kwargs: None)


@pytest.fixture
def unindexed(db_path: Path, code: Path, writer_held: None) -> Iterator[MemoCache]:
    """The WARNINGS memos, recorded by words alone, none of their identifiers stored yet;
    the recording cache is still open."""
    cache, _ = _open(db_path, WARNINGS, "words alone", code)
    assert _pending(db_path) == [1, 2, 3]
    assert not any(_indexed(db_path, memo_id) for memo_id in (1, 2, 3))
    yield cache
    cache.close()


def test_an_identifier_only_one_memo_holds_finds_it(recall_warnings: Recall, mode: str) -> None:
    # Cosine 0.05, and "emits" is a word no memo holds (the unknown-word
    # penalty applies): before identifiers were terms, this came back empty.
    assert recall_warnings("what emits FooDependencyWarning?")[0] == (
        "What does the plugin loader warn about?"
    )


def test_a_unique_identifier_comes_first_whatever_else_the_query_says(
    recall_warnings: Recall,
) -> None:
    found = recall_warnings("FooDependencyWarning, retry policy, exponential backoff, idempotent")
    assert found[:2] == [
        "What does the plugin loader warn about?",
        "How is the retry policy decided?",
    ]


def test_parts_of_names_match_words(db_path: Path, code: Path) -> None:
    # "dependency warning" sits inside the humped name only.
    cache, recall = _open(db_path, WARNINGS, "words alone", code)
    found = recall("which dependency warning do plugins raise?")
    cache.close()
    assert found[0] == "What does the plugin loader warn about?"


@pytest.mark.parametrize(
    ("query", "question"),
    [
        # The memo sharing only "headers" (many times, and nearer by meaning)
        # ranks below the one naming the function.
        ("what calls get_x_from_headers?", "Where does the client read the proxy setting?"),
        # A memo about "foo" ranks below the one naming FooError.
        ("when is FooError raised?", "What goes wrong when the backend is down?"),
        ("who calls Transport.close_all?", "What goes wrong when the backend is down?"),
        ("what does __exit__ do there?", "What goes wrong when the backend is down?"),
        ("what is in _blorpparse.py?", "What goes wrong when the backend is down?"),
        ("what is in pkg/_blorpparse.py?", "What goes wrong when the backend is down?"),
    ],
)
def test_the_memo_naming_it_ranks_first(recall_headers: Recall, query: str, question: str) -> None:
    assert recall_headers(query)[0] == question


def test_the_plain_word_still_finds_memos_by_meaning_and_words(recall_headers: Recall) -> None:
    assert recall_headers("how are headers merged")[0] == "How are request headers merged?"


def test_an_identifier_two_memos_hold_lifts_both_over_common_words(
    db_path: Path, code: Path, mode: str
) -> None:
    # Every memo at the same cosine from the query: words and identifiers decide.
    memos: Memos = {
        question: (conclusion, files, 0.3) for question, (conclusion, files, _) in HEADERS.items()
    }
    memos["Where is the proxy header parsed?"] = (
        "parse_proxy() calls get_x_from_headers and splits host and port.",
        ["net/http.py"],
        0.3,
    )
    cache, recall = _open(db_path, memos, mode, code)
    found = recall("headers: which code calls get_x_from_headers?")
    cache.close()
    assert set(found[:2]) == {
        "Where does the client read the proxy setting?",
        "Where is the proxy header parsed?",
    }


def test_a_snake_case_part_meets_a_plain_word(db_path: Path, code: Path) -> None:
    cache = open_cache(db_path)
    memo = cache.record(
        question="How is the pool sized?",
        conclusion="net/http.py reads max_retries and pool_size from the settings.",
        files=["net/http.py"],
        project="p",
        root=str(code),
    ).id
    found = cache.recall(query="retries", project="p", root=str(code))
    cache.close()
    assert [m.id for m in found.matches] == [memo]


def test_a_pinned_memo_comes_first_even_stale_and_below_the_cutoff(
    db_path: Path, code: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "IDENTIFIER_WEIGHT", 0.0)  # only the pin holds it
    cache, recall = _open(db_path, WARNINGS, "model", code)
    (code / "plug" / "loader.py").write_text("# changed\n")
    found = recall("FooDependencyWarning, retry policy, exponential backoff, idempotent")
    cache.close()
    assert found[:2] == [
        "What does the plugin loader warn about?",
        "How is the retry policy decided?",
    ]


def test_memos_of_an_older_database_get_their_identifiers(
    db_path: Path, code: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memo written under schema 2 is found by identifier once the database is opened."""
    with monkeypatch.context() as patch:
        patch.setattr(store_module, "load_migrations", lambda: load_migrations()[:2])
        Store.open(db_path).close()
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone() == (2,)
    conn.executescript(
        f"""
        INSERT INTO memos (id, project, question, question_key, conclusion, root, recorded_at)
        VALUES (7, 'p', 'What warns?', 'what warns?', 'plug/loader.py emits
        FooDependencyWarning.', '{code}', '2026-01-01T00:00:00Z');
        INSERT INTO memo_files VALUES (7, 'plug/loader.py', 'a', 'b', 15);
        INSERT INTO memos_fts (rowid, question, conclusion, paths, project)
        SELECT id, question, conclusion, 'plug/loader.py', project FROM memos;
        """
    )
    conn.close()
    with open_cache(db_path) as cache:
        found = cache.recall(query="FooDependencyWarning", project="p", root=str(code))
        assert [m.id for m in found.matches] == [7]
        assert [m.id for m in cache.recall(query="dependency", project="p").matches] == [7]
    with sqlite3.connect(db_path) as check:
        assert check.execute("SELECT count(*) FROM memos_without_identifiers").fetchone() == (0,)


# Identifiers stored after the record ------------------------------------------


def test_the_writer_stores_a_records_identifiers_after_it(db_path: Path, code: Path) -> None:
    cache, _ = _open(db_path, WARNINGS, "words alone", code)
    assert cache.wait_for_snapshots(timeout=30)
    assert _pending(db_path) == []
    conclusion, files, _ = WARNINGS["What does the plugin loader warn about?"]
    held = memo_identifiers("What does the plugin loader warn about?", conclusion, files)
    assert _indexed(db_path, 2) == held
    cache.close()


def test_the_writer_indexes_its_records_memo_whatever_else_is_pending(
    db_path: Path, code: Path
) -> None:
    """The writer indexes the memo of the record it was given, not the first memos
    pending: behind more than a batch of older ones (a database migrated from schema 2
    and not searched since), the record's memo would stay pending (mutants
    ``_store_job`` 34 and 36 index the first batch instead)."""
    db_path.parent.mkdir(parents=True)
    store = Store.open(db_path)
    with store.write() as conn:
        older = [
            save_bare_memo(store, conn, f"What does step {n} do?", index_identifiers=False)
            for n in range(store_module._BATCH + 1)
        ]
    store.close()
    with open_cache(db_path) as cache:
        conclusion, files, _ = WARNINGS["What does the plugin loader warn about?"]
        memo = cache.record(
            question="What does the plugin loader warn about?",
            conclusion=conclusion,
            files=files,
            project="p",
            root=str(code),
        )
        assert cache.wait_for_snapshots(timeout=30)
        assert _pending(db_path) == older
    assert "foodependencywarning" in _indexed(db_path, memo.id)


def test_closing_stores_the_identifiers_of_the_last_records(db_path: Path, code: Path) -> None:
    cache, _ = _open(db_path, WARNINGS, "words alone", code)
    cache.close()
    assert _pending(db_path) == []
    assert "foodependencywarning" in _indexed(db_path, 2)


def test_recall_finds_a_memo_by_identifier_before_they_are_stored(
    db_path: Path, code: Path, writer_held: None
) -> None:
    """A server's first recall stores what is pending; the memos it records after that
    are found by identifier before the writer stores theirs."""
    cache = open_cache(db_path)
    assert cache.recall(query="anything at all?", project="p", root=str(code)).matches == []
    for question, (conclusion, files, _) in WARNINGS.items():
        cache.record(
            question=question, conclusion=conclusion, files=files, project="p", root=str(code)
        )
    found = cache.recall(query=PINNING_QUERY, project="p", root=str(code))
    assert found.matches[0].id == 2
    assert _pending(db_path) == [1, 2, 3]
    cache.close()


def test_recall_does_not_wait_for_a_busy_database_to_store_pending_identifiers(
    unindexed: MemoCache, db_path: Path, code: Path
) -> None:
    """Another writer holds the database (the busy timeout is 30 s): the recall answers
    from the memos' texts, and a later one stores what is pending."""
    holder = sqlite3.connect(db_path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    found: list[int] = []

    def recall() -> None:
        matches = unindexed.recall(query=PINNING_QUERY, project="p", root=str(code)).matches
        found.extend(m.id for m in matches)

    worker = threading.Thread(target=recall)
    try:
        worker.start()
        worker.join(20)
        assert not worker.is_alive(), "the recall waited for the other writer"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        worker.join(60)
    assert found[0] == 2
    assert _pending(db_path) == [1, 2, 3]
    assert unindexed.recall(query=PINNING_QUERY, project="p", root=str(code)).matches[0].id == 2
    assert _pending(db_path) == []


def test_the_prompt_hook_in_another_process_finds_it_by_identifier_at_once(
    unindexed: MemoCache, db_path: Path, code: Path
) -> None:
    """The hook never writes: it reads the identifiers of the memos still pending from
    their texts. Without the identifier the plugin loader's memo would stay out: its
    question shares no word with the prompt."""
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(db_path), "hook", "prompt"],
        input=json.dumps({"cwd": str(code), "prompt": "what emits FooDependencyWarning?"}),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "EXPLOMEMO_PROJECT": "p"},
    )
    assert done.stderr == ""
    text = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "]\n| What does the plugin loader warn about?" in text
    assert _pending(db_path) == [1, 2, 3]


def test_recall_in_another_process_finds_it_and_stores_what_is_pending(
    unindexed: MemoCache, db_path: Path, code: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(db_path), "recall", PINNING_QUERY,
         "--project", "p", "--root", str(code), "--json"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "EXPLOMEMO_EMBEDDINGS": "off"},
    )  # fmt: skip
    assert json.loads(done.stdout)["matches"][0]["id"] == 2
    assert _pending(db_path) == []
    assert "foodependencywarning" in _indexed(db_path, 2)


def test_a_replace_drops_the_old_identifiers_at_once_and_finds_the_new_ones(
    db_path: Path, code: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, _ = _open(db_path, WARNINGS, "words alone", code)
    assert cache.wait_for_snapshots(timeout=30)
    monkeypatch.setattr(SnapshotWriter, "submit", lambda *args, **kwargs: None)
    replaced = cache.record(
        question="What does the plugin loader warn about?",
        conclusion="plug/loader.py emits BarLoaderWarning when a plugin is unsigned.",
        files=["plug/loader.py"],
        project="p",
        root=str(code),
    )
    assert replaced.replaced and replaced.id == 2
    assert _pending(db_path) == [2] and _indexed(db_path, 2) == set()
    with cache.store.read() as conn:
        holders = cache.store.identifier_holders(
            conn, "p", ["foodependencywarning", "barloaderwarning"], 2
        )
    assert holders == {"foodependencywarning": [], "barloaderwarning": [2]}
    cache.forget(memo_id=2, project="p")
    assert _pending(db_path) == []
    cache.close()


def test_each_named_identifier_scores_its_holders_by_its_rarity(tmp_path: Path) -> None:
    """An identifier no memo holds changes nothing for the others named with it; one memo
    holding it scores 1 and is pinned, each of two 1/2, each of CANDIDATES 1/CANDIDATES;
    one held by more memos picks none."""
    store = Store.open(tmp_path / "memos.db")
    words = search.WordSearch()
    with store.write() as conn:
        unique = save_bare_memo(store, conn, "Where is parse_bar called?")
        pair = {save_bare_memo(store, conn, f"Who calls load_baz? {n}") for n in range(2)}
        many = {
            save_bare_memo(store, conn, f"Where is shared_name read? {n}")
            for n in range(search.CANDIDATES)
        }
    query = "what do aaa_missing, load_baz, parse_bar and shared_name do?"

    def scored() -> tuple[dict[int, float], frozenset[int]]:
        with store.read() as conn:
            found = words.scores(store, conn, "p", query)
        return found.identifiers, found.pinned

    rarities = {unique: 1.0} | dict.fromkeys(pair, 0.5)
    assert scored() == (rarities | dict.fromkeys(many, 1 / search.CANDIDATES), {unique})
    with store.write() as conn:
        save_bare_memo(store, conn, "Where is shared_name read? once more")
    assert scored() == (rarities, {unique})
    store.close()


def test_a_memo_scores_by_the_rarest_identifier_it_holds_whatever_their_order(
    tmp_path: Path,
) -> None:
    """Each of two memos holds one identifier alone and one with two other memos; the
    rare one sorts first for one memo, last for the other."""
    store = Store.open(tmp_path / "memos.db")
    with store.write() as conn:
        first = save_bare_memo(store, conn, "Where are aaa_solo and zzz_group read?")
        last = save_bare_memo(store, conn, "Where are aaa_group and zzz_solo read?")
        others = [
            save_bare_memo(store, conn, f"Where is {name} read? {n}")
            for name in ("aaa_group", "zzz_group")
            for n in range(2)
        ]
    query = "what do aaa_solo, aaa_group, zzz_solo and zzz_group do?"
    with store.read() as conn:
        found = search.WordSearch().scores(store, conn, "p", query)
    assert found.identifiers == {first: 1.0, last: 1.0} | dict.fromkeys(others, 1 / 3)
    assert found.pinned == {first, last}
    store.close()


def test_a_first_search_indexes_every_pending_memo_however_many_batches(
    tmp_path: Path,
) -> None:
    """More memos pending than one batch and than a search reads from their texts: the
    first search indexes them all, so the one after the first batch is found by its
    identifier too."""
    db_path = tmp_path / "memos.db"
    store = Store.open(db_path)
    count = store_module._BATCH + store_module.PENDING_IDENTIFIERS_READ + 1
    with store.write() as conn:
        ids = [
            save_bare_memo(store, conn, f"Who calls load_baz_{n}?", index_identifiers=False)
            for n in range(count)
        ]
    assert _pending(db_path) == ids
    words = search.WordSearch()
    words.index_identifiers(store)
    assert _pending(db_path) == []
    after_first_batch = store_module._BATCH
    with store.read() as conn:
        found = words.scores(store, conn, "p", f"who calls load_baz_{after_first_batch}?")
    assert found.pinned == {ids[after_first_batch]}
    store.close()


def test_once_no_identifiers_are_pending_a_search_never_indexes_them_again(
    tmp_path: Path,
) -> None:
    """A memo left pending after the first search (its writer stopped first) is found by
    its text: the search neither looks for pending memos nor indexes them again."""
    db_path = tmp_path / "memos.db"
    store = Store.open(db_path)
    words = search.WordSearch()
    with store.write() as conn:
        save_bare_memo(store, conn, "Where is parse_bar called?")
    words.index_identifiers(store)
    with store.write() as conn:
        late = save_bare_memo(store, conn, "Who calls load_baz?", index_identifiers=False)
    words.index_identifiers(store)
    assert _pending(db_path) == [late]
    with store.read() as conn:
        assert words.scores(store, conn, "p", "who calls load_baz?").pinned == {late}
    # A process that has not searched yet indexes it.
    search.WordSearch().index_identifiers(store)
    assert _pending(db_path) == []
    assert "load_baz" in _indexed(db_path, late)
    store.close()


def test_a_query_of_an_identifier_and_stop_words_alone_pins_the_memo_holding_it(
    tmp_path: Path,
) -> None:
    """ "What does do_it do?" has no content word ("do" and "it" are stop words): the
    memo that alone holds do_it is still found by it, pinned."""
    query = "What does do_it do?"
    memos = ["Where is do_it called?", "Where is omega set up?"]
    (unique, _), found = word_scores(tmp_path / "memos.db", memos, query)
    assert search.query_words(query) == []
    assert search.fuse(None, found) == [
        search.Candidate(unique, search.IDENTIFIER_WEIGHT, "words", pinned=True)
    ]
