-- explomemo schema, version 8: a memo keeps the identity of the repository it was
-- recorded in, its first root commit (see docs/reference.md "Project identity"), so
-- another repository of the same folder name never gets it.
--
-- NULL: unknown (recorded outside git, in a shallow clone, or under a root whose
-- repository no longer exists), which matches any repository. A memo of a known
-- repository stores its question_key after that identity and a line break (see
-- explomemo/store/database.py, _stored_key): the unique (project, question_key) pair
-- then holds one memo per question and repository.
ALTER TABLE memos ADD COLUMN repository TEXT;

-- Memos stored before this version. explomemo gives each the identity of its recorded
-- root, where that repository still exists, right after migrating (git is run from
-- Python, not from SQL), in one transaction that empties this table: once.
CREATE TABLE memos_without_repository (
    memo_id INTEGER PRIMARY KEY REFERENCES memos (id) ON DELETE CASCADE
);

INSERT INTO memos_without_repository (memo_id) SELECT id FROM memos;

-- A cache: the commit at HEAD last found under each root (a real path) and its first
-- root commit, so a new process walks only the history since (a commit's roots never
-- change). Losing a row costs one walk of the history, never a wrong identity.
CREATE TABLE repository_heads (
    root TEXT PRIMARY KEY,
    head TEXT NOT NULL,
    identity TEXT NOT NULL
) WITHOUT ROWID;
