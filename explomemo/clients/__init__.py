"""Coding clients: setup of Claude Code, Cursor and Codex, the hooks, and transcripts."""
