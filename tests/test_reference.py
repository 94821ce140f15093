"""docs/reference.md is the contract: it names every tool, command and variable there is,
and every number it states is the code's. The README and the other pages hold no second
copy of its tables, and every figure they state is checked here."""

from __future__ import annotations

import argparse
import importlib
import re
import tomllib
from pathlib import Path

from explomemo import files, inputs, shapes
from explomemo.changes import contents, diffs, gitrepo, snapshots
from explomemo.check import validity
from explomemo.cli import main as cli_main
from explomemo.cli import report
from explomemo.cli.main import build_parser
from explomemo.clients import setup
from explomemo.clients.hooks import memos as hook_memos
from explomemo.clients.hooks import payload, prompt, run, session_start, stop
from explomemo.memos import cache
from explomemo.recall import embeddings, prompts
from explomemo.server.tools import RECORD_DESCRIPTION, create_server
from explomemo.store import database

TOP = Path(__file__).resolve().parent.parent
REFERENCE = TOP / "docs" / "reference.md"
README = TOP / "README.md"
EXPLOMEMO = TOP / "explomemo"
DOCS = sorted((TOP / "docs").glob("*.md"))
#: Every Markdown page of the repository that is ours (not a dependency's, nor the copy
#: of the repository a mutation run works in).
PAGES = sorted(
    p
    for p in TOP.rglob("*.md")
    if not {".venv", ".git", "node_modules", ".pytest_cache"} & set(p.relative_to(TOP).parts)
    and not p.relative_to(TOP).is_relative_to("benchmarks/mutation/work")
)

#: Each row of the Limits tables of docs/reference.md, by its first cell, and the constants
#: its numbers are. A row added, renamed or taken out fails until this list follows.
LIMITS: dict[str, tuple[int, ...]] = {
    "question": (inputs.MAX_QUESTION,),
    "conclusion": (inputs.MAX_CONCLUSION,),
    "project": (inputs.MAX_PROJECT,),
    "query (recall)": (inputs.MAX_QUERY,),
    "files": (inputs.MAX_FILES,),
    "file size": (inputs.MAX_FILE_BYTES,),
    "file path": (files.MAX_PATH_CHARS,),
    "root": (files.MAX_ROOT_CHARS,),
    "limit (recall)": (inputs.MAX_LIMIT, inputs.DEFAULT_LIMIT),
    "memo id": (database.MAX_ID,),
    "a recall's answer": (shapes.RECALL_CHARS,),
    "one file's diff": (diffs.FILE_DIFF_CHARS,),
    "the diffs of one answer (a recall, a `show`, a stale report in Markdown)": (
        diffs.ANSWER_DIFF_CHARS,
    ),
    "context in a diff": (diffs.DIFF_CONTEXT,),
    "a snapshot, and a diff": (contents.SNAPSHOT_MAX_BYTES, diffs.DIFF_MAX_BYTES),
    "a binary file": (diffs._BINARY_PROBE,),
    "git history searched for a content without a blob id": (gitrepo.HISTORY_DEPTH,),
    "`hook session-start`": (session_start.INDEX_BYTES,),
    "`hook prompt`": (
        prompt.MAX_FRESH,
        prompt.MAX_STALE,
        prompt.PROMPT_BYTES,
        prompt.STALE_LINES,
        prompt.STALE_DIFF_BYTES,
    ),
    "`hook stop`": (stop.MIN_FILES_READ, stop.MAX_FILES_NAMED),
    "a captured turn": (inputs.MAX_FILES, inputs.MAX_QUESTION, inputs.MAX_CONCLUSION),
    "a hook's wait for a lock": (hook_memos.BUSY_TIMEOUT_MS,),
    "a hook's deadline for reading files": (
        session_start.DEADLINE_S,
        prompt.DEADLINE_S,
        stop.DEADLINE_S,
    ),
    "a record's or a recall's wait for the model still loading, and the memos a recall embeds": (
        cache.MODEL_WAIT_SECONDS,
        cache.INLINE_BACKLOG,
    ),
    "a hook's standard input": (run.MAX_INPUT_BYTES,),
    "the prompt a prompt hook matches": (prompts.MATCH_CHARS,),
    "a table of `list` or `stale`": (report.MIN_TABLE_WIDTH, report.TABLE_WIDTH),
}

_SUPERSCRIPT = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")
_POWER = re.compile(r"(\d+)([⁰¹²³⁴⁵⁶⁷⁸⁹]+)(?:\s*[\N{MINUS SIGN}-]\s*(\d+))?")
#: A number written for people: 2,000, 0.22, 64 MiB; not the 8 of UTF-8 or the 5 of FTS5.
_NUMBER = re.compile(r"(?<![\w\-.+])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:\s*(KiB|MiB))?(?![\w])")
_UNITS = {None: 1, "KiB": 1024, "MiB": 1024 * 1024}


def _flat(text: str) -> str:
    return " ".join(text.split())


def _text() -> str:
    return _flat(REFERENCE.read_text(encoding="utf-8"))


def numbers(text: str) -> list[int | float]:
    """Every number written in ``text``, in order, sizes in bytes (powers such as 2⁶³ too)."""

    def power(match: re.Match[str]) -> str:
        value = int(match[1]) ** int(match[2].translate(_SUPERSCRIPT)) - int(match[3] or 0)
        return str(value)

    found: list[int | float] = []
    for match in _NUMBER.finditer(_POWER.sub(power, text)):
        written = match[1].replace(",", "")
        number = float(written) if "." in written else int(written)
        found.append(number * _UNITS[match[2]])
    return found


def prose(text: str) -> str:
    """``text`` without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def table_rows(text: str) -> list[list[str]]:
    """The cells of every table row of ``text`` but header separators (``|---|``)."""
    rows = []
    for line in prose(text).splitlines():
        if not line.startswith("|") or re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", line):
            continue
        cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        rows.append([cell.strip() for cell in cells])
    return rows


def section(text: str, heading: str) -> str:
    """The part of ``text`` from the ``## heading`` line to the next ``## `` heading."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


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


def test_the_tool_list_and_the_environment_table_are_the_codes() -> None:
    """The reference lists exactly the tools the server has and the variables the code reads."""
    rows = table_rows(REFERENCE.read_text(encoding="utf-8"))
    listed_tools = {r[0].strip("`") for r in rows if r[0].startswith("`memory_exploration_")}
    tools = {tool.name for tool in create_server()._tool_manager.list_tools()}
    assert listed_tools == tools
    variables = {r[0].strip("`") for r in rows if re.fullmatch(r"`[A-Z_]+`", r[0])}
    used = {payload.PROJECT_DIR}
    for module in EXPLOMEMO.rglob("*.py"):
        used |= set(re.findall(r"EXPLOMEMO_[A-Z_]+", module.read_text(encoding="utf-8")))
    assert variables == used


def test_every_limit_in_the_reference_is_the_codes() -> None:
    """Each row of the Limits tables states the code's constants, and no other number but
    the lower bound 1: change a constant or the page, and this fails."""
    limits = section(REFERENCE.read_text(encoding="utf-8"), "Limits")
    rows = {r[0]: r[1] for r in table_rows(limits) if r[0] not in {"what"}}
    assert set(rows) == set(LIMITS)
    wrong = {
        what: (numbers(rule), LIMITS[what])
        for what, rule in rows.items()
        if set(numbers(rule)) - {1} != set(LIMITS[what]) - {1}
    }
    assert wrong == {}


def test_every_constant_a_page_names_has_the_value_written() -> None:
    """A table headed ``constant | value`` (docs/how-it-works.md) names a constant of the code
    in its first cell; the first number of its value cell is that constant's value."""
    checked = 0
    for page in DOCS:
        for cells in table_rows(page.read_text(encoding="utf-8")):
            name = cells[0].strip("`")
            if not name.startswith("explomemo."):
                continue
            module, _, constant = name.rpartition(".")
            value = getattr(importlib.import_module(module), constant)
            assert numbers(cells[1])[:1] == [value], (page.name, name, cells[1], value)
            checked += 1
    assert checked >= 20


def test_figures_in_the_prose_of_the_pages_are_the_codes() -> None:
    """Values the pages state in sentences, beside a link or a table that holds them."""
    decisions = _flat((TOP / "docs" / "decisions.md").read_text(encoding="utf-8"))
    timeouts = ", ".join(f"{name} {seconds} s" for _, _, name, seconds in setup.CLAUDE_HOOKS)
    assert f"settings.local.json`: {timeouts}" in decisions
    guarantees = _flat((TOP / "docs" / "guarantees.md").read_text(encoding="utf-8"))
    busy = database.BUSY_TIMEOUT_MS / 1000
    assert f"a {busy:g} s busy timeout" in guarantees
    assert f"waits up to {busy:g} s for another process's lock" in guarantees
    assert f"an entry taken more than {validity.RACY_NS / 1e9:g} s" in guarantees
    assert f"not stored {snapshots.CLOSE_SECONDS:g} s into closing" in guarantees
    reference = _text()
    assert f"not tried again for {embeddings.RETRY_SECONDS // 60} minutes" in reference
    how = _flat((TOP / "docs" / "how-it-works.md").read_text(encoding="utf-8"))
    goal = "within 5\N{MULTIPLICATION SIGN} `python -c pass`"
    assert goal in how
    assert goal in _flat((TOP / "benchmarks" / "README.md").read_text(encoding="utf-8"))


def test_the_words_that_turn_a_feature_off_are_the_codes() -> None:
    rows = {r[0].strip("`"): r[1] for r in table_rows(REFERENCE.read_text(encoding="utf-8"))}
    for variable, enabled in (
        ("EXPLOMEMO_SNAPSHOTS", contents.enabled),
        ("EXPLOMEMO_EMBEDDINGS", embeddings.embeddings_enabled),
    ):
        words = re.findall(r"`(\w+)`", rows[variable].split(":")[0])
        assert words == ["off", "0", "false", "no"], variable
        assert [enabled({variable: w}) for w in words] == [False] * len(words), variable
        assert [enabled({variable: w}) for w in ("", "on", "1", "yes")] == [True] * 4, variable


def test_readme_is_short() -> None:
    data = README.read_bytes()
    assert len(data.splitlines()) <= 250
    assert len(data) <= 16 * 1024


def test_readme_states_no_figure_it_does_not_check() -> None:
    """Outside its code blocks the README writes no number but the Python version and the
    exit codes, and both are checked here; figures live in benchmarks/README.md."""
    text = _flat(prose(README.read_text(encoding="utf-8")))
    assert set(map(str, numbers(text))) <= {"3.11", "0", "1", "2"}, numbers(text)
    pyproject = tomllib.loads((TOP / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["requires-python"] == ">=3.11"
    assert "Python 3.11+" in text
    assert (
        f"Exit codes: `{cli_main.EXIT_OK}` success (for `stale --check`: every memo fresh),"
        f" `{cli_main.EXIT_STALE}` `stale --check` found stale memos, `{cli_main.EXIT_ERROR}`"
        " bad usage or an error"
    ) in text


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page`` (a repeated one gets ``-1``, ...)."""
    anchors, counts = set(), dict[str, int]()
    for heading in re.findall(r"^#+ (.+)$", prose(page.read_text(encoding="utf-8")), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = counts.get(slug, 0)
        counts[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_every_relative_link_leads_somewhere() -> None:
    """Each relative link of the README, CHANGELOG and docs/ names a file that exists, and a
    heading of it that exists."""
    broken = []
    for page in [README, TOP / "CHANGELOG.md", *DOCS]:
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            missing = anchor and linked.suffix == ".md" and anchor not in _anchors(linked)
            if not linked.exists() or missing:
                broken.append((page.name, target))
    assert broken == []


def test_the_tables_of_the_reference_live_there_only() -> None:
    """No other page of the repository has a row of the environment table or the tool list,
    or a limits table (headed ``what | rule`` or ``what | size``): they link to
    docs/reference.md instead."""
    copies = [
        (str(page.relative_to(TOP)), line)
        for page in PAGES
        if page != REFERENCE
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith(("| `EXPLOMEMO_", "| `CLAUDE_PROJECT_DIR`", "| `memory_exploration_"))
        or re.match(r"\|\s*what\s*\|\s*(rule|size)\s*\|", line)
    ]
    assert copies == []


def test_every_test_file_a_page_names_exists() -> None:
    """A page that points a reader at a test (in a code span; .ci/run in its comments)
    names a file that holds tests today."""
    pattern = {".md": r"`(tests/[\w/]*test_\w+\.py)", "": r"\b(tests/[\w/]*test_\w+\.py)"}
    named = {
        (page.relative_to(TOP), path)
        for page in [*PAGES, TOP / ".ci" / "run"]
        for path in re.findall(pattern[page.suffix], page.read_text(encoding="utf-8"))
    }
    assert named
    assert sorted((str(page), path) for page, path in named if not (TOP / path).is_file()) == []
