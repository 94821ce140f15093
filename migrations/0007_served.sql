-- explomemo schema, version 7: the memos served fresh and whole, and the bytes of
-- their files an agent was spared reading (explomemo stats; see docs/reference.md
-- "Savings").
--
-- One row per memo and session: a memo served again in the same session (by any
-- surface) spares nothing more. A session is what the surface knows of one: the
-- Claude Code session id for the prompt hook, one MCP server process, one CLI
-- command. No foreign key to memos: what was spared stays counted when the memo
-- is forgotten or replaced.
CREATE TABLE served (
    session TEXT NOT NULL,
    memo_id INTEGER NOT NULL,
    project TEXT NOT NULL,
    -- recall (the tool or explomemo recall), show (the tool or explomemo show),
    -- prompt (the Claude Code prompt hook).
    surface TEXT NOT NULL,
    -- The recorded sizes of the memo's files, less those the agent had read anyway.
    bytes_spared INTEGER NOT NULL,
    served_at TEXT NOT NULL,
    PRIMARY KEY (session, memo_id)
) WITHOUT ROWID;

CREATE INDEX served_by_project ON served (project, surface);
