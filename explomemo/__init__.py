"""explomemo: an exploration-memo cache for coding agents, keyed by file hashes.

The library is :class:`explomemo.memos.cache.MemoCache`; the MCP server
(:mod:`explomemo.server.tools`) and the CLI (:mod:`explomemo.cli.main`) only parse,
call it and print.
"""

__version__ = "0.1.0"
