"""docs/reference.md is the contract: it names every tool, command and variable there is."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from explomemo.cli.main import build_parser
from explomemo.server.tools import RECORD_DESCRIPTION, create_server

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"


EXPLOMEMO = Path(__file__).resolve().parent.parent / "explomemo"


def _text() -> str:
    return " ".join(REFERENCE.read_text(encoding="utf-8").split())


def test_reference_quotes_the_record_description() -> None:
    assert f'"{RECORD_DESCRIPTION}"' in _text()


def test_reference_names_every_tool_command_and_variable() -> None:
    text = _text()
    tools = {tool.name for tool in create_server()._tool_manager.list_tools()}
    assert {name for name in tools if f"### {name}" not in text} == set()
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert commands.choices
    assert {name for name in commands.choices if f"`{name}" not in text} == set()
    used = set()
    for module in EXPLOMEMO.rglob("*.py"):
        used |= set(re.findall(r"EXPLOMEMO_[A-Z_]+", module.read_text(encoding="utf-8")))
    assert {name for name in used if f"`{name}`" not in text} == set()
