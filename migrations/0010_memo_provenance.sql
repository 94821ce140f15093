-- explomemo schema, version 10: where a memo came from, said wherever it is shown.
--
-- origin gains 'subagent' (a delegated run that edited nothing, captured at SubagentStop);
-- imported is 1 for a memo that came in through `import`: the claim of whoever committed
-- the export, not a memo recorded here (memos imported before this version cannot be told
-- apart and stay 0); agent_type is the subagent's type (Explore, Plan, ...) and
-- cost_tokens what its run cost, when known.
--
-- SQLite cannot change a CHECK constraint in place, so the table is rebuilt. Migrations
-- run in one transaction with foreign keys on (0005 relies on their cascades), where
-- dropping the old table deletes every row that refers to a memo: those rows are kept
-- aside and put back. The table's triggers and index go with it and are made again.

CREATE TABLE memos_0010 (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL,
    question TEXT NOT NULL,
    -- The question trimmed, with white space collapsed, NFKC and case-folded, after the
    -- repository identity and a line break for a memo of a known repository (0008).
    question_key TEXT NOT NULL,
    conclusion TEXT NOT NULL,
    root TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    -- float32 little-endian vector, the model that made it, and the xxh3-128 of
    -- the text it was made from, so an unchanged memo is never embedded twice.
    embedding BLOB,
    embedding_model TEXT,
    embedding_text_hash TEXT,
    question_embedding BLOB,
    origin TEXT NOT NULL DEFAULT 'agent'
        CHECK (origin IN ('agent', 'transcript', 'subagent')),
    repository TEXT,
    imported INTEGER NOT NULL DEFAULT 0 CHECK (imported IN (0, 1)),
    agent_type TEXT,
    cost_tokens INTEGER CHECK (cost_tokens IS NULL OR cost_tokens >= 0),
    UNIQUE (project, question_key)
);

INSERT INTO memos_0010 (
    id, project, question, question_key, conclusion, root, recorded_at, embedding,
    embedding_model, embedding_text_hash, question_embedding, origin, repository
)
SELECT
    id, project, question, question_key, conclusion, root, recorded_at, embedding,
    embedding_model, embedding_text_hash, question_embedding, origin, repository
FROM memos;

CREATE TEMP TABLE kept_memo_files AS SELECT * FROM memo_files;
CREATE TEMP TABLE kept_memo_identifiers AS SELECT * FROM memo_identifiers;
CREATE TEMP TABLE kept_memos_without_identifiers AS SELECT * FROM memos_without_identifiers;
CREATE TEMP TABLE kept_memos_without_repository AS SELECT * FROM memos_without_repository;

DROP TABLE memos;

ALTER TABLE memos_0010 RENAME TO memos;

CREATE INDEX memos_by_repository ON memos (project, repository);

-- A call that names no project takes the one under which this repository's memos are kept
-- (docs/reference.md "Project identity"): found by identity, before any project is known.
CREATE INDEX memos_by_identity ON memos (repository, project);

INSERT INTO memo_files SELECT * FROM temp.kept_memo_files;
INSERT INTO memo_identifiers SELECT * FROM temp.kept_memo_identifiers;
INSERT INTO memos_without_identifiers SELECT * FROM temp.kept_memos_without_identifiers;
INSERT INTO memos_without_repository SELECT * FROM temp.kept_memos_without_repository;
DROP TABLE temp.kept_memo_files;
DROP TABLE temp.kept_memo_identifiers;
DROP TABLE temp.kept_memos_without_identifiers;
DROP TABLE temp.kept_memos_without_repository;

CREATE TRIGGER memos_inserted AFTER INSERT ON memos BEGIN
    UPDATE memo_version SET version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER memos_updated AFTER UPDATE ON memos BEGIN
    UPDATE memo_version SET version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER memos_deleted AFTER DELETE ON memos BEGIN
    UPDATE memo_version SET version = version + 1 WHERE id = 1;
END;

-- Readers that keep memos in memory compare this number: the rebuilt table is new to them.
UPDATE memo_version SET version = version + 1 WHERE id = 1;

-- A delegated run answered from a memo (surface 'delegation', by the Claude Code delegate
-- hook; see docs/reference.md "stats"). fresh is 0 for an answer from a stale memo: the
-- run went on with the memo and its diffs handed to it, so the memo was served and spared
-- nothing. tokens_spared is what the run that made a fresh memo cost (memos.cost_tokens
-- when it was served, kept here: the memo may be replaced or forgotten since), 0 when
-- stale or unknown. Every row before this version is a fresh memo served whole by a
-- surface that spares bytes.
ALTER TABLE served ADD COLUMN fresh INTEGER NOT NULL DEFAULT 1 CHECK (fresh IN (0, 1));
ALTER TABLE served ADD COLUMN tokens_spared INTEGER NOT NULL DEFAULT 0
    CHECK (tokens_spared >= 0);

-- The files a record's contents give a git blob id to (Store.set_git_blobs, after each
-- record): without it that update reads every row of the same content, hundreds for a file
-- most memos rest on, and keeps the write lock meanwhile (19 ms a record at 100,000 memos).
CREATE INDEX memo_files_without_blob ON memo_files (sha256) WHERE git_blob IS NULL;
