-- What a stale memo needs to show what changed (see README "What is stored").
--
-- Each recorded file keeps its git blob id (SHA-1 of "blob <size>\0" + content,
-- lowercase hex), computed from the bytes whose SHA-256 was recorded. Rows
-- written before this migration have none (NULL): their diffs come from the
-- root's git history, found by the recorded size and SHA-256.
ALTER TABLE memo_files ADD COLUMN git_blob TEXT;

-- Which memos rest on a content: snapshots are deleted when none does any more.
CREATE INDEX memo_files_by_sha256 ON memo_files (sha256);

-- A compressed copy of each distinct recorded content (files up to 1 MiB),
-- stored once per SHA-256 however many memos read it.
CREATE TABLE snapshots (
    sha256 TEXT PRIMARY KEY,
    codec TEXT NOT NULL,
    data BLOB NOT NULL
);
