"""What changed in a stale memo's files: diffs, content snapshots and git history."""
