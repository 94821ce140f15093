"""explomemo: an exploration-memo cache for coding agents, keyed by file hashes.

The library is :class:`explomemo.memos.MemoCache`; the MCP server
(:mod:`explomemo.server`) and the CLI (:mod:`explomemo.cli`) only parse,
call it and print.
"""

__version__ = "0.1.0"
