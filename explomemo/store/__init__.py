"""The store: the SQLite database of memos, its migrations and every read and write."""
