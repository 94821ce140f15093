"""The SQLite store: opening, migrations, and every read and write of memos.

One database holds every project's memos. It runs in WAL mode with a busy
timeout, so several agents' servers and CLIs can use it at once; every record
is one transaction, so a failed or killed writer leaves nothing half written.
A store holds two connections, each usable from any thread (the MCP server
runs sync tools in worker threads) under a lock of its own: writes go through
one, reads through the other, so a read never waits behind a write of this
process that waits for another process's lock. Before each transaction the
store checks that the file at its path is still the one it opened; when it
was replaced or deleted, nothing more is read or written and the store's
write-ahead log is emptied into the file it opened, so it can never be taken
for part of the file now at that path.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple, TypeVar

from explomemo.errors import ExplomemoError, InputError, NoDatabaseError, StoreError
from explomemo.identifiers import memo_identifiers, name_parts
from explomemo.inputs import MAX_FILES, SUBAGENT, question_key, replaces
from explomemo.printable import message
from explomemo.store import pending
from explomemo.store.pending import Capture

BUSY_TIMEOUT_MS = 30_000
#: The write connection's page cache, in KiB. An import writes its memos in one
#: transaction; with SQLite's default of 2 MB it spilled pages to the file and read them
#: back (10,000 memos of 8 files: 9.3 s, against 7.0 s with this). Pages are allocated
#: as they are touched, so a small write holds no more memory than before.
WRITE_CACHE_KIB = 32_768
#: How long a cache write (the stat cache) waits for another process's lock.
CACHE_BUSY_TIMEOUT_MS = 250
#: PRAGMA application_id of explomemo databases ("EXPM").
APPLICATION_ID = 0x4558504D
#: The name under which sqlite-utils records the migrations applied.
MIGRATION_SET = "explomemo"
#: Memo ids are SQLite integers.
MAX_ID = 2**63 - 1
#: The smallest SQLite integer.
_INT64_MIN = -(2**63)
_BATCH = 500
#: What a cache write's ``fill`` returns (see :meth:`Store.write_cache`).
T = TypeVar("T")
#: Memos of a project with pending identifiers that a search reads from their texts:
#: those of records whose identifiers are not stored yet are a few; beyond this many
#: (a database migrated from schema 2 and never searched), the newest.
PENDING_IDENTIFIERS_READ = 200


# Rows are named tuples, not dataclasses: importing dataclasses (and inspect
# with it) would cost the Claude Code prompt hook a third of its start-up.


class FileRow(NamedTuple):
    """One file of a memo as recorded."""

    path: str
    sha256: str
    xxh3: str
    size: int
    #: The git blob id of the recorded content; None for rows recorded before
    #: migration 0004, and until the record's snapshot job has run.
    git_blob: str | None = None


class MemoRow(NamedTuple):
    """One memo as stored, without its files."""

    id: int
    project: str
    question: str
    conclusion: str
    root: str
    recorded_at: str
    #: ``agent`` (record), ``transcript`` (captured by the Stop hook) or ``subagent``
    #: (captured by the SubagentStop hook).
    origin: str = "agent"
    #: The identity of the repository it was recorded in (its first root commit); None:
    #: unknown, which matches any (see :class:`explomemo.projects.Caller`).
    repository: str | None = None
    #: True for a memo that came in through ``import``: the claim of whoever committed
    #: the export, not a memo recorded here.
    imported: bool = False
    #: For a ``subagent`` memo: the delegated agent's type (Explore, Plan, ...).
    agent_type: str | None = None
    #: For a ``subagent`` memo: the tokens its run cost, when known.
    cost_tokens: int | None = None


class ServedTotal(NamedTuple):
    """What one surface served of one project's memos, over every session."""

    project: str
    surface: str
    #: Memos served, once per memo and session.
    served: int
    #: Of them, those served fresh (all but a delegation answered from a stale memo).
    fresh: int
    #: The recorded sizes of their files, less those the sessions read anyway.
    bytes_spared: int
    #: The tokens of the delegated runs that did not happen (fresh delegation answers).
    tokens_spared: int


class StatRow(NamedTuple):
    """One entry of the stat cache: a file's identity and content digest when seen."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    xxh3: str
    cached_at_ns: int


class Migration(NamedTuple):
    """A numbered SQL file of ``migrations/``."""

    number: int
    name: str
    sql: str


def now_iso() -> str:
    """The current UTC time as memos, results and exports write it: 2026-11-30T10:00:00Z."""
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def database_path(path: Path | str | None = None) -> Path:
    """The database file: ``path`` (``--db``), else ``$EXPLOMEMO_DB``, else
    ``explomemo.db`` in the platform's user data directory.

    A leading ``~`` or ``~user`` of the path given is expanded: an MCP client
    starts the server from its JSON configuration, where no shell expands it,
    and a folder named ``~`` in the project is never what was meant.
    """
    given = path if path is not None else os.environ.get("EXPLOMEMO_DB") or None
    if given is not None:
        return Path(os.path.expanduser(given))
    import platformdirs

    return Path(platformdirs.user_data_dir("explomemo", appauthor=False)) / "explomemo.db"


def migrations_folder() -> Path:
    """Where the migrations are: ``explomemo/migrations`` in a wheel, the top-level
    ``migrations/`` folder in a source checkout (editable install).

    Looked up beside this file rather than through importlib.resources, which
    costs a short command a tenth of its start-up; explomemo runs from files
    on disk (SQLite and the validity engine need them), never from a zip.
    """
    package = Path(__file__).resolve().parents[1]
    packaged = package / "migrations"
    return packaged if packaged.is_dir() else package.parent / "migrations"


def shipped_migrations() -> list[str]:
    """The names of the migrations shipped, in order (without reading the SQL)."""
    names = sorted(p.stem for p in migrations_folder().glob("*.sql"))
    if not names:
        load_migrations()  # raises: the install is incomplete
    return names


def latest_schema_version() -> int:
    """The number of the newest migration shipped (without reading the SQL)."""
    return max(int(name.split("_", 1)[0]) for name in shipped_migrations())


def load_migrations() -> list[Migration]:
    """The migrations shipped with the package, in order."""
    folder = migrations_folder()
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


def describe_sqlite_error(
    path: Path, exc: sqlite3.Error, busy_timeout_ms: int = BUSY_TIMEOUT_MS
) -> StoreError:
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
            f" {busy_timeout_ms / 1000:g} s ({text}): try again when it is done"
        )
    return StoreError(f"database {path} failed ({text}): check the file, or pass another --db")


def _say_set_aside(path: Path, reasons: Sequence[str]) -> None:
    """The one line on stderr saying pending captures were set aside, where, and why."""
    count = len(reasons)
    what = "1 pending capture" if count == 1 else f"{count:,} pending captures"
    why = reasons[0] if count == 1 else f"the first: {reasons[0]}"
    line = message(
        f"explomemo: {what} could not be stored ({why}) and {'was' if count == 1 else 'were'}"
        f" set aside in {path}, never to be tried again: read it, then delete it"
    )
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        return  # no stderr to say it on: the quarantine file still holds the lines


class Store:
    """An open explomemo database. Use :meth:`open`; close with :meth:`close`."""

    def __init__(self, path: Path, conn: sqlite3.Connection) -> None:
        self.path = path
        #: The write connection (and the one that opened and migrated the file).
        self.conn = conn
        self.lock = threading.RLock()
        # The read connection, opened once the file is migrated.
        self._reader: sqlite3.Connection | None = None
        self._read_lock = threading.RLock()
        # The thread inside write(): its reads see what it wrote.
        self._writing: int | None = None
        # (st_dev, st_ino) of the file opened; None once it is let go of.
        self._identity: tuple[int, int] | None = None
        self._let_go = False
        #: How long a statement waits for another process's lock.
        self.busy_timeout_ms = BUSY_TIMEOUT_MS
        self._storing_pending = False
        self._pending_checked = False

    @classmethod
    def open(
        cls,
        path: Path | None = None,
        *,
        create: bool = True,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    ) -> Store:
        """Open and migrate a database, creating it and its parent folders if needed, or,
        when not ``create`` (a command that only reads), refusing a missing one.

        A lock held by another process is waited for at most ``busy_timeout_ms`` (a
        hook that writes waits a fraction of a second)."""
        db_path = database_path(path)
        if not create and not os.path.exists(db_path):
            raise StoreError(
                f"there is no database at {db_path}: check the path (--db, $EXPLOMEMO_DB),"
                " or record a memo first, which creates it"
            )
        if db_path.exists() and not db_path.is_file():
            kind = "a directory" if db_path.is_dir() else "not a regular file"
            raise StoreError(
                f"database path {db_path} is {kind}: pass the path of a database file"
                " with --db or EXPLOMEMO_DB"
            )
        try:
            _private_folders(db_path.parent)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder of database {db_path} ({exc.strerror}):"
                " pass a writable --db or EXPLOMEMO_DB"
            ) from exc
        _private_file(db_path)
        store = cls._connected(db_path, busy_timeout_ms)
        store.busy_timeout_ms = busy_timeout_ms
        with store._closed_on_failure(busy_timeout_ms):
            store._check_identity(busy_timeout_ms)
            store._identity = store._file_identity()
            _owner_only(db_path)
            store._configure()
            store._migrate()
            store._reader = _connect(db_path, busy_timeout_ms, query_only=True)
        return store

    @classmethod
    def open_existing(
        cls, path: Path | None, busy_timeout_ms: int, *, migrate: bool = True
    ) -> Store:
        """Open a database that exists, for a reader that must not wait.

        Nothing is created or switched to WAL, except that a database of an earlier
        explomemo is migrated, as by :meth:`open` (with ``migrate`` False, refused with a
        :class:`~explomemo.errors.StoreError` instead: a dry run writes nothing), and a
        lock held by another process is waited for at most ``busy_timeout_ms`` (the
        Claude Code hooks answer within a fraction of a second, whatever happens). No
        database there yet (or one being created) is a
        :class:`~explomemo.errors.NoDatabaseError`.
        """
        db_path = database_path(path)
        if not db_path.is_file():
            raise NoDatabaseError(f"no database at {db_path} yet: nothing has been recorded there")
        store = cls._connected(db_path, busy_timeout_ms)
        with store._closed_on_failure(busy_timeout_ms):
            store.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            store.busy_timeout_ms = busy_timeout_ms
            store._check_identity(busy_timeout_ms)
            store._identity = store._file_identity()
            missing = store.missing_migrations()
            if missing == shipped_migrations():
                # No migration at all: a file being created (by a server starting at
                # the same moment, say) or an empty one. Nothing was recorded there.
                raise NoDatabaseError(
                    f"database {db_path} has no memos yet: it holds no explomemo schema"
                    " (being created, or an empty file)"
                )
        if missing:
            store.close()
            if not migrate:
                raise StoreError(
                    f"database {db_path} lacks schema migrations of this explomemo"
                    f" ({', '.join(missing)}): run any explomemo command on it once"
                    " (explomemo list) to upgrade it"
                )
            # A database of an earlier explomemo: migrated, as a command would.
            return cls.open(db_path, create=False, busy_timeout_ms=busy_timeout_ms)
        with store._closed_on_failure(busy_timeout_ms):
            store.conn.execute("PRAGMA foreign_keys = ON")
            store._reader = _connect(db_path, busy_timeout_ms, query_only=True)
        return store

    @classmethod
    def _connected(cls, db_path: Path, busy_timeout_ms: int) -> Store:
        """A store on a new write connection to ``db_path`` (nothing read yet)."""
        try:
            return cls(db_path, _connect(db_path, busy_timeout_ms))
        except sqlite3.Error as exc:
            raise describe_sqlite_error(db_path, exc, busy_timeout_ms) from exc

    @contextmanager
    def _closed_on_failure(self, busy_timeout_ms: int) -> Iterator[None]:
        """Close the store when opening it fails; a SQLite error becomes a StoreError."""
        try:
            yield
        except sqlite3.Error as exc:
            self.close()
            raise describe_sqlite_error(self.path, exc, busy_timeout_ms) from exc
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the connections (emptying the log into the file opened, if it was replaced)."""
        with self.lock, self._read_lock:
            try:
                if self._identity is not None and self._file_identity() != self._identity:
                    self._let_go_of_the_path()
            finally:
                if self._reader is not None:
                    self._reader.close()
                self.conn.close()

    def _file_identity(self) -> tuple[int, int] | None:
        """(st_dev, st_ino) of the file at the path now; None when there is none."""
        try:
            found = os.stat(self.path)
        except OSError:
            return None
        return found.st_dev, found.st_ino

    def _check_file(self) -> None:
        """Refuse to go on when the file at the path is not the database this store opened.

        Then (once) the store's write-ahead log is emptied into the file it
        opened, wherever that is now: left as it is, the log, still named
        after the path, would be read as part of the file now there.
        """
        now = self._file_identity()
        if now == self._identity and not self._let_go:
            return
        if self.lock.acquire(blocking=False):
            try:
                self._let_go_of_the_path()
            finally:
                self.lock.release()
        what = "was deleted or moved away" if now is None else "was replaced by another file"
        raise StoreError(
            f"database {self.path} {what} while explomemo had it open: nothing more is"
            " written to it; restart the server (or run the command again) to use the file"
            " now at that path"
        )

    def _let_go_of_the_path(self) -> None:
        # Called holding self.lock. TRUNCATE writes the log's pages into the
        # file this connection opened (by its descriptor) and empties the log.
        if self._let_go:
            return
        self._let_go = True
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
        with contextlib.suppress(sqlite3.Error):
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _check_identity(self, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        # Read-only checks, before any pragma that could write to the file: a
        # database we must refuse is left byte for byte as it was.
        self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
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
        latest = latest_schema_version()
        if version > latest:
            raise StoreError(
                f"database {self.path} has schema version {version}, newer than this"
                f" explomemo knows ({latest}): upgrade explomemo (pip install -U explomemo);"
                " the database was left as it is"
            )

    def _configure(self) -> None:
        self.conn.execute("PRAGMA foreign_keys = ON")
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
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
        self.conn.execute(f"PRAGMA cache_size = -{WRITE_CACHE_KIB}")

    def missing_migrations(self) -> list[str]:
        """The shipped migrations this database has not applied (names, in order).

        Decided by name, from the migrations sqlite-utils recorded as applied
        (one query), not by ``user_version``: migrations were merged out of
        number order, so a database at version 5 may lack 0003 or 0004.
        """
        shipped = shipped_migrations()
        try:
            applied = {
                row[0]
                for row in self.conn.execute(
                    "SELECT name FROM _sqlite_migrations WHERE migration_set = ?",
                    (MIGRATION_SET,),
                )
            }
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
            applied = set()
        return [name for name in shipped if name not in applied]

    def _migrate(self) -> None:
        if not self.missing_migrations():
            return
        migrations = load_migrations()
        latest = migrations[-1].number
        # sqlite-utils is imported only when there is something to migrate: it
        # costs a quarter of a second, and the CLI must start fast.
        from sqlite_utils import Database
        from sqlite_utils.migrations import Migrations

        steps = Migrations(MIGRATION_SET)
        for migration in migrations:
            steps(name=migration.name)(_migration_function(migration))
        # Migrations may call the Python rules they re-apply to stored rows.
        self.conn.create_function(
            "explomemo_question_key", 1, _question_key_or_null, deterministic=True
        )
        with self.write():
            # Read again under the write lock: another process may have migrated.
            if self.missing_migrations():
                steps.apply(Database(self.conn))
                self.conn.execute(f"PRAGMA user_version = {latest}")
                self.conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def schema_version(self) -> int:
        """The database's schema version (the number of its newest migration)."""
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def write(self, wait: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE): all of it lands, or none of it.

        With ``wait=False`` (a cache's write, which may be skipped) it does not
        wait for another thread of this process, and waits for another process
        only :data:`CACHE_BUSY_TIMEOUT_MS`, or the store's own busy timeout when
        that is shorter (a hook's 50 ms): a StoreError or sqlite3.Error says it
        did not happen.
        """
        if not self.lock.acquire(blocking=wait):
            raise StoreError(f"database {self.path} is being written by another thread")
        try:
            self._check_file()
            if wait:
                self._store_pending_captures()
            if not wait:
                cache_wait = min(CACHE_BUSY_TIMEOUT_MS, self.busy_timeout_ms)
                self.conn.execute(f"PRAGMA busy_timeout = {cache_wait}")
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            finally:
                if not wait:
                    self.conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
            self._writing = threading.get_ident()
            try:
                yield self.conn
                # Waiting for the lock may have taken long: the file is checked again.
                self._check_file()
            except BaseException:
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
            finally:
                self._writing = None
            self.conn.execute("COMMIT")
        finally:
            self.lock.release()

    def _store_pending_captures(self) -> None:
        """Store the captures a hook could not write in time (see :mod:`.pending`), in a
        transaction of their own before this process's write; called holding the lock.

        When they cannot be stored now (the database is locked), they stay pending for
        the next writer, and this write goes on.
        """
        if self._storing_pending:
            return
        # Files claimed by a writer that died are looked for once per store; after that a
        # stat of the pending file is all a write costs (an empty one, left by an append
        # that died before it wrote, holds nothing to claim).
        if self._pending_checked and not pending.waiting(self.path):
            return
        self._pending_checked = True
        self._storing_pending = True
        try:
            claimed = pending.claim(self.path)
            if not claimed:
                return
            refused: list[tuple[bytes, str]] = []
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                for line, capture in pending.lines(claimed):
                    why = "not a capture" if capture is None else self._save_pending(capture)
                    if why is not None:
                        refused.append((line, why))
                self.conn.execute("COMMIT")
            except (sqlite3.Error, StoreError):
                if self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                pending.give_back(self.path, claimed)
                return
            if refused:
                kept = pending.set_aside(self.path, [line for line, _ in refused])
                _say_set_aside(kept, [why for _, why in refused])
            pending.release(claimed)
        except OSError:
            return
        finally:
            self._storing_pending = False

    def _save_pending(self, capture: Capture) -> str | None:
        """Store one pending capture inside the open transaction; None when it is stored,
        else why it cannot be (what it wrote is undone, and the others go on). A database
        that cannot be written now (locked, full, read-only) raises: no capture's fault."""
        from explomemo.redaction import redact

        self.conn.execute("SAVEPOINT pending_capture")
        try:
            pending.check(capture)
            # An earlier release parked captures without redacting them.
            capture = capture._replace(
                question=redact(capture.question).text,
                conclusion=redact(capture.conclusion).text,
            )
            self.save_capture(self.conn, capture)
        except (
            sqlite3.IntegrityError,
            sqlite3.DataError,
            sqlite3.InterfaceError,
            ExplomemoError,
            ValueError,
            TypeError,
            OverflowError,
        ) as exc:
            # A lone surrogate (UnicodeEncodeError), a size past SQLite's integers, a
            # row a constraint refuses: this capture will never be stored. (Any other
            # database error, locked, full, read-only or damaged, is the database's
            # state, no capture's fault: it propagates, and the captures are given back.)
            self.conn.execute("ROLLBACK TO pending_capture")
            self.conn.execute("RELEASE pending_capture")
            return " ".join(str(exc).split()) or type(exc).__name__
        self.conn.execute("RELEASE pending_capture")
        return None

    @contextmanager
    def erasing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (see :meth:`write`) whose deleted and overwritten content is
        zeroed on disk (SQLite's ``secure_delete``), then a checkpoint that empties the
        write-ahead log (when no reader holds it): for text that must stay nowhere in the
        file."""
        with self.lock:
            self.conn.execute("PRAGMA secure_delete = ON")
            try:
                with self.write() as conn:
                    yield conn
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                self.conn.execute("PRAGMA secure_delete = OFF")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A consistent read (one snapshot), on the read connection.

        Inside this thread's :meth:`write` it is that transaction, so it sees
        what the write did so far; a read inside a read is the same snapshot.
        """
        if self._writing == threading.get_ident():
            yield self.conn
            return
        with self._read_lock:
            reader = self._reader
            assert reader is not None
            if reader.in_transaction:
                yield reader
                return
            self._check_file()
            reader.execute("BEGIN")
            try:
                yield reader
            finally:
                if reader.in_transaction:
                    reader.execute("COMMIT")

    @contextmanager
    def read_apart(self) -> Iterator[sqlite3.Connection]:
        """A consistent read on a connection of its own, for a long one (a project's
        vectors, a second at 100,000 memos) that must not hold up the reads of other
        threads, which share one connection (see :meth:`read`)."""
        self._check_file()
        try:
            reader = _connect(self.path, self.busy_timeout_ms, query_only=True)
        except sqlite3.Error as exc:
            raise describe_sqlite_error(self.path, exc, self.busy_timeout_ms) from exc
        try:
            reader.execute("BEGIN")
            # Opened by its path: the file there must still be the one this store opened.
            self._check_file()
            yield reader
        finally:
            reader.close()

    def memo_version(self, conn: sqlite3.Connection | None = None) -> int:
        """A counter that moves whenever any memo or vector changes, in any process.

        Read in ``conn``'s transaction when given (a write reading its own version).
        """
        if conn is None:
            with self.read() as conn:
                return self.memo_version(conn)
        return int(conn.execute("SELECT version FROM memo_version").fetchone()[0])

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Translate sqlite3 errors raised inside into StoreError naming the database (and
        the wait for a lock this store makes)."""
        try:
            yield
        except sqlite3.Error as exc:
            raise describe_sqlite_error(self.path, exc, self.busy_timeout_ms) from exc

    def write_cache(self, fill: Callable[[sqlite3.Connection], T]) -> T | None:
        """``fill(conn)`` in a cache's write transaction (:meth:`write` with ``wait=False``);
        None when the write did not happen (another writer holds the database, or it is
        read-only or damaged).

        For what is only a speed-up: a skipped write costs a later reader some work
        again, never a wrong answer, and a read never waits behind a write for it.
        """
        try:
            with self.errors(), self.write(wait=False) as conn:
                return fill(conn)
        except StoreError:
            return None

    # Memos -------------------------------------------------------------

    def find_by_question(
        self, conn: sqlite3.Connection, project: str, key: str, repository: str | None = None
    ) -> int | None:
        """The id of the memo a record of this normalised question in ``repository``
        replaces: the project's memo of that question and repository, else (for a known
        repository) the one without an identity, which the record then gives its own.
        Never another repository's."""
        found = self.question_holder(conn, project, key, repository)
        return None if found is None else found[0]

    def question_holder(
        self, conn: sqlite3.Connection, project: str, key: str, repository: str | None = None
    ) -> tuple[int, str, str] | None:
        """(id, origin, recorded_at) of the memo :meth:`find_by_question` finds."""
        for held in dict.fromkeys((repository, None)):
            row = conn.execute(
                "SELECT id, origin, recorded_at FROM memos WHERE project = ? AND question_key = ?",
                (project, _stored_key(key, held)),
            ).fetchone()
            if row is not None:
                return int(row[0]), str(row[1]), str(row[2])
        return None

    def save_capture(
        self, conn: sqlite3.Connection, capture: Capture, replacing: int | None = None
    ) -> tuple[int, bool] | None:
        """Store a captured memo (origin ``transcript`` or ``subagent``): (id, replaced), or
        None when the project holds the question already as an agent's memo, or as a capture
        made later, which it keeps.

        With ``replacing`` (a delegated run asked to check that memo), the capture takes its
        place under its id instead, only when that memo was captured here from a delegated
        run (origin ``subagent``, not imported) of the same project and repository and no
        other memo holds the capture's question; None, with nothing written, otherwise."""
        key = question_key(capture.question)
        holder = self.question_holder(conn, capture.project, key, capture.repository)
        if replacing is not None:
            held = self.memos(conn, ids=[replacing])
            if (
                not held
                or held[0].origin != SUBAGENT
                or held[0].imported
                or (held[0].project, held[0].repository) != (capture.project, capture.repository)
                or (holder is not None and holder[0] != replacing)
            ):
                return None
            target: int | None = replacing
        elif holder is not None and (
            not replaces(capture.origin, holder[1]) or holder[2] > capture.recorded_at
        ):
            return None
        else:
            target = None if holder is None else holder[0]
        files = [FileRow(f.path, f.sha256, f.xxh3, f.size, f.git_blob) for f in capture.files]
        memo_id = self.save_memo(
            conn,
            memo_id=target,
            project=capture.project,
            question=capture.question,
            question_key=key,
            conclusion=capture.conclusion,
            root=capture.root,
            recorded_at=capture.recorded_at,
            files=files,
            origin=capture.origin,
            repository=capture.repository,
            agent_type=capture.agent_type,
            cost_tokens=capture.cost_tokens,
        )
        self.save_snapshots(conn, capture.snapshots)
        self.share_git_blobs(conn, (f.sha256 for f in files))
        return memo_id, target is not None

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
        index_identifiers: bool = True,
        origin: str = "agent",
        repository: str | None = None,
        imported: bool = False,
        agent_type: str | None = None,
        cost_tokens: int | None = None,
    ) -> int:
        """Insert a memo, or replace memo ``memo_id`` keeping its id; returns the id.

        A new memo takes ``wanted_id`` when given and still free (imports keep ids).
        A replaced memo's snapshots that no memo rests on any more are deleted.
        With ``index_identifiers`` False the memo's identifiers are left pending:
        :meth:`index_identifiers` stores them later, and :meth:`identifier_holders`
        finds them meanwhile. ``repository`` is the identity of the repository it was
        recorded in (None: unknown); ``imported``, ``agent_type`` and ``cost_tokens`` are
        its provenance (see :class:`MemoRow`).

        A memo rests on 1 to :data:`~explomemo.inputs.MAX_FILES` files, whoever writes
        it: one resting on none would pass every check as fresh.
        """
        if not 1 <= len(files) <= MAX_FILES:
            fix = (
                "give it the files its conclusion was read from"
                if not files
                else f"keep the {MAX_FILES} it rests on most"
            )
            shown = question if len(question) <= 80 else f"{question[:79]}…"
            raise InputError(
                f"memo {shown!r} of project {project!r} rests on {len(files)} files, and a"
                f" memo rests on 1 to {MAX_FILES}: {fix}"
            )
        replaced: list[str] = []
        stored_key = _stored_key(question_key, repository)
        if memo_id is None:
            if (
                wanted_id is not None
                and conn.execute("SELECT 1 FROM memos WHERE id = ?", (wanted_id,)).fetchone()
            ):
                wanted_id = None
            cursor = conn.execute(
                "INSERT INTO memos (id, project, question, question_key, conclusion, root,"
                " recorded_at, origin, repository, imported, agent_type, cost_tokens)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    wanted_id,
                    project,
                    question,
                    stored_key,
                    conclusion,
                    root,
                    recorded_at,
                    origin,
                    repository,
                    int(imported),
                    agent_type,
                    cost_tokens,
                ),
            )
            assert cursor.lastrowid is not None
            memo_id = int(cursor.lastrowid)
        else:
            conn.execute(
                "UPDATE memos SET question = ?, conclusion = ?, root = ?, recorded_at = ?,"
                " origin = ?, question_key = ?, repository = ?, imported = ?, agent_type = ?,"
                " cost_tokens = ?, embedding = NULL, embedding_model = NULL,"
                " embedding_text_hash = NULL, question_embedding = NULL WHERE id = ?",
                (
                    question,
                    conclusion,
                    root,
                    recorded_at,
                    origin,
                    stored_key,
                    repository,
                    int(imported),
                    agent_type,
                    cost_tokens,
                    memo_id,
                ),
            )
            replaced = self._contents_of(conn, memo_id)
            conn.execute("DELETE FROM memo_files WHERE memo_id = ?", (memo_id,))
            conn.execute("DELETE FROM memos_fts WHERE rowid = ?", (memo_id,))
            conn.execute("DELETE FROM memo_identifiers WHERE memo_id = ?", (memo_id,))
            conn.execute("DELETE FROM memos_without_identifiers WHERE memo_id = ?", (memo_id,))
        conn.executemany(
            "INSERT INTO memo_files (memo_id, path, sha256, xxh3, size, git_blob)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(memo_id, f.path, f.sha256, f.xxh3, f.size, f.git_blob) for f in files],
        )
        paths = [f.path for f in files]
        self._index_words(conn, memo_id, project, question, conclusion, paths)
        self.collect_snapshots(conn, replaced)
        if index_identifiers:
            self._save_identifiers(conn, memo_id, project, question, conclusion, paths)
        else:
            conn.execute(
                "INSERT OR IGNORE INTO memos_without_identifiers (memo_id) VALUES (?)", (memo_id,)
            )
        return memo_id

    def _index_words(
        self,
        conn: sqlite3.Connection,
        memo_id: int,
        project: str,
        question: str,
        conclusion: str,
        paths: Sequence[str],
    ) -> None:
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

    def rewrite_memo_text(
        self, conn: sqlite3.Connection, memo: MemoRow, question: str, conclusion: str
    ) -> None:
        """Give ``memo`` a new question and conclusion, keeping everything else (its files,
        origin, date, id); its word index and identifiers follow, and its vectors are
        computed again. The caller makes sure no other memo of its project holds the new
        question (see :meth:`question_holder`)."""
        conn.execute(
            "UPDATE memos SET question = ?, conclusion = ?, question_key = ?,"
            " embedding = NULL, embedding_model = NULL, embedding_text_hash = NULL,"
            " question_embedding = NULL WHERE id = ?",
            (question, conclusion, _stored_key(question_key(question), memo.repository), memo.id),
        )
        paths = [f.path for f in self.files_of(conn, [memo.id])[memo.id]]
        conn.execute("DELETE FROM memos_fts WHERE rowid = ?", (memo.id,))
        self._index_words(conn, memo.id, memo.project, question, conclusion, paths)
        conn.execute("DELETE FROM memo_identifiers WHERE memo_id = ?", (memo.id,))
        conn.execute("DELETE FROM memos_without_identifiers WHERE memo_id = ?", (memo.id,))
        self._save_identifiers(conn, memo.id, memo.project, question, conclusion, paths)

    def purge_deleted_text(self, conn: sqlite3.Connection) -> None:
        """Merge the word index's segments, so that no deleted or rewritten text stays in
        them (an FTS5 index keeps a deleted row's words until its segments merge)."""
        conn.execute("INSERT INTO memos_fts (memos_fts) VALUES ('optimize')")

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
            # In key order: each row lands beside the one before in the table's b-tree.
            [
                (project, name, memo_id)
                for name in sorted(memo_identifiers(question, conclusion, paths))
            ],
        )

    def index_identifiers(
        self, conn: sqlite3.Connection, batch: int = _BATCH, ids: Sequence[int] | None = None
    ) -> int:
        """Index the identifiers of up to ``batch`` memos whose identifiers are pending
        (written before they were indexed, or recorded since without them); only those
        among ``ids`` when given.

        Returns how many it indexed (0: none is left).
        """
        if ids is None:
            pending = conn.execute(
                "SELECT memo_id FROM memos_without_identifiers ORDER BY memo_id LIMIT ?", (batch,)
            )
        else:
            marks = ",".join("?" * len(ids))
            pending = conn.execute(
                f"SELECT memo_id FROM memos_without_identifiers WHERE memo_id IN ({marks})",
                list(ids),
            )
        found = [int(row[0]) for row in pending]
        if not found:
            return 0
        files = self.files_of(conn, found)
        for memo in self.memos(conn, ids=found):
            paths = [f.path for f in files[memo.id]]
            parts = " ".join(name_parts(f"{memo.question}\n{memo.conclusion}"))
            if parts:
                # Memos written before schema 3 have none yet; a record wrote its own.
                conn.execute(
                    "UPDATE memos_fts SET name_parts = ? WHERE rowid = ? AND name_parts = ''",
                    (parts, memo.id),
                )
            self._save_identifiers(
                conn, memo.id, memo.project, memo.question, memo.conclusion, paths
            )
        marks = ",".join("?" * len(found))
        conn.execute(f"DELETE FROM memos_without_identifiers WHERE memo_id IN ({marks})", found)
        return len(found)

    def identifiers_pending(self, conn: sqlite3.Connection) -> bool:
        """True while some memo's identifiers are not indexed (see :meth:`index_identifiers`)."""
        found = conn.execute("SELECT 1 FROM memos_without_identifiers LIMIT 1").fetchone()
        return found is not None

    def identifier_holders(
        self, conn: sqlite3.Connection, project: str, names: Iterable[str], most: int
    ) -> dict[str, list[int]]:
        """The memos of ``project`` holding each identifier: up to ``most`` + 1 ids each.

        Memos whose identifiers are pending count too (up to
        :data:`PENDING_IDENTIFIERS_READ` of them, found from their texts): a
        record leaves its identifiers to be stored after it, and a reader that
        must not write (the prompt hook) still finds it by them at once.
        """
        wanted = list(names)
        pending = self._pending_identifiers(conn, project) if wanted else {}
        found: dict[str, list[int]] = {}
        for name in wanted:
            ids = [
                int(row[0])
                for row in conn.execute(
                    "SELECT memo_id FROM memo_identifiers WHERE project = ? AND identifier = ?"
                    " ORDER BY memo_id LIMIT ?",
                    (project, name, most + 1),
                )
            ]
            ids += [memo_id for memo_id, held in pending.items() if name in held]
            found[name] = sorted(ids)[: most + 1]
        return found

    def _pending_identifiers(self, conn: sqlite3.Connection, project: str) -> dict[int, set[str]]:
        """The identifiers of the project's memos whose identifiers are pending, by memo id."""
        ids = [
            int(row[0])
            for row in conn.execute(
                # CROSS JOIN: the few pending memos first, not every memo of the project.
                "SELECT p.memo_id FROM memos_without_identifiers p CROSS JOIN memos m"
                " ON m.id = p.memo_id WHERE m.project = ? ORDER BY p.memo_id DESC LIMIT ?",
                (project, PENDING_IDENTIFIERS_READ),
            )
        ]
        if not ids:
            return {}
        files = self.files_of(conn, ids)
        return {
            memo.id: memo_identifiers(
                memo.question, memo.conclusion, [f.path for f in files[memo.id]]
            )
            for memo in self.memos(conn, ids=ids)
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
        """Delete a memo (of ``project``, when given); False when there is none.

        Its snapshots that no other memo rests on are deleted with it.
        """
        contents = self._contents_of(conn, memo_id)
        if project is None:
            cursor = conn.execute("DELETE FROM memos WHERE id = ?", (memo_id,))
        else:
            cursor = conn.execute(
                "DELETE FROM memos WHERE id = ? AND project = ?", (memo_id, project)
            )
        if cursor.rowcount == 0:
            return False
        conn.execute("DELETE FROM memos_fts WHERE rowid = ?", (memo_id,))
        self.collect_snapshots(conn, contents)
        return True

    def memos(
        self,
        conn: sqlite3.Connection,
        *,
        project: str | None = None,
        ids: Iterable[int] | None = None,
    ) -> list[MemoRow]:
        """Memos of one project (or all, or the given ids), sorted by project then id."""
        columns = (
            "id, project, question, conclusion, root, recorded_at, origin, repository,"
            " imported = 1, agent_type, cost_tokens"
        )
        if ids is not None:
            rows: list[
                tuple[int, str, str, str, str, str, str, str | None, bool, str | None, int | None]
            ] = []
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
        return [MemoRow(*row[:8], bool(row[8]), *row[9:]) for row in rows]

    def memos_of_other_repositories(
        self, conn: sqlite3.Connection, project: str, repository: str
    ) -> set[int]:
        """The ids of the memos of ``project`` recorded in a repository other than
        ``repository`` (a known identity)."""
        return {
            int(row[0])
            for row in conn.execute(
                # Two ranges of the memos_by_repository index, where != would read it all.
                "SELECT id FROM memos WHERE project = ? AND repository < ?"
                " UNION ALL SELECT id FROM memos WHERE project = ? AND repository > ?",
                (project, repository, project, repository),
            )
        }

    def projects_of_repository(self, conn: sqlite3.Connection, repository: str) -> list[str]:
        """The projects holding memos recorded in ``repository`` (a known identity), sorted."""
        return [
            str(row[0])
            for row in conn.execute(
                "SELECT DISTINCT project FROM memos WHERE repository = ? ORDER BY project",
                (repository,),
            )
        ]

    def has_repositories(self, conn: sqlite3.Connection, project: str) -> bool:
        """Whether some memo of ``project`` has a repository identity."""
        found = conn.execute(
            "SELECT 1 FROM memos WHERE project = ? AND repository IS NOT NULL LIMIT 1", (project,)
        ).fetchone()
        return found is not None

    def repositories_of(
        self, conn: sqlite3.Connection, ids: Sequence[int]
    ) -> dict[int, str | None]:
        """The repository identity of each memo among ``ids`` (None: unknown)."""
        found: dict[int, str | None] = {}
        for chunk in _chunks(list(ids)):
            marks = ",".join("?" * len(chunk))
            found.update(
                conn.execute(f"SELECT id, repository FROM memos WHERE id IN ({marks})", chunk)
            )
        return found

    def repositories_pending(self, conn: sqlite3.Connection) -> bool:
        """True while memos stored before identities were kept (migration 0008) have none."""
        found = conn.execute("SELECT 1 FROM memos_without_repository LIMIT 1").fetchone()
        return found is not None

    def assign_repositories(
        self, conn: sqlite3.Connection, identify: Callable[[str], str | None]
    ) -> int:
        """Give each memo stored before identities were kept the identity of its recorded
        root, ``identify(root)`` (None where that repository no longer exists), once; how
        many memos got one. Each distinct root is asked once."""
        pending = conn.execute(
            "SELECT m.id, m.root, m.question_key FROM memos_without_repository p"
            " JOIN memos m ON m.id = p.memo_id WHERE m.repository IS NULL"
        ).fetchall()
        identities: dict[str, str | None] = {}
        assigned = []
        for memo_id, root, key in pending:
            if root not in identities:
                identities[root] = identify(root) if isinstance(root, str) else None
            if identities[root] is not None and isinstance(key, str):
                assigned.append((identities[root], _stored_key(key, identities[root]), memo_id))
        conn.executemany("UPDATE memos SET repository = ?, question_key = ? WHERE id = ?", assigned)
        conn.execute("DELETE FROM memos_without_repository")
        return len(assigned)

    def known_head(self, conn: sqlite3.Connection, root: str) -> tuple[str, str] | None:
        """(commit id, its first root commit) found last at the real path ``root``, if any."""
        row = conn.execute(
            "SELECT head, identity FROM repository_heads WHERE root = ?", (root,)
        ).fetchone()
        return None if row is None else (str(row[0]), str(row[1]))

    def save_head(self, conn: sqlite3.Connection, root: str, head: str, identity: str) -> None:
        """Keep the commit found at HEAD under ``root`` (a real path) and its first root
        commit, for :meth:`known_head`."""
        conn.execute(
            "INSERT OR REPLACE INTO repository_heads (root, head, identity) VALUES (?, ?, ?)",
            (root, head, identity),
        )

    def projects(self, conn: sqlite3.Connection) -> list[str]:
        """The names of the projects that have memos, sorted."""
        return [row[0] for row in conn.execute("SELECT DISTINCT project FROM memos ORDER BY 1")]

    def files_of(
        self, conn: sqlite3.Connection, memo_ids: Sequence[int]
    ) -> dict[int, list[FileRow]]:
        """The recorded files of each memo, sorted by path."""
        found: dict[int, list[FileRow]] = {memo_id: [] for memo_id in memo_ids}
        for chunk in _chunks(list(memo_ids)):
            marks = ",".join("?" * len(chunk))
            for memo_id, path, sha256, xxh3, size, git_blob in conn.execute(
                f"SELECT memo_id, path, sha256, xxh3, size, git_blob FROM memo_files"
                f" WHERE memo_id IN ({marks}) ORDER BY memo_id, path",
                chunk,
            ):
                found[memo_id].append(FileRow(path, sha256, xxh3, size, git_blob))
        return found

    def all_files(self, conn: sqlite3.Connection, project: str | None) -> dict[int, list[FileRow]]:
        """The recorded files of every memo of a project (or of all), in one query."""
        found: dict[int, list[FileRow]] = {}
        if project is None:
            cursor = conn.execute(
                "SELECT memo_id, path, sha256, xxh3, size, git_blob FROM memo_files"
                " ORDER BY memo_id, path"
            )
        else:
            cursor = conn.execute(
                "SELECT f.memo_id, f.path, f.sha256, f.xxh3, f.size, f.git_blob FROM memo_files f"
                " JOIN memos m ON m.id = f.memo_id WHERE m.project = ?"
                " ORDER BY f.memo_id, f.path",
                (project,),
            )
        for memo_id, path, sha256, xxh3, size, git_blob in cursor:
            found.setdefault(memo_id, []).append(FileRow(path, sha256, xxh3, size, git_blob))
        return found

    def memo_count(self, conn: sqlite3.Connection, project: str) -> int:
        """How many memos ``project`` has."""
        return int(
            conn.execute("SELECT count(*) FROM memos WHERE project = ?", (project,)).fetchone()[0]
        )

    def has_vectors(self, conn: sqlite3.Connection, project: str, model: str) -> bool:
        """Whether some memo of ``project`` has vectors of ``model``."""
        return (
            conn.execute(
                "SELECT 1 FROM memos WHERE project = ? AND embedding_model = ?"
                " AND embedding IS NOT NULL LIMIT 1",
                (project, model),
            ).fetchone()
            is not None
        )

    def memos_needing_embedding(
        self, conn: sqlite3.Connection, model: str, most: int = -1, project: str | None = None
    ) -> list[int]:
        """Ids of memos (of ``project``, or all) without both vectors from ``model`` (the
        first ``most``; -1: all)."""
        return [
            int(row[0])
            for row in conn.execute(
                "SELECT id FROM memos WHERE (embedding IS NULL OR question_embedding IS NULL"
                " OR embedding_model IS NOT ?) AND (? IS NULL OR project = ?) ORDER BY id LIMIT ?",
                (model, project, project, most),
            )
        ]

    # Snapshots and blob ids ----------------------------------------------

    def _contents_of(self, conn: sqlite3.Connection, memo_id: int) -> list[str]:
        return [
            row[0]
            for row in conn.execute("SELECT sha256 FROM memo_files WHERE memo_id = ?", (memo_id,))
        ]

    def collect_snapshots(self, conn: sqlite3.Connection, contents: Iterable[str]) -> int:
        """Delete the snapshots among ``contents`` (SHA-256s) that no memo rests on; how many."""
        deleted = 0
        for chunk in _chunks(sorted(set(contents))):
            marks = ",".join("?" * len(chunk))
            deleted += conn.execute(
                f"DELETE FROM snapshots WHERE sha256 IN ({marks}) AND NOT EXISTS"
                " (SELECT 1 FROM memo_files f WHERE f.sha256 = snapshots.sha256)",
                chunk,
            ).rowcount
        return deleted

    def snapshot_contents(self, conn: sqlite3.Connection, contents: Iterable[str]) -> set[str]:
        """The SHA-256s among ``contents`` that have a snapshot."""
        found: set[str] = set()
        for chunk in _chunks(sorted(set(contents))):
            marks = ",".join("?" * len(chunk))
            found.update(
                row[0]
                for row in conn.execute(
                    f"SELECT sha256 FROM snapshots WHERE sha256 IN ({marks})", chunk
                )
            )
        return found

    def save_snapshots(
        self, conn: sqlite3.Connection, snapshots: Iterable[tuple[str, str, bytes]]
    ) -> None:
        """Store (SHA-256, codec, data) snapshots of contents some memo still rests on.

        A content no memo rests on any more (its memo was forgotten or
        replaced since it was read) is not stored: nothing would delete it.
        """
        conn.executemany(
            "INSERT OR IGNORE INTO snapshots (sha256, codec, data) SELECT ?, ?, ?"
            " WHERE EXISTS (SELECT 1 FROM memo_files WHERE sha256 = ?)",
            [(sha256, codec, data, sha256) for sha256, codec, data in snapshots],
        )

    def snapshot_paths(self, conn: sqlite3.Connection) -> dict[str, list[str]]:
        """Every snapshot's SHA-256, with the paths of the recorded files that hold it."""
        found: dict[str, list[str]] = {}
        for sha256, path in conn.execute(
            "SELECT s.sha256, f.path FROM snapshots s LEFT JOIN memo_files f"
            " ON f.sha256 = s.sha256 ORDER BY s.sha256"
        ):
            paths = found.setdefault(str(sha256), [])
            if path is not None:
                paths.append(str(path))
        return found

    def delete_snapshots(self, conn: sqlite3.Connection, contents: Iterable[str]) -> int:
        """Delete the snapshots of ``contents`` (SHA-256s), whatever rests on them; how many."""
        deleted = 0
        for chunk in _chunks(sorted(set(contents))):
            marks = ",".join("?" * len(chunk))
            deleted += conn.execute(
                f"DELETE FROM snapshots WHERE sha256 IN ({marks})", chunk
            ).rowcount
        return deleted

    def snapshot(self, conn: sqlite3.Connection, sha256: str) -> tuple[str, bytes] | None:
        """(codec, data) of a content's snapshot, or None."""
        row = conn.execute(
            "SELECT codec, data FROM snapshots WHERE sha256 = ?", (sha256,)
        ).fetchone()
        return None if row is None else (str(row[0]), bytes(row[1]))

    def share_git_blobs(self, conn: sqlite3.Connection, contents: Iterable[str]) -> None:
        """Give each row of these contents (SHA-256s) that lacks a blob id the one another row
        of that content has."""
        # Each content's blob id looked up once, then given to its rows: a subquery per
        # row would read every row of its content again (quadratic for an old export
        # whose thousands of memos rest on one file, none with a blob id).
        for chunk in _chunks(sorted(set(contents))):
            marks = ",".join("?" * len(chunk))
            known = conn.execute(
                "SELECT sha256, min(git_blob) FROM memo_files"
                f" WHERE sha256 IN ({marks}) AND git_blob IS NOT NULL GROUP BY sha256",
                chunk,
            ).fetchall()
            self.set_git_blobs(conn, known)

    def set_git_blobs(self, conn: sqlite3.Connection, blobs: Iterable[tuple[str, str]]) -> None:
        """Give every recorded file of each (SHA-256, git blob id) content its blob id."""
        conn.executemany(
            "UPDATE memo_files SET git_blob = ? WHERE sha256 = ? AND git_blob IS NULL",
            [(blob, sha256) for sha256, blob in blobs],
        )

    # Served memos (what they spared) -----------------------------------

    def save_served(
        self,
        conn: sqlite3.Connection,
        *,
        session: str,
        project: str,
        surface: str,
        spared: Iterable[tuple[int, int]],
        served_at: str,
    ) -> list[int]:
        """Record each (memo id, bytes spared) served in ``session``, unless that memo was
        already served in it (by any surface); the ids recorded now."""
        added: list[int] = []
        for memo_id, spared_bytes in spared:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO served (session, memo_id, project, surface, bytes_spared,"
                " served_at) VALUES (?, ?, ?, ?, ?, ?)",
                (session, memo_id, project, surface, spared_bytes, served_at),
            )
            if cursor.rowcount:
                added.append(memo_id)
        return added

    def served_in(self, conn: sqlite3.Connection, session: str) -> dict[int, int]:
        """The memos served in ``session``, with the bytes each spared."""
        return {
            int(memo_id): int(spared)
            for memo_id, spared in conn.execute(
                "SELECT memo_id, bytes_spared FROM served WHERE session = ?", (session,)
            )
        }

    def lower_spared(
        self, conn: sqlite3.Connection, session: str, spared: Iterable[tuple[int, int]]
    ) -> None:
        """Lower what each (memo id, bytes spared) served in ``session`` spared to that."""
        conn.executemany(
            "UPDATE served SET bytes_spared = min(bytes_spared, ?) WHERE session = ?"
            " AND memo_id = ?",
            [(bytes_spared, session, memo_id) for memo_id, bytes_spared in spared],
        )

    def save_delegation(
        self,
        conn: sqlite3.Connection,
        *,
        session: str,
        project: str,
        memo_id: int,
        fresh: bool,
        tokens_spared: int,
        served_at: str,
    ) -> bool:
        """Record that memo ``memo_id`` answered a delegation in ``session``; whether it
        was recorded. One row per memo and session still: it takes the place of another
        surface's serve of the memo in the session (the agent delegated its exploration
        after it, so that serve did not answer), and a fresh answer the place of a stale
        one; anything else already there stays."""
        cursor = conn.execute(
            "INSERT INTO served (session, memo_id, project, surface, bytes_spared, served_at,"
            " fresh, tokens_spared) VALUES (?, ?, ?, 'delegation', 0, ?, ?, ?)"
            " ON CONFLICT (session, memo_id) DO UPDATE SET project = excluded.project,"
            " surface = excluded.surface, bytes_spared = 0, served_at = excluded.served_at,"
            " fresh = excluded.fresh, tokens_spared = excluded.tokens_spared"
            " WHERE served.surface <> 'delegation' OR (served.fresh = 0 AND excluded.fresh = 1)",
            (session, memo_id, project, served_at, int(fresh), tokens_spared),
        )
        return bool(cursor.rowcount)

    def drop_delegation(self, conn: sqlite3.Connection, session: str, memo_id: int) -> None:
        """Forget that memo ``memo_id`` answered a delegation in ``session``."""
        conn.execute(
            "DELETE FROM served WHERE session = ? AND memo_id = ? AND surface = 'delegation'",
            (session, memo_id),
        )

    def served_totals(self, conn: sqlite3.Connection, project: str | None) -> list[ServedTotal]:
        """What each surface served of one project's memos (or of all), by project and
        surface."""
        return [
            ServedTotal(str(p), str(s), int(n), int(f), int(b), int(t))
            for p, s, n, f, b, t in conn.execute(
                "SELECT project, surface, count(*), sum(fresh), sum(bytes_spared),"
                " sum(tokens_spared) FROM served WHERE ? IS NULL OR project = ?"
                " GROUP BY project, surface ORDER BY 1, 2",
                (project, project),
            )
        ]

    def spared_sessions(self, conn: sqlite3.Connection, project: str | None) -> dict[str, int]:
        """How many sessions were spared some reading or a delegated run, by project (of
        one project, or all)."""
        return {
            str(p): int(n)
            for p, n in conn.execute(
                "SELECT project, count(DISTINCT session) FROM served"
                " WHERE (bytes_spared > 0 OR tokens_spared > 0 OR (surface = 'delegation'"
                " AND fresh = 1)) AND (? IS NULL OR project = ?) GROUP BY project",
                (project, project),
            )
        }

    # Word search -------------------------------------------------------

    def word_matches(
        self, conn: sqlite3.Connection, project: str, match: str, limit: int
    ) -> list[tuple[int, float]]:
        """(memo id, BM25 rank) of the best FTS5 matches; lower rank is better.

        Through FTS5's own ``rank`` column, not ``ORDER BY bm25(…)``: FTS5 then
        sorts for the LIMIT itself, which took the prompt hook's query from 24 to
        14 ms on a 10k-memo database.
        """
        return conn.execute(
            "SELECT rowid, rank FROM memos_fts WHERE memos_fts MATCH ?"
            " AND rank MATCH 'bm25(4.0, 1.0, 2.0, 1.0)' AND project = ? ORDER BY rank LIMIT ?",
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
        """Insert or replace stat-cache entries.

        An entry with a number SQLite cannot hold (a file dated before 1677 or
        after 2262 is outside 64-bit nanoseconds; ext4 and tmpfs allow both) is
        left out: that file is read again at each run, as without a stat cache.
        """
        conn.executemany(
            "INSERT OR REPLACE INTO file_stats (abs_path, dev, ino, size, mtime_ns, ctime_ns,"
            " xxh3, cached_at_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (p, r.dev, r.ino, r.size, r.mtime_ns, r.ctime_ns, r.xxh3, r.cached_at_ns)
                for p, r in rows.items()
                if min(r.mtime_ns, r.ctime_ns) >= _INT64_MIN
                and max(r.dev, r.ino, r.mtime_ns, r.ctime_ns, r.cached_at_ns) <= MAX_ID
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


def _stored_key(key: str, repository: str | None) -> str:
    """The ``question_key`` column of a memo: the normalised question, after the identity
    of its repository and a line break when it has one.

    The unique (project, question_key) pair then keeps the memos of two repositories of
    one name apart without rebuilding the memos table; a normalised question never holds
    a line break (white space is collapsed), so the two forms never meet.
    """
    return key if repository is None else f"{repository}\n{key}"


def _question_key_or_null(question: object) -> str | None:
    # A row another program wrote may hold anything; SQL's NULL leaves it as it is.
    return question_key(question) if isinstance(question, str) else None


def _private_folders(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each readable by its owner only."""
    missing: list[Path] = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            path.mkdir(mode=0o700)


def _connect(path: Path, busy_timeout_ms: int, query_only: bool = False) -> sqlite3.Connection:
    """A connection usable from any thread (under the store's locks), in autocommit mode:
    transactions are begun explicitly."""
    conn = sqlite3.connect(
        path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
    )
    if query_only:
        try:
            conn.execute("PRAGMA query_only = ON")
        except BaseException:
            conn.close()
            raise
    return conn


def _private_file(path: Path) -> None:
    """Create a new database file readable and writable by its owner only.

    SQLite gives its -wal and -shm files the database file's permissions. An
    existing file is left to :func:`_owner_only`; a file that cannot be
    created here is for SQLite to report.
    """
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))


def _owner_only(path: Path) -> None:
    """Take group and other permissions off an explomemo database and its -wal and -shm.

    Snapshots are copies of source code: a database made by an earlier
    version (0644) is tightened when it is opened. A file owned by someone
    else cannot be changed and is left as it is.
    """
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        try:
            mode = stat.S_IMODE(os.stat(name).st_mode)
            if mode & 0o077:
                os.chmod(name, mode & 0o700)
        except OSError:
            pass


def _migration_function(migration: Migration):  # type: ignore[no-untyped-def]
    def apply(db) -> None:  # type: ignore[no-untyped-def]
        for statement in _statements(migration.sql):
            db.conn.execute(statement)

    return apply


def _chunks(items: list[int] | list[str]) -> Iterator[list[int] | list[str]]:
    for start in range(0, len(items), _BATCH):
        yield items[start : start + _BATCH]
