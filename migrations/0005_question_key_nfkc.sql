-- "The same question" is now equal after Unicode NFKC normalization, case
-- folding, trimming and collapsing white space (explomemo.inputs.question_key,
-- which the store registers on the connection as explomemo_question_key
-- before it migrates). Before, "café" written with a combining accent and
-- "café" written with one character were two memos that looked identical.
--
-- Questions of one project that are now the same: the newest memo stays
-- (latest recorded_at, then the highest id) with its own id, and the older
-- ones are deleted with their files and word-index rows, as a record of the
-- same question replaces the earlier memo.

DELETE FROM memos WHERE id IN (
    SELECT id FROM (
        SELECT id, row_number() OVER (
            PARTITION BY project, explomemo_question_key(question)
            ORDER BY recorded_at DESC, id DESC
        ) AS newness
        FROM memos
        WHERE explomemo_question_key(question) IS NOT NULL
    )
    WHERE newness > 1
);

DELETE FROM memo_files WHERE memo_id NOT IN (SELECT id FROM memos);

DELETE FROM memos_fts WHERE rowid NOT IN (SELECT id FROM memos);

-- The snapshots only the deleted memos rested on (0004 runs before this one).
DELETE FROM snapshots WHERE sha256 NOT IN (SELECT sha256 FROM memo_files);

-- In two steps: a memo's new key may be another memo's old one, and the
-- (project, question_key) pair is unique at every row. No real key starts
-- with a space, so ' ' || id is free. (A question that is not text, which
-- only another program could have written, keeps its key.)
UPDATE memos SET question_key = ' ' || id
WHERE question_key IS NOT coalesce(explomemo_question_key(question), question_key);

UPDATE memos SET question_key = explomemo_question_key(question)
WHERE question_key LIKE ' %';
