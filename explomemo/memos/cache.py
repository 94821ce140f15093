"""The memo cache: record, recall, check and forget memos. The one library the CLI and server call.

A :class:`MemoCache` holds an open :class:`~explomemo.store.database.Store`, a
:class:`~explomemo.check.validity.Validator` (its stat cache stays warm for as long
as the cache lives), the embedding model source, and the memos' vectors
(:class:`~explomemo.recall.vectors.Vectors`: their upkeep off the request path and
the in-memory indexes of the projects it has searched).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from explomemo import inputs
from explomemo.errors import ExplomemoError, InputError, NotFoundError, PathError
from explomemo.files import Opener, Refused, Root, relative_path, resolve_root
from explomemo.inputs import AGENT
from explomemo.projects import ENV as PROJECT_ENV
from explomemo.projects import Caller, project_name, resolve_project
from explomemo.recall.sources import FixedModel, ModelSource
from explomemo.shapes import (
    RECALL_CHARS,
    CheckedFile,
    ForgetResult,
    Match,
    MemoDetail,
    MemoSummary,
    RecallResult,
    RecordedFile,
    RecordResult,
    StaleMemo,
    StaleReport,
    StaleResult,
    StatsResult,
    lean_match,
    match_chars,
    replace,
    shortened,
    to_json,
)
from explomemo.store.database import MAX_ID, FileRow, MemoRow, StatRow, Store, now_iso

# Word search, vectors, snapshots and the validity engine are imported where
# they are used: ``list`` needs none of them, ``stale`` and ``show`` only the
# validity engine, and each costs a short command's start-up.
if TYPE_CHECKING:
    import sqlite3
    from pathlib import Path

    from explomemo.changes.diffs import Limits
    from explomemo.changes.snapshots import SnapshotWriter
    from explomemo.check.validity import Expected, Progress, Seen, Validator
    from explomemo.recall.embeddings import Embedder
    from explomemo.recall.search import Candidate, VectorHits, VectorIndex, WordSearch
    from explomemo.recall.vectors import Computed, MemoVectors, Searched, Vectors

#: The most a record or a recall waits for the model still loading (the shipped one loads
#: in about a second, once per server; a named model may first be downloaded). Past it the
#: memo is stored without vectors, or searched by words, and filled once the model is there.
MODEL_WAIT_SECONDS = 60.0
#: A recall embeds the memos of its project that lack vectors (written by another process:
#: captures, an import) when at most this many do: 10 to 40 ms a memo with the shipped model.
#: A larger backlog is searched by words, counted in ``pending_vectors``, and filled by a
#: server's vector thread or ``explomemo index``.
INLINE_BACKLOG = 32


#: Roots whose expectations a project keeps at once (a server asked about many worktrees).
_EXPECTED_ROOTS = 4


class ProjectFiles:
    """A project's memos and recorded files as of one memo version, kept between requests."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.memos: dict[int, MemoRow] = {}
        self.files: dict[int, list[FileRow]] = {}
        #: What a check under each root (by real path) expects, built once per version.
        self._expected: dict[str, list[Expected]] = {}

    def add(self, memo: MemoRow, files: Sequence[FileRow]) -> None:
        """Take in one memo (new, or replacing the one with its id)."""
        self.memos[memo.id] = memo
        self.files[memo.id] = list(files)
        # A new dict, not clear(): a check in another thread may hold the old one.
        self._expected = {}

    def expected(self, root: Root) -> list[Expected]:
        """What a check of every memo under ``root`` expects of each distinct path."""
        # The dict of this moment: when a record adds a memo meanwhile, what
        # is built here lands in the dict that add() discarded, never in its
        # new one. (list() of a dict's values holds the GIL: an add in another
        # thread cannot change the dict under it.)
        from explomemo.check.validity import expect

        cache = self._expected
        found = cache.get(root.real)
        if found is None:
            found = expect(root, [f for files in list(self.files.values()) for f in files])
            if len(cache) >= _EXPECTED_ROOTS:
                cache.clear()
            cache[root.real] = found
        return found


T = TypeVar("T")


class _Part(Generic[T]):
    """A part of a MemoCache made (and its module imported) when first used, once."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._lock = threading.Lock()
        #: The part, once made.
        self.made: T | None = None

    def get(self) -> T:
        """The part, made now if it was not yet."""
        made = self.made
        if made is None:
            with self._lock:
                if self.made is None:
                    self.made = self._make()
                made = self.made
        return made


class MemoCache:
    """The exploration-memo cache over one database.

    One cache is one session for counting what served memos spared (see
    :mod:`explomemo.memos.savings`): the MCP server keeps one for its process (one
    client session), each CLI command opens its own.
    """

    def __init__(
        self, store: Store, model: ModelSource | None = None, snapshots: bool | None = None
    ) -> None:
        self.store = store
        #: This cache's session key, under which the memos it serves are counted once each.
        self.session = f"process:{os.urandom(8).hex()}"
        # The memos counted in this session already: served again, they cost no write.
        self._counted: set[int] = set()
        self.model: ModelSource = model if model is not None else FixedModel(None)
        self._validator = _Part(self._new_validator)
        # Blob ids and snapshots of recorded contents are stored here, off the
        # request path; ``snapshots`` None follows EXPLOMEMO_SNAPSHOTS.
        self._snapshots = _Part(lambda: self._new_snapshot_writer(snapshots))
        self._vectors = _Part(self._new_vectors)
        # Rebuilt only when the database's memo version moved (any process's
        # record, forget, import or new vectors).
        self._projects: dict[str, ProjectFiles] = {}
        self._cache_lock = threading.Lock()
        self._words = _Part(self._new_word_search)

    def _new_validator(self) -> Validator:
        from explomemo.check.validity import Validator

        return Validator(self.store)

    def _new_snapshot_writer(self, keep: bool | None) -> SnapshotWriter:
        from explomemo.changes.contents import enabled
        from explomemo.changes.snapshots import SnapshotWriter

        return SnapshotWriter(self.store, enabled(os.environ) if keep is None else keep)

    def _new_vectors(self) -> Vectors:
        from explomemo.recall.vectors import Vectors

        return Vectors(self.store)

    @staticmethod
    def _new_word_search() -> WordSearch:
        from explomemo.recall.search import WordSearch

        return WordSearch()

    @property
    def validator(self) -> Validator:
        """The validity engine: its stat cache stays warm for as long as the cache lives."""
        return self._validator.get()

    @property
    def vectors(self) -> Vectors:
        """The memos' vectors: their upkeep off the request path, and the in-memory indexes."""
        return self._vectors.get()

    @classmethod
    def open(
        cls,
        db_path: Path | None = None,
        model: ModelSource | None = None,
        snapshots: bool | None = None,
        *,
        create: bool = True,
    ) -> MemoCache:
        """Open the database at ``db_path`` (default: EXPLOMEMO_DB or the user data dir).

        ``snapshots`` False keeps no content snapshots (default: on unless
        ``EXPLOMEMO_SNAPSHOTS=off``). Without ``create``, a database that does
        not exist is refused rather than created (for commands that only read).
        Memos stored before identities were kept get theirs here, once (see
        :meth:`~explomemo.store.database.Store.assign_repositories`).
        """
        store = Store.open(db_path, create=create)
        try:
            _assign_repositories(store)
        except BaseException:
            store.close()
            raise
        return cls(store, model, snapshots)

    def __enter__(self) -> MemoCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Store the vectors being computed (see :meth:`Vectors.close`), then release the
        database and threads."""
        for part in (self._vectors, self._snapshots, self._validator):
            if part.made is not None:
                part.made.close()
        self.store.close()

    def fill_when_loaded(self, ahead: bool = False) -> None:
        """Once the model is loaded, keep every memo's vectors computed on the vector thread,
        off the request path: those recorded without them, and those any other process
        writes (see :meth:`Vectors.keep_filled`). For a server.

        With ``ahead``, the default project's vectors (of the working directory, as a
        call that names no project and no root gets: :meth:`project_at`) are then read
        into memory before any recall asks for them.
        """
        project = None
        if ahead:
            try:
                project = self.project_at(None, resolve_root(None).path)
            except (ExplomemoError, OSError):
                # No default project here (or the working directory is gone): the
                # first recall names one.
                project = None

        # Taken now: a model loaded after close must find these vectors closed, not make
        # new ones on the closed store.
        vectors = self.vectors

        def loaded(embedder: Embedder) -> None:
            vectors.keep_filled(embedder)
            if project is not None:
                vectors.read_ahead(embedder, project)

        self.model.when_loaded(loaded)

    def fill_embeddings(
        self,
        embedder: Embedder,
        project: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int:
        """Give both vectors of ``embedder``'s model to each memo (of ``project``, or all)
        lacking them, committed a batch at a time; returns how many. ``progress(done,
        total)`` follows it."""
        if project is not None:
            project = project_name(project)
            with self.store.errors(), self.store.read() as conn:
                self.require_project(conn, project, self.store.memos(conn, project=project))
        return self.vectors.fill(embedder, project=project, progress=progress)

    def wait_for_fill(self, timeout: float | None = None) -> bool:
        """Wait until the vector thread has done what it was given: the vectors of the memos
        recorded here, and a server's fill (see :meth:`fill_when_loaded`). False when
        ``timeout`` seconds passed first."""
        return self.vectors.settled(timeout)

    def wait_for_snapshots(self, timeout: float | None = None) -> bool:
        """Wait until the blob ids, snapshots and identifiers of this process's records are
        stored."""
        writer = self._snapshots.made
        return writer is None or writer.wait(timeout)

    def _pending_snapshots(self) -> Callable[[Iterable[str]], Mapping[str, bytes]] | None:
        """What the snapshot writer holds and has not stored yet (nothing, if it never started)."""
        writer = self._snapshots.made
        return None if writer is None else writer.pending

    # Record --------------------------------------------------------------

    def record(
        self,
        *,
        question: str,
        conclusion: str,
        files: list[str],
        project: str | None = None,
        root: str | None = None,
    ) -> RecordResult:
        """Record a conclusion with the SHA-256 of every file it rests on.

        Every rule of docs/reference.md is checked and every file hashed before anything
        is written; the memo, its files and its two vectors land in one transaction.
        A model still loading is waited for (up to :data:`MODEL_WAIT_SECONDS`), so
        the memo is found by meaning from the moment ``record`` answers.
        """
        inputs.check_text("question", question, inputs.MAX_QUESTION)
        inputs.check_text("conclusion", conclusion, inputs.MAX_CONCLUSION)
        where = resolve_root(root)
        project = self.project_at(project, where.path)
        rels = self._relative_files(where, inputs.check_files(files))
        # One Opener for the record's files: each folder is opened once (the same
        # checks as open_regular, without resolving every path again).
        with Opener(where) as opener:
            hashed = [self._hash_for_record(opener, rel, given) for rel, given in rels.items()]
        recorded = [row for row, _, _ in hashed]
        from explomemo.redaction import secret_file

        # A file that holds secrets keeps no snapshot: by its name here, by its content in
        # the snapshot writer's thread (off the request path).
        contents = {
            row.sha256: data
            for row, _, data in hashed
            if data is not None and not secret_file(row.path)
        }
        embedder = self.model.wait(MODEL_WAIT_SECONDS) if self.model.enabled else None
        stored = None
        if embedder is not None:
            stored = self._vectors_of(embedder, question, conclusion, recorded)
        key = inputs.question_key(question)
        entries = {where.absolute(row.path): entry for row, entry, _ in hashed}
        recorded_at = now_iso()
        from explomemo.changes.gitrepo import repository_identity

        repository = repository_identity(where.path, self.store)
        with self.store.errors(), self.store.write() as conn:
            before = self.store.memo_version(conn)
            existing = self.store.find_by_question(conn, project, key, repository)
            memo_id = self.store.save_memo(
                conn,
                memo_id=existing,
                project=project,
                question=question,
                question_key=key,
                conclusion=conclusion,
                root=where.path,
                recorded_at=recorded_at,
                files=recorded,
                # Stored by the snapshot writer's thread once this commits (a
                # search finds the memo by them meanwhile).
                index_identifiers=False,
                # An agent's memo replaces one of the same question whatever its origin.
                origin=AGENT,
                repository=repository,
            )
            vectors: MemoVectors | None = None
            if stored is not None:
                vectors = stored.vectors
                self.store.cache_vectors(conn, stored.fresh)
                self.store.set_embedding(
                    conn,
                    memo_id,
                    vectors.whole,
                    vectors.question,
                    vectors.model_id,
                    vectors.text_hash,
                )
            self.store.save_stat_rows(conn, entries)
            after = self.store.memo_version(conn)
            # In the transaction: the index follows this process's writes in their order.
            self.vectors.recorded(project, before, after, memo_id, vectors)
        self.validator.remember(entries, persist=False)
        memo = MemoRow(
            memo_id, project, question, conclusion, where.path, recorded_at, AGENT, repository
        )
        self._update_in_place(project, before, after, memo, recorded)
        result = RecordResult(
            id=memo_id,
            project=project,
            root=where.path,
            replaced=existing is not None,
            semantic_index=embedder is not None,
            origin=AGENT,
            files=[RecordedFile(path=f.path, sha256=f.sha256, size=f.size) for f in recorded],
        )
        # Last: the writer's thread then works while the answer goes out, not before.
        self._snapshots.get().submit(
            contents, {f.sha256: f.git_blob for f in recorded if f.git_blob}, memo_id
        )
        return result

    def _vectors_of(
        self, embedder: Embedder, question: str, conclusion: str, files: Sequence[FileRow]
    ) -> Computed | None:
        """The vectors of a memo about to be recorded; None (with a warning: the memo is
        stored, and a later fill gives them) when the model fails."""
        from explomemo.recall.vectors import MemoTexts

        texts = MemoTexts.of(question, conclusion, [f.path for f in files])
        try:
            return self.vectors.compute(embedder, texts)
        except ExplomemoError:
            raise
        except Exception as exc:
            # onnxruntime raises its own errors; the memo must not be lost for them.
            _warn(f"could not embed the memo {question[:60]!r}: {exc}")
            return None

    def _relative_files(self, root: Root, files: list[str]) -> dict[str, str]:
        rels: dict[str, str] = {}
        for index, given in enumerate(files):
            if not isinstance(given, str):
                raise PathError(f"files[{index}] is not a string: pass file paths as strings")
            rel = relative_path(root, given, f"files[{index}]")
            rels.setdefault(rel, given)
            if len(rels) > inputs.MAX_FILES:
                raise PathError(
                    f"files names more than {inputs.MAX_FILES} distinct files: record the"
                    f" {inputs.MAX_FILES} the conclusion rests on most"
                )
        return rels

    def _hash_for_record(
        self, opener: Opener, rel: str, given: str
    ) -> tuple[FileRow, StatRow, bytes | None]:
        """The file's row, its stat-cache entry, and its bytes when small enough for a snapshot."""
        from explomemo.changes.contents import SNAPSHOT_MAX_BYTES
        from explomemo.check.validity import digest_entry

        try:
            fd, _ = opener.open(rel)
        except Refused as exc:
            raise PathError(
                f"file {given!r} {exc.reason}: record only regular files inside root"
                f" {opener.root.path!r}"
            ) from None
        try:
            digest, entry = digest_entry(
                fd, sha256=True, limit=inputs.MAX_FILE_BYTES, keep=SNAPSHOT_MAX_BYTES
            )
        finally:
            os.close(fd)
        if digest.size > inputs.MAX_FILE_BYTES:
            raise PathError(
                f"file {given!r} is larger than 32 MiB ({inputs.MAX_FILE_BYTES:,} bytes):"
                " record the smaller files the conclusion rests on"
            )
        assert digest.sha256 is not None
        row = FileRow(rel, digest.sha256, digest.xxh3, digest.size, digest.git_blob)
        return row, entry, digest.content

    def _update_in_place(
        self, project: str, before: int, after: int, memo: MemoRow, files: Sequence[FileRow]
    ) -> None:
        """After this process recorded ``memo``, bring the project's memos and files up to date.

        Only when nothing else wrote in between (the version they were read
        at is the one our transaction started from); otherwise the next
        request reads them again.
        """
        with self._cache_lock:
            snapshot = self._projects.get(project)
            if snapshot is not None:
                if snapshot.version == before:
                    snapshot.add(memo, files)
                    snapshot.version = after
                else:
                    del self._projects[project]

    def _project_files(self, project: str) -> ProjectFiles:
        """A project's memos and files, read again only when some memo changed."""
        with self.store.errors():
            version = self.store.memo_version()
            with self._cache_lock:
                cached = self._projects.get(project)
            if cached is not None and cached.version == version:
                return cached
            with self.store.read() as conn:
                version = self.store.memo_version()
                memos = self.store.memos(conn, project=project)
                files = self.store.all_files(conn, project)
        snapshot = ProjectFiles(version)
        for memo in memos:
            snapshot.add(memo, files.get(memo.id, []))
        with self._cache_lock:
            self._projects[project] = snapshot
        return snapshot

    # Recall ----------------------------------------------------------------

    def recall(
        self,
        *,
        query: str,
        project: str | None = None,
        root: str | None = None,
        limit: int = inputs.DEFAULT_LIMIT,
        include_stale: bool = True,
    ) -> RecallResult:
        """Memos of a project relevant to ``query``, each marked fresh or stale.

        Only memos above the relevance cut-off come back; at similar relevance
        fresh ones rank first. Only the files of those memos are re-checked. The
        first comes whole when it clearly answers, the others lean (see :meth:`show`). A
        model still loading is waited for (up to :data:`MODEL_WAIT_SECONDS`), and the
        project's memos lacking vectors are embedded first when at most
        :data:`INLINE_BACKLOG` do; a larger backlog is searched by words and counted in
        ``pending_vectors``.
        """
        inputs.check_text("query", query, inputs.MAX_QUERY)
        inputs.check_limit(limit)
        where = resolve_root(root)
        project = self.project_at(project, where.path)
        embedder = None
        skipped = self.model.enabled and self.model.skips(
            lambda model: self._needs_model(project, model)
        )
        if self.model.enabled and not skipped:
            embedder = self.model.wait(MODEL_WAIT_SECONDS)
        # Without the model for now (still loading past its wait, or not needed: memos
        # without any vector, too many to embed here), every memo is searched by words.
        later = embedder is None and (skipped or self.model.loading)
        return self._recall(query, project, where, limit, include_stale, embedder, later)

    def _elsewhere(self, asking: Caller, project: str, index: VectorIndex | None) -> int:
        """How many of the memos a search counts as searched by words only (those lacking
        vectors, or all while there is no index) belong to another repository of the
        project's name: they are not searched, so they are not pending for this caller."""
        # The few memos of other repositories, not the repository of every memo pending:
        # while vectors are computed after a burst, thousands are.
        with self.store.errors(), self.store.read() as conn:
            if project != asking.project or not self.store.has_repositories(conn, project):
                return 0  # nothing to compare: git is not run (see Caller)
        here = asking.identity()
        if here is None:
            return 0
        with self.store.errors(), self.store.read() as conn:
            others = self.store.memos_of_other_repositories(conn, project, here)
        return len(others if index is None else others & index.pending)

    def _needs_model(self, project: str, model: str) -> bool:
        """Whether a recall of ``project`` needs ``model``: some memo has its vectors, or
        few enough lack them that the recall embeds them (see :data:`INLINE_BACKLOG`)."""
        with self.store.errors(), self.store.read() as conn:
            if self.store.has_vectors(conn, project, model):
                return True
        return self.vectors.backlog(model, project, INLINE_BACKLOG) <= INLINE_BACKLOG

    def _recall(
        self,
        query: str,
        project: str,
        where: Root,
        limit: int,
        include_stale: bool,
        embedder: Embedder | None,
        later: bool,
    ) -> RecallResult:
        from explomemo.check.stale import checked_files
        from explomemo.recall.search import (
            CANDIDATES,
            clear_score,
            clearly_answers,
            fuse,
            in_tail,
            ranked,
        )
        from explomemo.recall.vectors import query_vector

        vector_hits: VectorHits | None = None
        index: VectorIndex | None = None
        searched: Searched | None = None
        if embedder is not None:
            self.vectors.notice_writes()
            asked = query_vector(embedder, query)
            index = self.vectors.index(embedder, project, len(asked))
            self._catch_up(embedder, project)
            searched = self.vectors.search(index, asked, CANDIDATES)
            vector_hits = searched.hits
        self._words.get().index_identifiers(self.store)
        with self.store.errors(), self.store.read() as conn:
            words = self._words.get().scores(
                self.store,
                conn,
                project,
                query,
                also=(i for i, _ in (vector_hits.hits if vector_hits else ())),
            )
            if searched is not None:
                by_words = self.vectors.searched_by_words(searched, project)
            else:
                by_words = self.store.memo_count(conn, project) if later else 0
        unindexed: set[int] = set()
        if index is not None and by_words:
            unindexed = index.without_vectors(words.scores.keys() | words.identifiers.keys())
        fused = fuse(vector_hits, words, unindexed)
        asking = caller(project, where.path, self.store)
        if by_words:
            by_words -= self._elsewhere(asking, project, index)
        candidates = self._own(asking, project, fused, max(limit * 3, limit + 10))
        files: dict[int, list[FileRow]] = {}
        observed: dict[str, Seen] = {}
        built: dict[int, Match] = {}
        stale_ids: set[int] = set()
        left_out = 0
        done = 0
        while done < len(candidates) and not (
            include_stale and _settled(candidates[done], built, candidates, stale_ids, limit)
        ):
            # Checked a few at a time, best first: once ``limit`` matches rank above
            # every candidate left (a stale memo only ever ranks lower), the rest
            # would not be shown. Without stale memos every one is checked, so
            # ``stale_left_out`` counts them all.
            batch = (
                candidates[done : done + max(1, limit - len(built))]
                if include_stale
                else candidates
            )
            done += len(batch)
            ids = [c.id for c in batch]
            with self.store.errors(), self.store.read() as conn:
                memos = {m.id: m for m in self.store.memos(conn, ids=ids)}
                batch_files = self.store.files_of(conn, ids)
            files.update(batch_files)
            observed.update(self._observe(where, [f for i in ids for f in batch_files.get(i, [])]))
            for candidate in batch:
                memo = memos.get(candidate.id)
                if memo is None:
                    continue
                # A captured turn or run was judged by no one: it comes only when it scores
                # what a clear answer needs (on real sessions the turns below it were never
                # the right memo).
                if memo.origin != AGENT and candidate.score < clear_score(candidate.matched_by):
                    continue
                checked = checked_files(files[memo.id], observed)
                stale = any(f.state != "unchanged" for f in checked)
                if stale and not include_stale:
                    left_out += 1
                    continue
                if stale:
                    stale_ids.add(memo.id)
                built[memo.id] = Match(
                    id=memo.id,
                    question=memo.question,
                    conclusion=memo.conclusion,
                    score=candidate.score,
                    matched_by=candidate.matched_by,
                    status="stale" if stale else "fresh",
                    recorded_at=memo.recorded_at,
                    origin=inputs.check_origin(memo.origin),
                    imported=memo.imported,
                    files=checked,
                )
        order = ranked([c for c in candidates if c.id in built], stale_ids)
        shown = [built[c.id] for c in order[:limit]]
        shown = [m for i, m in enumerate(shown) if in_tail(i, m.score, shown[0].score)]
        result = RecallResult(
            project=project,
            root=where.path,
            # The agent wrote the query: echoed whole, a long prompt would weigh more than
            # every lean match of an answer that finds nothing.
            query=shortened(query),
            semantic_index=embedder is not None,
            pending_vectors=by_words,
            matches=[],
            stale_left_out=left_out,
        )
        describe = self.describer(where, observed)
        count = None
        if stale_ids:
            from explomemo.changes.diffs import COUNTED_ONLY

            # A lean stale match says by how many lines each file changed: counted, no diff.
            count = self.describer(where, observed, COUNTED_ONLY)
        # A captured turn or run was judged by no one (on real sessions their whole
        # answers were wrong, a run's 30 KB and more): it comes lean, and show gives it.
        clear = (
            bool(shown)
            and shown[0].origin == AGENT
            and clearly_answers(
                shown[0].score,
                shown[0].matched_by,
                max((c.score for c in candidates if c.id != shown[0].id), default=None),
            )
        )
        matches: list[Match] = []
        used = len(to_json(result)) + 3
        for found in shown:
            # Matches in rank order while the answer fits; the first always, whole when it
            # clearly answers (an agent judges the others, lean, by their questions).
            room = RECALL_CHARS - used
            if clear and not matches:
                match = replace(found, files=describe(files[found.id], _overrun(found, room)))
            else:
                counted = count(files[found.id], None) if count and found.id in stale_ids else None
                match = lean_match(found, counted)
            size = match_chars(match)
            if matches and size > room:
                break
            matches.append(match)
            used += size
        answer = replace(result, matches=matches, omitted=len(shown) - len(matches))
        self._count_served(
            "recall", project, [m for m in answer.served_whole if m.status == "fresh"]
        )
        return answer

    def _catch_up(self, embedder: Embedder, project: str) -> None:
        """Embed the few memos of ``project`` its index lacks vectors of (see
        :data:`INLINE_BACKLOG`); a model that fails leaves them to be searched by words."""
        try:
            self.vectors.catch_up(embedder, project, INLINE_BACKLOG)
        except ExplomemoError:
            raise
        except Exception as exc:
            _warn(f"could not embed the memos of {project} lacking vectors: {exc}")

    def _own(
        self, asking: Caller, project: str, fused: list[Candidate], wanted: int
    ) -> list[Candidate]:
        """The first ``wanted`` of ``fused`` that do not belong to another repository of the
        caller's project name, looked up a few at a time (not every fused memo)."""
        kept: list[Candidate] = []
        start = 0
        while len(kept) < wanted and start < len(fused):
            chunk = fused[start : start + wanted]
            start += len(chunk)
            with self.store.errors(), self.store.read() as conn:
                held = self.store.repositories_of(conn, [c.id for c in chunk])
            # Before the cut: another repository's memos must not take this one's places.
            kept += [c for c in chunk if not asking.leaves_out(project, held.get(c.id))]
        return kept[:wanted]

    def _count_served(
        self, surface: str, project: str, served: Sequence[Match | MemoDetail]
    ) -> None:
        """Count the fresh memos this session served whole (see :mod:`explomemo.memos.savings`)."""
        from explomemo.memos.savings import count_served

        new = [(m.id, m.files) for m in served if m.id not in self._counted and m.files is not None]
        counted = count_served(
            self.store, session=self.session, surface=surface, project=project, served=new
        )
        if counted is not None:
            self._counted.update(memo_id for memo_id, _ in new)

    def describe(
        self,
        root: Root | None,
        memo_files: Sequence[Sequence[FileRow]],
        changes: dict[str, Seen],
        limits: Limits | None = None,
    ) -> list[list[CheckedFile]]:
        """The files of each memo with their states, diffs and moves, in order.

        ``changes`` is what :meth:`Validator.observe` found; ``limits`` default
        to what an agent gets (see :mod:`explomemo.changes.diffs`), and the diffs of
        all the memos share one budget.
        """
        describe = self.describer(root, changes, limits)
        return [describe(files, None) for files in memo_files]

    def describer(
        self, root: Root | None, changes: dict[str, Seen], limits: Limits | None = None
    ) -> Callable[
        [Sequence[FileRow], Callable[[list[CheckedFile]], int] | None], list[CheckedFile]
    ]:
        """What describes one memo's files after another (see :meth:`describe`), the
        memos sharing one budget spent in the order they come; given an ``excess``, a
        memo's diffs are cut further to fit (see :meth:`ChangeFinder.check_within`)."""
        if not changes:
            # Every file unchanged: nothing to describe (and the diff
            # machinery, a tenth of ``show``'s start-up, is not imported).
            from explomemo.check.stale import checked_files

            return lambda files, _excess: checked_files(files, changes)
        from explomemo.changes.diffs import AGENT_LIMITS, ChangeFinder
        from explomemo.check.validity import state_of

        finder = ChangeFinder(self.store, limits or AGENT_LIMITS, self._pending_snapshots())

        def describe(
            files: Sequence[FileRow], excess: Callable[[list[CheckedFile]], int] | None
        ) -> list[CheckedFile]:
            states = [(f, state_of(changes, f)) for f in files]
            if excess is None:
                return finder.check(root, states)
            return finder.check_within(root, states, excess)

        return describe

    def stale_changes(
        self, report: StaleReport, root: str | None = None, limits: Limits | None = None
    ) -> dict[int, list[CheckedFile]]:
        """The files of each stale memo of ``report`` with their diffs and moves, by memo id
        (a memo forgotten since the report is left out).

        ``root`` as given to :meth:`stale_report`; all the diffs share one
        budget, ``limits`` (default: an agent answer's, see :mod:`explomemo.changes.diffs`).
        """
        from explomemo.changes.diffs import AGENT_LIMITS, ChangeFinder, stale_changes

        where = _checking_roots(root)
        ids = [entry.id for entry in report.stale]
        with self.store.errors(), self.store.read() as conn:
            memos = {m.id: m for m in self.store.memos(conn, ids=ids)}
            files = self.store.files_of(conn, ids)
        by_id = {i: where(memo) for i, memo in memos.items()}
        finder = ChangeFinder(self.store, limits or AGENT_LIMITS, self._pending_snapshots())
        # A memo another process forgot since the report has no files left to describe.
        still = [entry for entry in report.stale if entry.id in memos]
        return stale_changes(finder, still, files, by_id)

    def _observe(self, root: Root | None, files: Iterable[FileRow]) -> dict[str, Seen]:
        """The files that may not hold their recorded content (see
        :func:`~explomemo.check.stale.observe`)."""
        from explomemo.check.stale import observe

        return observe(self.validator, root, files)

    # Stale ---------------------------------------------------------------

    def stale(self, *, project: str | None = None, root: str | None = None) -> StaleResult:
        """Check every memo of a project against ``root``; list the stale ones.

        One stat per distinct file when nothing changed; each changed file is
        read once however many memos share it.
        """
        from explomemo.check.stale import check_memos

        where = resolve_root(root)
        project = self.project_at(project, where.path)
        snapshot = self._project_files(project)
        asking = caller(project, where.path, self.store)
        report = check_memos(
            [m for m in snapshot.memos.values() if not asking.leaves_out(m.project, m.repository)],
            snapshot.files,
            where,
            self.validator,
            expected=snapshot.expected(where),
        )
        return StaleResult(
            project=project,
            root=where.path,
            checked=report.checked,
            stale=[
                StaleMemo(id=e.id, question=e.question, changed=e.changed, missing=e.missing)
                for e in report.stale
            ],
        )

    def stale_report(
        self,
        *,
        project: str | None = None,
        root: str | None = None,
        progress: Progress | None = None,
        require_memos: bool = False,
    ) -> StaleReport:
        """Check every memo (of a project, or all) for ``explomemo stale``.

        With ``root`` every memo is checked against it; without, each memo
        against the root it was recorded in (a root that no longer exists
        makes its memos' files missing). ``progress`` as for
        :func:`~explomemo.check.stale.check_memos`. With ``require_memos`` (a
        CI gate: a check of nothing must not pass) a database without memos is
        refused.
        """
        from explomemo.check.stale import check_memos

        if project is not None:
            project = project_name(project)
        where = _checking_roots(root)
        askers = self._askers(project, root)
        with self.store.errors(), self.store.read() as conn:
            memos = self.store.memos(conn, project=project)
            self.require_project(conn, project, memos)
            files = self.store.all_files(conn, project)
        if require_memos and not memos:
            raise NotFoundError(
                f"database {self.store.path} holds no memo, so there is nothing to check:"
                " record memos first, or check the database path (--db, $EXPLOMEMO_DB)"
            )
        kept = [m for m in memos if not askers(m).leaves_out(m.project, m.repository)]
        if require_memos and not kept:
            raise NotFoundError(left_no_memo(f"database {self.store.path}", askers(memos[0])))
        return check_memos(kept, files, where, self.validator, progress=progress)

    def _askers(self, project: str | None, root: str | None) -> Callable[[MemoRow], Caller]:
        """Who asks about each memo in a check: the caller at ``root`` when given; without,
        each memo is checked under its recorded root, so that root asks (a memo whose
        recorded root now holds another repository of its name is left out)."""
        if root is not None:
            fixed = caller(project, root, self.store)
            return lambda memo: fixed
        found: dict[tuple[str, str], Caller] = {}

        def recorded(memo: MemoRow) -> Caller:
            key = (memo.root, memo.project)
            if key not in found:
                found[key] = caller(memo.project, memo.root, self.store)
            return found[key]

        return recorded

    def require_project(
        self, conn: sqlite3.Connection, project: str | None, found: Sequence[MemoRow]
    ) -> None:
        """Refuse a named ``project`` without memos in the database (see
        :func:`require_project`); ``found`` are its memos, read through ``conn``."""
        require_project(
            project,
            found,
            f"database {self.store.path}",
            lambda: self.store.projects(conn),
            "record memos first, or check the database path (--db, $EXPLOMEMO_DB)",
        )

    # Forget, list, show --------------------------------------------------

    def forget(
        self, *, memo_id: int, project: str | None = None, any_project: bool = False
    ) -> ForgetResult:
        """Delete one memo of ``project`` (default: see :mod:`explomemo.projects`, from the
        working directory), or of whichever project holds it when ``any_project``."""
        if not any_project:
            project = resolve_project(project, resolve_root(None).path)
        with self.store.errors(), self.store.write() as conn:
            found = self.store.memos(conn, ids=[memo_id]) if 1 <= memo_id <= MAX_ID else []
            owner = found[0].project if found else None
            deleted = owner is not None and (any_project or owner == project)
            if deleted:
                self.store.delete_memo(conn, owner, memo_id)
        if not deleted:
            of = "" if any_project else f" in project {project!r}"
            raise NotFoundError(
                f"no memo with id {memo_id}{of}: list the ids with explomemo list (or recall first)"
            )
        assert owner is not None
        return ForgetResult(id=memo_id, project=owner)

    def project_at(self, project: str | None, root: str) -> str:
        """The project a call at ``root`` works on: see :func:`project_at`."""
        return project_at(self.store, project, root)

    def list(
        self, *, project: str | None = None, origin: str | None = None, root: str | None = None
    ) -> list[MemoSummary]:
        """Every memo (of a project, or all; of one origin, when given), without re-hashing,
        but those of another repository of the project name used at ``root`` (default: the
        working directory)."""
        if project is not None:
            project = project_name(project)
        if origin is not None:
            origin = inputs.check_origin(origin)
        asking = caller(project, root, self.store)
        with self.store.errors(), self.store.read() as conn:
            memos = [
                m
                for m in self.store.memos(conn, project=project)
                if not asking.leaves_out(m.project, m.repository)
            ]
            counts = dict(
                conn.execute("SELECT memo_id, count(*) FROM memo_files GROUP BY memo_id").fetchall()
            )
        return [
            MemoSummary(
                id=m.id,
                project=m.project,
                question=m.question,
                root=m.root,
                recorded_at=m.recorded_at,
                origin=inputs.check_origin(m.origin),
                imported=m.imported,
                agent_type=m.agent_type,
                cost_tokens=m.cost_tokens,
                files=counts.get(m.id, 0),
            )
            for m in memos
            if origin is None or m.origin == origin
        ]

    def show(
        self,
        memo_id: int,
        root: str | None = None,
        limits: Limits | None = None,
        *,
        project: str | None = None,
        any_project: bool = True,
        served: bool = True,
    ) -> MemoDetail:
        """One memo in full, its files checked against ``root`` (default: its recorded root).

        Changed files carry their diffs within ``limits`` (default: what an
        agent gets; :data:`explomemo.changes.diffs.NO_LIMITS` for ``explomemo diff``).
        Without ``any_project`` (the MCP tool) the memo must be of ``project``
        (default: see :mod:`explomemo.projects`), and ``root`` defaults to the working
        directory, as for :meth:`recall`. A fresh memo shown is counted as served (see
        :mod:`explomemo.memos.savings`) unless ``served`` is False (``explomemo diff``
        shows no conclusion).
        """
        where: Root | None = None
        if not any_project:
            where = resolve_root(root)
            project = self.project_at(project, where.path)
        found: list[MemoRow] = []
        if 1 <= memo_id <= MAX_ID:
            with self.store.errors(), self.store.read() as conn:
                found = self.store.memos(conn, ids=[memo_id])
                files = self.store.files_of(conn, [memo_id]).get(memo_id, [])
        if not any_project and found:
            assert where is not None
            asking = caller(project, where.path, self.store)
            # Another repository's memo of that name is not this project's, as for recall.
            if found[0].project != project or asking.leaves_out(project, found[0].repository):
                found = []
        if not found:
            of = "" if any_project else f" in project {project!r}"
            raise NotFoundError(
                f"no memo with id {memo_id}{of}: list the ids with explomemo list (or recall first)"
            )
        memo = found[0]
        if any_project:
            where = resolve_root(root) if root is not None else _recorded_root(memo.root)
        (checked,) = self.describe(where, [files], self._observe(where, files), limits)
        detail = MemoDetail(
            id=memo.id,
            project=memo.project,
            question=memo.question,
            conclusion=memo.conclusion,
            root=memo.root,
            recorded_at=memo.recorded_at,
            origin=inputs.check_origin(memo.origin),
            imported=memo.imported,
            agent_type=memo.agent_type,
            cost_tokens=memo.cost_tokens,
            status="fresh" if all(f.state == "unchanged" for f in checked) else "stale",
            files=checked,
        )
        if served and detail.status == "fresh":
            self._count_served("show", memo.project, [detail])
        return detail

    # Stats ---------------------------------------------------------------

    def stats(self, *, project: str | None = None) -> StatsResult:
        """Each project's memos (fresh and stale, as :meth:`stale_report` finds them, by
        origin) and what serving them spared, per surface (of one project, or all)."""
        from explomemo.memos.savings import project_stats

        report = self.stale_report(project=project)
        if project is not None:
            project = project_name(project)
        with self.store.errors(), self.store.read() as conn:
            memos = self.store.memos(conn, project=project)
            served = self.store.served_totals(conn, project)
            sessions = self.store.spared_sessions(conn, project)
        return StatsResult(projects=project_stats(memos, report, served, sessions))


def _warn(message: str) -> None:
    """Log a warning (logging is imported only then: ``list`` and ``stale`` start without it)."""
    import logging

    logging.getLogger("explomemo").warning("%s", message)


def _assign_repositories(store: Store) -> None:
    with store.errors():
        with store.read() as conn:
            if not store.repositories_pending(conn):
                return
        from explomemo.changes.gitrepo import repository_identity

        with store.write() as conn:
            # Read again under the write lock: another process may have done it.
            if store.repositories_pending(conn):
                store.assign_repositories(conn, repository_identity)


def project_at(
    store: Store | None, project: str | None, root: str, *, remember: bool = True
) -> str:
    """The project a call at ``root`` works on (see :mod:`explomemo.projects`): ``project``
    when given, else ``$EXPLOMEMO_PROJECT``, else the one project under which ``store``
    holds memos of the repository at ``root`` (same identity), else the name of the
    repository's main work tree. So a clone in a folder of another name finds the memos
    it imported. With ``remember`` False nothing is written to ``store`` (the repository's
    identity is found without keeping it there)."""
    if store is None or project is not None or os.environ.get(PROJECT_ENV, "").strip():
        return resolve_project(project, root)
    from explomemo.changes.gitrepo import repository_identity

    identity = repository_identity(root, store if remember else None)
    if identity is not None:
        with store.errors(), store.read() as conn:
            holding = store.projects_of_repository(conn, identity)
        if len(holding) == 1:
            return holding[0]
    return resolve_project(None, root)


def caller(project: str | None, root: str | None, store: Store | None = None) -> Caller:
    """The :class:`~explomemo.projects.Caller` of a call at ``root`` (default: the working
    directory) on ``project`` (default: that of ``root``); ``store`` keeps what finding the
    identity took (see :func:`~explomemo.changes.gitrepo.repository_identity`). A root that
    cannot be resolved, or whose project has no name, leaves nothing out: a command that
    checks each memo under its recorded root needs no usable working directory."""
    try:
        where = resolve_root(root).path
        name: str | None = resolve_project(project, where)
    except InputError:
        return Caller(None, lambda: None)

    def identity() -> str | None:
        # Imported only when a memo has an identity to compare: git is not run otherwise.
        from explomemo.changes.gitrepo import repository_identity

        return repository_identity(where, store)

    return Caller(name, identity)


def left_no_memo(source: str, asking: Caller) -> str:
    """Why a check that the identity rule left with no memo of ``source`` has nothing to
    check, and what to do."""
    return (
        f"{source} holds memos of project {asking.project!r} only from another repository"
        f" of that name (root commit not {asking.identity()}), so there is nothing to check"
        " here: record memos in this repository, or check from a clone of the one they"
        " were recorded in"
    )


def _settled(
    following: Candidate,
    built: Mapping[int, Match],
    candidates: Sequence[Candidate],
    stale: Container[int],
    limit: int,
) -> bool:
    """Whether ``limit`` of the matches ``built`` so far rank above ``following`` (and so
    above every candidate after it: candidates come in their order as if fresh, and a
    stale memo only ranks lower)."""
    from explomemo.recall.search import rank_key

    if len(built) < limit:
        return False
    keys = sorted(rank_key(c, stale) for c in candidates if c.id in built)
    return keys[limit - 1] < rank_key(following, ())


def _overrun(match: Match, room: int) -> Callable[[list[CheckedFile]], int]:
    """How far ``match`` with the files described is over ``room`` characters."""
    return lambda files: match_chars(replace(match, files=files)) - room


#: How many of a source's project names a refused ``--project`` lists.
SHOWN_PROJECTS = 10


def require_project(
    project: str | None,
    found: Sequence[object],
    source: str,
    projects: Callable[[], Iterable[str]],
    when_empty: str,
) -> None:
    """Refuse a ``project`` that was named but has no memo (``found`` is empty) in
    ``source`` (``database PATH``, ``export file PATH``).

    A misspelt name must neither pass a CI check with nothing to check nor
    empty a committed export. The refusal lists the projects ``source``
    holds (``projects`` is called only then); when it holds none, it ends with
    ``when_empty``, the fix for that.
    """
    if project is None or found:
        return
    names = sorted(set(projects()))
    if not names:
        raise NotFoundError(
            f"project {project!r} has no memos in {source}, which holds none: {when_empty}"
        )
    shown = ", ".join(repr(name) for name in names[:SHOWN_PROJECTS])
    if len(names) > SHOWN_PROJECTS:
        shown += f" and {len(names) - SHOWN_PROJECTS} more"
    raise NotFoundError(
        f"project {project!r} has no memos in {source}, whose projects are {shown}:"
        " check the name and pass one of those to --project"
    )


def _checking_roots(root: str | None) -> Callable[[MemoRow], Root | None]:
    """Where each memo is checked: under ``root`` when given (resolved now, so a bad one is
    refused before anything is read), else under the root it was recorded in, each
    resolved once (None when it no longer exists)."""
    if root is not None:
        fixed = resolve_root(root)
        return lambda memo: fixed
    found: dict[str, Root | None] = {}

    def recorded(memo: MemoRow) -> Root | None:
        if memo.root not in found:
            found[memo.root] = _recorded_root(memo.root)
        return found[memo.root]

    return recorded


def _recorded_root(path: str) -> Root | None:
    try:
        return resolve_root(path)
    except PathError:
        return None
