"""A pytest plugin for mutation runs only (``-p mutmut_fixups``; run.py sets it up).

mutmut runs the suite again and again in forked children of one process that
imported everything once. The MCP SDK's ``stdio_client`` takes ``sys.stderr``
as a default argument, bound when it was imported: in a later child that is a
capture stream mutmut has closed since, and every test that starts a server
over stdio would fail on it, mutant or not. Before each test the default is
set to the ``sys.stderr`` of the moment, as a fresh process would have it.
"""

from __future__ import annotations

import sys
from typing import Any


def pytest_runtest_setup(item: Any) -> None:
    module = sys.modules.get("mcp.client.stdio")
    inner = getattr(getattr(module, "stdio_client", None), "__wrapped__", None)
    if inner is not None and inner.__defaults__ is not None:
        inner.__defaults__ = (sys.stderr,)
