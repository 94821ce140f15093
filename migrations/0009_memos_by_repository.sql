-- explomemo schema, version 9: memos found by project and repository identity. A recall
-- counts the memos it searched by words only (pending_vectors) and leaves out those of
-- another repository of the project's name: with this index that is two short range
-- reads, not a read of every memo's row (21 ms at 10,000 memos, on every recall while
-- vectors are being computed after a burst).
CREATE INDEX memos_by_repository ON memos (project, repository);
