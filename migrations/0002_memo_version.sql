-- A counter that moves whenever any memo (or its vector) changes, in any process.
-- Servers keep a project's memos, files and vectors in memory and rebuild them
-- only when it moved: one cheap read per request instead of re-reading tables.

CREATE TABLE memo_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
);

INSERT INTO memo_version (id, version) VALUES (1, 0);

CREATE TRIGGER memos_inserted AFTER INSERT ON memos BEGIN
    UPDATE memo_version SET version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER memos_updated AFTER UPDATE ON memos BEGIN
    UPDATE memo_version SET version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER memos_deleted AFTER DELETE ON memos BEGIN
    UPDATE memo_version SET version = version + 1 WHERE id = 1;
END;
