"""Checking memos: is every recorded file still byte-identical? The one stale pipeline."""
