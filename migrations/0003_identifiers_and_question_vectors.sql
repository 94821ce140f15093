-- explomemo schema, version 3: code identifiers as terms of their own, and a
-- second vector per memo (of its question and file names).

-- The vector of the question and file names, float32 like `embedding`, made
-- by the same model (`embedding_model`) at the same time.
ALTER TABLE memos ADD COLUMN question_embedding BLOB;

-- Each identifier a memo holds (case-folded; see explomemo/identifiers.py),
-- so a query naming one finds exactly the memos that hold it and knows how
-- many do.
CREATE TABLE memo_identifiers (
    project TEXT NOT NULL,
    identifier TEXT NOT NULL,
    memo_id INTEGER NOT NULL REFERENCES memos (id) ON DELETE CASCADE,
    PRIMARY KEY (project, identifier, memo_id)
) WITHOUT ROWID;

CREATE INDEX memo_identifiers_by_memo ON memo_identifiers (memo_id);

-- Memos written before this version, whose identifiers are not indexed yet
-- (explomemo indexes them on the next search of their project).
CREATE TABLE memos_without_identifiers (
    memo_id INTEGER PRIMARY KEY REFERENCES memos (id) ON DELETE CASCADE
);

INSERT INTO memos_without_identifiers (memo_id) SELECT id FROM memos;

-- The word index gains a column for the words inside humped names
-- ("FooError": "foo error"), which the tokenizer would keep as one word.
CREATE VIRTUAL TABLE memos_fts_new USING fts5 (
    question,
    conclusion,
    paths,
    name_parts,
    project UNINDEXED,
    tokenize = 'porter unicode61'
);

INSERT INTO memos_fts_new (rowid, question, conclusion, paths, name_parts, project)
SELECT rowid, question, conclusion, paths, '', project FROM memos_fts;

DROP TABLE memos_fts;

ALTER TABLE memos_fts_new RENAME TO memos_fts;
