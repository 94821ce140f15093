"""The SQLite store: opening, migrations, and every read and write of memos.

One database holds every project's memos. It runs in WAL mode with a busy
timeout, so several agents' servers and CLIs can use it at once; every record
is one transaction, so a failed or killed writer leaves nothing half written.
The connection may be used from any thread (the MCP server runs sync tools in
worker threads); a lock serialises its use.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from explomemo.errors import StoreError
from explomemo.identifiers import memo_identifiers, name_parts

BUSY_TIMEOUT_MS = 30_000
#: PRAGMA application_id of explomemo databases ("EXPM").
APPLICATION_ID = 0x4558504D
#: Memo ids are SQLite integers.
MAX_ID = 2**63 - 1
_BATCH = 500


@dataclass(frozen=True)
class FileRow:
    """One file of a memo as recorded."""

    path: str
    sha256: str
    xxh3: str
    size: int


@dataclass(frozen=True)
class MemoRow:
    """One memo as stored, without its files."""

    id: int
    project: str
    question: str
    conclusion: str
    root: str
    recorded_at: str


@dataclass(frozen=True)
class StatRow:
    """One entry of the stat cache: a file's identity and content digest when seen."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    xxh3: str
    cached_at_ns: int


@dataclass(frozen=True)
class Migration:
    """A numbered SQL file of ``migrations/``."""

    number: int
    name: str
    sql: str


def default_db_path() -> Path:
    """``explomemo.db`` in the platform's user data directory (or ``$EXPLOMEMO_DB``)."""
    env = os.environ.get("EXPLOMEMO_DB")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir("explomemo", appauthor=False)) / "explomemo.db"


def load_migrations() -> list[Migration]:
    """The migrations shipped with the package, in order.

    In a wheel they live in ``explomemo/migrations``; in a source checkout
    (editable install) in the top-level ``migrations/`` folder.
    """
    packaged = resources.files("explomemo").joinpath("migrations")
    folder: Path
    if packaged.is_dir():
        folder = Path(str(packaged))
    else:
        folder = Path(__file__).resolve().parent.parent / "migrations"
    found: list[Migration] = []
    for sql_file in sorted(folder.glob("*.sql")):
        number = int(sql_file.name.split("_", 1)[0])
        found.append(Migration(number, sql_file.stem, sql_file.read_text(encoding="utf-8")))
    if not found:
        raise StoreError(
            f"no schema migrations found in {folder}: the explomemo install is incomplete;"
            " reinstall it with pip install --force-reinstall explomemo"
        )
    return found


def _statements(sql: str) -> Iterator[str]:
    # executescript() would commit the surrounding transaction, so a migration
    # is run statement by statement inside it.
    pending = ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""
    if pending.strip() and not pending.strip().startswith("--"):
        yield pending


def describe_sqlite_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """Turn a sqlite3 error into a StoreError naming the path and what to do."""
    text = str(exc)
    lowered = text.lower()
    if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
        return StoreError(
            f"database {path} is damaged or is not an explomemo database ({text}):"
            " move it aside and run again to start a new one, or pass another --db"
        )
    if "readonly" in lowered or "read-only" in lowered:
        return StoreError(
            f"database {path} is read-only ({text}): make it and its folder writable,"
            " or pass another --db / EXPLOMEMO_DB"
        )
    if "disk is full" in lowered or "disk i/o" in lowered:
        return StoreError(
            f"cannot write to database {path} ({text}): free disk space on its drive,"
            " or pass another --db / EXPLOMEMO_DB"
        )
    if "unable to open" in lowered:
        return StoreError(
            f"cannot open database {path} ({text}): check that its folder exists and is"
            " writable, or pass another --db / EXPLOMEMO_DB"
        )
    if "locked" in lowered or "busy" in lowered:
        return StoreError(
            f"database {path} stayed locked by another process for"
            f" {BUSY_TIMEOUT_MS // 1000} s ({text}): try again when it is done"
        )
    return StoreError(f"database {path} failed ({text}): check the file, or pass another --db")


class Store:
    """An open explomemo database. Use :meth:`open`; close with :meth:`close`."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        self.conn = conn
        self.lock = threading.RLock()

    @classmethod
    def open(cls, path: Path | None = None) -> Store:
        """Open (creating it and its parent folders if needed) and migrate a database."""
        db_path = Path(path) if path is not None else default_db_path()
        if db_path.exists() and not db_path.is_file():
            kind = "a directory" if db_path.is_dir() else "not a regular file"
            raise StoreError(
                f"database path {db_path} is {kind}: pass the path of a database file"
                " with --db or EXPLOMEMO_DB"
            )
        try:
            db_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder of database {db_path} ({exc.strerror}):"
                " pass a writable --db or EXPLOMEMO_DB"
            ) from exc
        try:
            conn = sqlite3.connect(
                db_path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise describe_sqlite_error(db_path, exc) from exc
        store = cls(db_path, conn)
        try:
            store._check_identity()
            store._configure()
            store._migrate()
        except sqlite3.Error as exc:
            conn.close()
            raise describe_sqlite_error(db_path, exc) from exc
        except BaseException:
            conn.close()
            raise
        return store

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.conn.close()

    def _check_identity(self) -> None:
        # Read-only checks, before any pragma that could write to the file: a
        # database we must refuse is left byte for byte as it was.
        self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # One snapshot: another process may be creating the schema right now.
        self.conn.execute("BEGIN")
        try:
            application = int(self.conn.execute("PRAGMA application_id").fetchone()[0])
            version = self.schema_version()
            has_tables = self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' LIMIT 1"
            ).fetchone()
        finally:
            self.conn.execute("COMMIT")
        foreign = application not in (0, APPLICATION_ID) or (version == 0 and has_tables)
        if foreign:
            raise StoreError(
                f"database {self.path} is another program's SQLite file, not an explomemo"
                " database: pass another --db or EXPLOMEMO_DB; the file was left as it is"
            )
        latest = load_migrations()[-1].number
        if version > latest:
            raise StoreError(
                f"database {self.path} has schema version {version}, newer than this"
                f" explomemo knows ({latest}): upgrade explomemo (pip install -U explomemo);"
                " the database was left as it is"
            )

    def _configure(self) -> None:
        self.conn.execute("PRAGMA foreign_keys = ON")
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while self.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            # Switching to WAL does not wait on the busy timeout: when another
            # process holds the file (creating it too), try again shortly.
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        self.conn.execute("PRAGMA synchronous = NORMAL")

    def _migrate(self) -> None:
        migrations = load_migrations()
        latest = migrations[-1].number
        version = self.schema_version()
        if version == latest:
            return
        # sqlite-utils is imported only when there is something to migrate: it
        # costs a quarter of a second, and the CLI must start fast.
        from sqlite_utils import Database
        from sqlite_utils.migrations import Migrations

        steps = Migrations("explomemo")
        for migration in migrations:
            steps(name=migration.name)(_migration_function(migration))
        with self.write():
            # Re-read under the write lock: another process may have migrated.
            version = self.schema_version()
            if version < latest:
                steps.apply(Database(self.conn))
                self.conn.execute(f"PRAGMA user_version = {latest}")
                self.conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def schema_version(self) -> int:
        """The database's schema version (the number of its newest migration)."""
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE): all of it lands, or none of it."""
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent read (one snapshot) under the connection lock."""
        with self.lock:
            if self.conn.in_transaction:
                yield self.conn
                return
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                if self.conn.in_transaction:
                    self.conn.execute("COMMIT")

    def memo_version(self) -> int:
        """A counter that moves whenever any memo or vector changes, in any process."""
        with self.lock:
            return int(self.conn.execute("SELECT version FROM memo_version").fetchone()[0])

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Translate sqlite3 errors raised inside into StoreError naming the database."""
        try:
            yield
        except sqlite3.Error as exc:
            raise describe_sqlite_error(self.path, exc) from exc

    # Memos -------------------------------------------------------------

    def find_by_question(self, conn: sqlite3.Connection, project: str, key: str) -> int | None:
        """The id of the project's memo with this normalised question, if any."""
        row = conn.execute(
            "SELECT id FROM memos WHERE project = ? AND question_key = ?", (project, key)
        ).fetchone()
        return None if row is None else int(row[0])

    def save_memo(
        self,
        conn: sqlite3.Connection,
        *,
        memo_id: int | None,
        project: str,
        question: str,
        question_key: str,
        conclusion: str,
        root: str,
        recorded_at: str,
        files: Sequence[FileRow],
        wanted_id: int | None = None,
    ) -> int:
        """Insert a memo, or replace memo ``memo_id`` keeping its id; returns the id.

        A new memo takes ``wanted_id`` when given and still free (imports keep ids).
        """
        if memo_id is None:
            if (
                wanted_id is not None
                and conn.execute("SELECT 1 FROM memos WHERE id = ?", (wanted_id,)).fetchone()
            ):
                wanted_id = None
            cursor = conn.execute(
                "INSERT INTO memos (id, project, question, question_key, conclusion, root,"
                " recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (wanted_id, project, question, question_key, conclusion, root, recorded_at),
            )
            assert cursor.lastrowid is not None
            memo_id = int(cursor.lastrowid)
        else:
            conn.execute(
                "UPDATE memos SET question = ?, conclusion = ?, root = ?, recorded_at = ?,"
                " embedding = NULL, embedding_model = NULL, embedding_text_hash = NULL,"
                " question_embedding = NULL WHERE id = ?",
                (question, conclusion, root, recorded_at, memo_id),
            )
            conn.execute("DELETE FROM memo_files WHERE memo_id = ?", (memo_id,))
            conn.execute("DELETE FROM memos_fts WHERE rowid = ?", (memo_id,))
            conn.execute("DELETE FROM memo_identifiers WHERE memo_id = ?", (memo_id,))
            conn.execute("DELETE FROM memos_without_identifiers WHERE memo_id = ?", (memo_id,))
        conn.executemany(
            "INSERT INTO memo_files (memo_id, path, sha256, xxh3, size) VALUES (?, ?, ?, ?, ?)",
            [(memo_id, f.path, f.sha256, f.xxh3, f.size) for f in files],
        )
        paths = [f.path for f in files]
        conn.execute(
            "INSERT INTO memos_fts (rowid, question, conclusion, paths, name_parts, project)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                memo_id,
                question,
                conclusion,
                " ".join(paths),
                " ".join(name_parts(f"{question}\n{conclusion}")),
                project,
            ),
        )
        self._save_identifiers(conn, memo_id, project, question, conclusion, paths)
        return memo_id

    def _save_identifiers(
        self,
        conn: sqlite3.Connection,
        memo_id: int,
        project: str,
        question: str,
        conclusion: str,
        paths: Sequence[str],
    ) -> None:
        conn.executemany(
            "INSERT OR IGNORE INTO memo_identifiers (project, identifier, memo_id)"
            " VALUES (?, ?, ?)",
            [(project, name, memo_id) for name in memo_identifiers(question, conclusion, paths)],
        )

    def index_identifiers(self, conn: sqlite3.Connection, batch: int = _BATCH) -> int:
        """Index the identifiers of up to ``batch`` memos written before they were indexed.

        Returns how many it indexed (0: none is left).
        """
        ids = [
            int(row[0])
            for row in conn.execute(
                "SELECT memo_id FROM memos_without_identifiers ORDER BY memo_id LIMIT ?", (batch,)
            )
        ]
        if not ids:
            return 0
        files = self.files_of(conn, ids)
        for memo in self.memos(conn, ids=ids):
            paths = [f.path for f in files[memo.id]]
            conn.execute(
                "UPDATE memos_fts SET name_parts = ? WHERE rowid = ?",
                (" ".join(name_parts(f"{memo.question}\n{memo.conclusion}")), memo.id),
            )
            self._save_identifiers(
                conn, memo.id, memo.project, memo.question, memo.conclusion, paths
            )
        marks = ",".join("?" * len(ids))
        conn.execute(f"DELETE FROM memos_without_identifiers WHERE memo_id IN ({marks})", ids)
        return len(ids)

    def identifiers_pending(self, conn: sqlite3.Connection) -> bool:
        """True while some memo's identifiers are not indexed (see :meth:`index_identifiers`)."""
        found = conn.execute("SELECT 1 FROM memos_without_identifiers LIMIT 1").fetchone()
        return found is not None

    def identifier_holders(
        self, conn: sqlite3.Connection, project: str, names: Iterable[str], most: int
    ) -> dict[str, list[int]]:
        """The memos of ``project`` holding each identifier: up to ``most`` + 1 ids each."""
        return {
            name: [
                int(row[0])
                for row in conn.execute(
                    "SELECT memo_id FROM memo_identifiers WHERE project = ? AND identifier = ?"
                    " ORDER BY memo_id LIMIT ?",
                    (project, name, most + 1),
                )
            ]
            for name in names
        }

    def set_embedding(
        self,
        conn: sqlite3.Connection,
        memo_id: int,
        vector: bytes,
        question_vector: bytes,
        model: str,
        text_hash: str,
    ) -> None:
        """Store a memo's two vectors (whole memo, question) with the model that made them."""
        conn.execute(
            "UPDATE memos SET embedding = ?, question_embedding = ?, embedding_model = ?,"
            " embedding_text_hash = ? WHERE id = ?",
            (vector, question_vector, model, text_hash, memo_id),
        )

    def delete_memo(self, conn: sqlite3.Connection, project: str | None, memo_id: int) -> bool:
        """Delete a memo (of ``project``, when given); False when there is none."""
        if project is None:
            cursor = conn.execute("DELETE FROM memos WHERE id = ?", (memo_id,))
        else:
            cursor = conn.execute(
                "DELETE FROM memos WHERE id = ? AND project = ?", (memo_id, project)
            )
        if cursor.rowcount == 0:
            return False
        conn.execute("DELETE FROM memos_fts WHERE rowid = ?", (memo_id,))
        return True

    def memos(
        self,
        conn: sqlite3.Connection,
        *,
        project: str | None = None,
        ids: Iterable[int] | None = None,
    ) -> list[MemoRow]:
        """Memos of one project (or all, or the given ids), sorted by project then id."""
        columns = "id, project, question, conclusion, root, recorded_at"
        if ids is not None:
            rows: list[tuple[int, str, str, str, str, str]] = []
            for chunk in _chunks(list(ids)):
                marks = ",".join("?" * len(chunk))
                rows += conn.execute(
                    f"SELECT {columns} FROM memos WHERE id IN ({marks})", chunk
                ).fetchall()
            rows.sort(key=lambda r: (r[1], r[0]))
        elif project is None:
            rows = conn.execute(f"SELECT {columns} FROM memos ORDER BY project, id").fetchall()
        else:
            rows = conn.execute(
                f"SELECT {columns} FROM memos WHERE project = ? ORDER BY id", (project,)
            ).fetchall()
        return [MemoRow(*row) for row in rows]

    def files_of(
        self, conn: sqlite3.Connection, memo_ids: Sequence[int]
    ) -> dict[int, list[FileRow]]:
        """The recorded files of each memo, sorted by path."""
        found: dict[int, list[FileRow]] = {memo_id: [] for memo_id in memo_ids}
        for chunk in _chunks(list(memo_ids)):
            marks = ",".join("?" * len(chunk))
            for memo_id, path, sha256, xxh3, size in conn.execute(
                f"SELECT memo_id, path, sha256, xxh3, size FROM memo_files"
                f" WHERE memo_id IN ({marks}) ORDER BY memo_id, path",
                chunk,
            ):
                found[memo_id].append(FileRow(path, sha256, xxh3, size))
        return found

    def all_files(self, conn: sqlite3.Connection, project: str | None) -> dict[int, list[FileRow]]:
        """The recorded files of every memo of a project (or of all), in one query."""
        found: dict[int, list[FileRow]] = {}
        if project is None:
            cursor = conn.execute(
                "SELECT memo_id, path, sha256, xxh3, size FROM memo_files ORDER BY memo_id, path"
            )
        else:
            cursor = conn.execute(
                "SELECT f.memo_id, f.path, f.sha256, f.xxh3, f.size FROM memo_files f"
                " JOIN memos m ON m.id = f.memo_id WHERE m.project = ?"
                " ORDER BY f.memo_id, f.path",
                (project,),
            )
        for memo_id, path, sha256, xxh3, size in cursor:
            found.setdefault(memo_id, []).append(FileRow(path, sha256, xxh3, size))
        return found

    def memos_needing_embedding(
        self, conn: sqlite3.Connection, model: str, most: int = -1
    ) -> list[int]:
        """Ids of memos without both vectors from ``model`` (the first ``most``; -1: all)."""
        return [
            int(row[0])
            for row in conn.execute(
                "SELECT id FROM memos WHERE embedding IS NULL OR question_embedding IS NULL"
                " OR embedding_model IS NOT ? ORDER BY id LIMIT ?",
                (model, most),
            )
        ]

    # Word search -------------------------------------------------------

    def word_matches(
        self, conn: sqlite3.Connection, project: str, match: str, limit: int
    ) -> list[tuple[int, float]]:
        """(memo id, BM25 rank) of the best FTS5 matches; lower rank is better."""
        return conn.execute(
            "SELECT rowid, bm25(memos_fts, 4.0, 1.0, 2.0, 1.0) AS rank FROM memos_fts"
            " WHERE memos_fts MATCH ? AND project = ? ORDER BY rank LIMIT ?",
            (match, project, limit),
        ).fetchall()

    def indexed_count(self, conn: sqlite3.Connection) -> int:
        """How many memos the word index holds (all projects: the corpus of IDF)."""
        return int(conn.execute("SELECT count(*) FROM memos").fetchone()[0])

    def word_frequency(self, conn: sqlite3.Connection, match: str) -> int:
        """How many memos (of all projects) match ``match``."""
        return int(
            conn.execute(
                "SELECT count(*) FROM memos_fts WHERE memos_fts MATCH ?", (match,)
            ).fetchone()[0]
        )

    def memo_texts(self, conn: sqlite3.Connection, ids: Sequence[int]) -> list[tuple[int, str]]:
        """(id, question, paths, words inside names, conclusion) of each memo, from the FTS."""
        found: list[tuple[int, str]] = []
        for chunk in _chunks(list(ids)):
            marks = ",".join("?" * len(chunk))
            found += [
                (int(rowid), f"{question}\n{paths}\n{parts}\n{conclusion}")
                for rowid, question, paths, conclusion, parts in conn.execute(
                    f"SELECT rowid, question, paths, conclusion, name_parts FROM memos_fts"
                    f" WHERE rowid IN ({marks})",
                    chunk,
                )
            ]
        return found

    # Stat cache and embedding cache -------------------------------------

    def stat_rows_under(
        self, conn: sqlite3.Connection, prefix: str, min_age_ns: int
    ) -> list[tuple[str, int, int, int, int, int, str]]:
        """The trusted stat-cache entries under a root, in one range scan of the primary key.

        ``prefix`` is the root's path and "/"; an entry counts when it was
        taken more than ``min_age_ns`` after its file's last change. Rows are
        raw ``(abs_path, dev, ino, size, mtime_ns, ctime_ns, xxh3)``, so a
        check loads its whole root at once without an object per entry.
        """
        if not prefix:
            return []
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        rows: list[tuple[str, int, int, int, int, int, str]] = conn.execute(
            "SELECT abs_path, dev, ino, size, mtime_ns, ctime_ns, xxh3 FROM file_stats"
            " WHERE abs_path >= ? AND abs_path < ? AND cached_at_ns - max(mtime_ns, ctime_ns) > ?",
            (prefix, end, min_age_ns),
        ).fetchall()
        return rows

    def save_stat_rows(self, conn: sqlite3.Connection, rows: dict[str, StatRow]) -> None:
        """Insert or replace stat-cache entries."""
        conn.executemany(
            "INSERT OR REPLACE INTO file_stats (abs_path, dev, ino, size, mtime_ns, ctime_ns,"
            " xxh3, cached_at_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (p, r.dev, r.ino, r.size, r.mtime_ns, r.ctime_ns, r.xxh3, r.cached_at_ns)
                for p, r in rows.items()
            ],
        )

    def cached_vectors(self, conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, bytes]:
        """Vectors of the embedding cache by key."""
        found: dict[str, bytes] = {}
        for chunk in _chunks(list(keys)):
            marks = ",".join("?" * len(chunk))
            for key, vector in conn.execute(
                f"SELECT key, vector FROM embedding_cache WHERE key IN ({marks})", chunk
            ):
                found[key] = vector
        return found

    def cache_vectors(self, conn: sqlite3.Connection, vectors: dict[str, bytes]) -> None:
        """Add vectors to the embedding cache."""
        conn.executemany(
            "INSERT OR REPLACE INTO embedding_cache (key, vector) VALUES (?, ?)",
            list(vectors.items()),
        )


def _migration_function(migration: Migration):  # type: ignore[no-untyped-def]
    def apply(db) -> None:  # type: ignore[no-untyped-def]
        for statement in _statements(migration.sql):
            db.conn.execute(statement)

    return apply


def _chunks(items: list[int] | list[str]) -> Iterator[list[int] | list[str]]:
    for start in range(0, len(items), _BATCH):
        yield items[start : start + _BATCH]
