-- Where each memo came from: 'agent' (memory_exploration_record, explomemo
-- record) or 'transcript' (captured by the Claude Code Stop hook from a turn).
-- Every memo stored before this migration was recorded by an agent.

ALTER TABLE memos ADD COLUMN origin TEXT NOT NULL DEFAULT 'agent'
    CHECK (origin IN ('agent', 'transcript'));
