-- explomemo schema, version 1.
-- Paths are relative to the memo's root with '/' separators; digests are lowercase hex.

CREATE TABLE memos (
    id INTEGER PRIMARY KEY,
    project TEXT NOT NULL,
    question TEXT NOT NULL,
    -- The question trimmed, with white space collapsed and case-folded:
    -- "the same question" of docs/reference.md (NFKC as well since 0005).
    question_key TEXT NOT NULL,
    conclusion TEXT NOT NULL,
    root TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    -- float32 little-endian vector, the model that made it, and the xxh3-128 of
    -- the text it was made from, so an unchanged memo is never embedded twice.
    embedding BLOB,
    embedding_model TEXT,
    embedding_text_hash TEXT,
    UNIQUE (project, question_key)
);

CREATE TABLE memo_files (
    memo_id INTEGER NOT NULL REFERENCES memos (id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    xxh3 TEXT NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (memo_id, path)
) WITHOUT ROWID;

-- The stat cache of the validity engine, as git's index keeps one: a file whose
-- stat is identical to the entry's (and not racy) has the entry's digests.
CREATE TABLE file_stats (
    abs_path TEXT PRIMARY KEY,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    xxh3 TEXT NOT NULL,
    cached_at_ns INTEGER NOT NULL
) WITHOUT ROWID;

-- Vectors by xxh3-128 of (model id, text): the same text is never embedded twice.
CREATE TABLE embedding_cache (
    key TEXT PRIMARY KEY,
    vector BLOB NOT NULL
) WITHOUT ROWID;

-- Word-overlap search (BM25). rowid is the memo id.
CREATE VIRTUAL TABLE memos_fts USING fts5 (
    question,
    conclusion,
    paths,
    project UNINDEXED,
    tokenize = 'porter unicode61'
);
