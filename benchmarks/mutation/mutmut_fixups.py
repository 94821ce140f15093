"""A pytest plugin for mutation runs only (``-p mutmut_fixups``; run.py sets it up).

mutmut runs the suite again and again in forked children of one process that
imported everything once, and tells the code which mutant is active through
``MUTANT_UNDER_TEST``, which child processes inherit. Three things follow that
have nothing to do with any mutant, and each would fail tests that pass:

* The MCP SDK's ``stdio_client`` takes ``sys.stderr`` as a default argument,
  bound when it was imported: in a later child that is a capture stream
  mutmut has closed since. Before each test the default is set to the
  ``sys.stderr`` of the moment, as a fresh process would have it.
* The tests run in another order than pytest's (mutmut passes them as a set),
  so the garbage a test leaves (a connection or a pipe not closed, caught in a
  reference cycle) can be collected in the middle of another one that counts
  its open descriptors. The garbage is collected before each test.
* While mutmut learns which tests call which function (``stats``), the
  mutated code records each call, and a child process that a test starts
  (``explomemo serve``, the CLI) would look for mutmut's settings in its own
  working directory and stop when there are none. What it records could not
  reach mutmut anyway: the variable is taken from the environment (this
  process keeps its own copy), so children run the original code.

A mutant also skips the tests that took longer than run.py's ``--slow-limit``
(``MUTATION_SLOW_LIMIT`` seconds) when mutmut measured them: they still run
while mutmut learns which tests call which function and in the clean run.
A test run against a mutant fails after ``MUTANT_TEST_SECONDS``.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest


def _slow_tests() -> frozenset[str]:
    """The tests a mutant does not run: slower than ``MUTATION_SLOW_LIMIT`` seconds in
    mutmut's measure (none while mutmut measures or runs the clean suite)."""
    return _listed(os.environ.get("MUTANT_UNDER_TEST", ""))


@functools.cache
def _listed(mutant: str) -> frozenset[str]:
    limit = float(os.environ.get("MUTATION_SLOW_LIMIT", "0"))
    here = Path(__file__).resolve().parent
    found = (here / "mutmut-stats.json", here / "mutants" / "mutmut-stats.json")
    if "__mutmut_" not in mutant or limit <= 0 or not any(p.exists() for p in found):
        return frozenset()
    durations = json.loads(next(p for p in found if p.exists()).read_text())["duration_by_test"]
    return frozenset(test for test, seconds in durations.items() if seconds > limit)


def pytest_sessionstart(session: Any) -> None:
    from mutmut.mutation import trampoline

    if os.environ.get("MUTANT_UNDER_TEST") == "stats":
        trampoline._mutant_under_test = "stats"  # mutmut 3.8.1's own copy (pinned)
        del os.environ["MUTANT_UNDER_TEST"]


#: Seconds a test may take against a mutant (pytest-timeout): a mutant that makes a
#: thread wait for ever uses no CPU, so mutmut's CPU-time limit never stops it.
MUTANT_TEST_SECONDS = 20


def pytest_collection_modifyitems(items: list[Any]) -> None:
    if "__mutmut_" in os.environ.get("MUTANT_UNDER_TEST", ""):
        for item in items:
            item.add_marker(pytest.mark.timeout(MUTANT_TEST_SECONDS), append=False)


def pytest_runtest_setup(item: Any) -> None:
    if item.nodeid in _slow_tests():
        pytest.skip("slower than run.py --slow-limit: not run against mutants")
    gc.collect()
    module = sys.modules.get("mcp.client.stdio")
    inner = getattr(getattr(module, "stdio_client", None), "__wrapped__", None)
    if inner is not None and inner.__defaults__ is not None:
        inner.__defaults__ = (sys.stderr,)
