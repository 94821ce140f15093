"""The MCP surface an agent sees: tools/list, schemas, annotations, errors, strict parameters."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    EMBEDDINGS_OFF,
    assert_tool_refused,
    call_tools,
    call_tools_stdio,
)
from mcp import Client

from explomemo.server.tools import RECORD_DESCRIPTION, create_server

REFERENCE_RECORD_DESCRIPTION = (
    "Record the conclusion of a codebase exploration together with the SHA-256 of every file"
    " read to reach it. Call it after answering a structural question by reading files (how X"
    " is wired, where Y is decided). Paths are stored relative to `root` (default: the"
    " server's working directory); files outside root are refused. Up to 64 files of at most"
    " 32 MB each. Recording the same question again for the project replaces the earlier memo."
)


def run(db: Path, story: Any) -> Any:
    async def main() -> Any:
        async with Client(create_server(db, env={"EXPLOMEMO_EMBEDDINGS": "off"})) as client:
            return await story(client)

    return asyncio.run(main())


# MCP forget's id ----------------------------------------------------------------


def test_forget_takes_only_a_whole_number_in_range(tmp_path: Path) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("A = 1\n")
    record = {"question": "q", "conclusion": "c", "files": ["a.py"], "project": "p"}
    forget = "memory_exploration_forget"
    bad_ids: list[object] = ["1", True, 1.0, 0, -1, 2**63]
    replies = call_tools(
        tmp_path / "m.db",
        [
            ("memory_exploration_record", {**record, "root": str(root)}),
            *[(forget, {"id": bad, "project": "p"}) for bad in bad_ids],
            ("memory_exploration_stale", {"project": "p", "root": str(root)}),
        ],
    )
    for bad, reply in zip(bad_ids, replies[1:-1], strict=True):
        assert_tool_refused(reply, "id")
        assert "1 was forgotten" not in reply.text, bad
    assert replies[-1].data["checked"] == 1


def test_forget_s_id_schema_carries_its_limits(tmp_path: Path) -> None:
    """An input or output at the edge, met where users meet it: refused with one line (exit 2),
    never a traceback, and a hook still exits 0."""

    async def listed() -> dict[str, Any]:
        from mcp import Client

        from explomemo.server.tools import create_server

        async with Client(create_server(tmp_path / "m.db", env=dict(EMBEDDINGS_OFF))) as client:
            tools = (await client.list_tools()).tools
        return {tool.name: tool.input_schema for tool in tools}

    schema = asyncio.run(listed())["memory_exploration_forget"]["properties"]["id"]
    assert (schema["type"], schema["minimum"], schema["maximum"]) == ("integer", 1, 2**63 - 1)


# Every tool's parameters are strict, as forget's id is ------------------------


def test_recall_takes_only_json_integers_and_booleans(tmp_path: Path) -> None:
    """``"limit": true`` is not 1 and ``"include_stale": "false"`` is not false: over a
    real stdio server, each wrong type is refused naming the parameter and what to send."""
    root = tmp_path / "proj"
    root.mkdir()
    for name in ("a.py", "b.py"):
        (root / name).write_text(f"{name} = 1\n")
    recall = "memory_exploration_recall"
    query = {"query": "how is the parser wired?", "project": "p"}
    bad: list[tuple[str, dict[str, Any], str]] = [
        (recall, {**query, "limit": True}, "limit: must be a JSON integer"),
        (recall, {**query, "limit": "5"}, "limit: must be a JSON integer (a number without"),
        (recall, {**query, "limit": 2.0}, "limit: must be a JSON integer"),
        (recall, {**query, "include_stale": "false"}, "include_stale: must be a JSON boolean"),
        (recall, {**query, "include_stale": 0}, "include_stale: must be a JSON boolean"),
        (recall, {**query, "project": 5}, "project: must be a JSON string (got 5)"),
        (
            "memory_exploration_record",
            {"question": "q", "conclusion": "c", "files": "a.py", "project": "p"},
            'files: must be a JSON array (got "a.py")',
        ),
        (
            "memory_exploration_record",
            {"question": 7, "conclusion": "c", "files": ["a.py"], "project": "p"},
            "question: must be a JSON string (got 7)",
        ),
        ("memory_exploration_stale", {"project": "p", "root": True}, "root: must be a JSON"),
    ]
    record = {"conclusion": "the parser is wired in a.py", "files": ["a.py", "b.py"]}
    replies = call_tools_stdio(
        tmp_path / "m.db",
        [
            ("memory_exploration_record", {**record, "question": "parser wiring?", "project": "p"}),
            ("memory_exploration_record", {**record, "question": "parser files?", "project": "p"}),
            *[(tool, args) for tool, args, _ in bad],
            (recall, {**query, "limit": 1, "include_stale": False}),
        ],
        cwd=root,
    )
    for (_, args, expected), reply in zip(bad, replies[2:-1], strict=True):
        assert_tool_refused(reply, expected)
        assert "matches" not in reply.text, args
    assert replies[-1].data["project"] == "p"
    assert len(replies[-1].data["matches"]) == 1, replies[-1].text


def test_tools_list_is_complete_and_small(db_path: Path) -> None:
    async def story(client: Client) -> Any:
        return await client.list_tools(), client.instructions, client.server_info

    listing, instructions, server_info = run(db_path, story)
    tools = {t.name: t for t in listing.tools}
    assert sorted(tools) == [
        "memory_exploration_forget",
        "memory_exploration_recall",
        "memory_exploration_record",
        "memory_exploration_stale",
    ]
    assert RECORD_DESCRIPTION == REFERENCE_RECORD_DESCRIPTION
    assert tools["memory_exploration_record"].description == REFERENCE_RECORD_DESCRIPTION
    size = len(json.dumps(listing.model_dump(mode="json", by_alias=True, exclude_none=True)))
    assert size < 9 * 1024, size
    for tool in tools.values():
        assert tool.output_schema is not None, tool.name
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), (tool.name, name)
    record = tools["memory_exploration_record"].input_schema["properties"]
    assert (record["question"]["minLength"], record["question"]["maxLength"]) == (1, 2000)
    assert record["conclusion"]["maxLength"] == 20000
    # project is optional everywhere: a string of 1 to 200 characters, or left out.
    for tool in tools.values():
        project = tool.input_schema["properties"]["project"]
        assert "project" not in tool.input_schema.get("required", []), tool.name
        assert project["type"] == "string" and "anyOf" not in project, tool.name
        assert (project["minLength"], project["maxLength"]) == (1, 200)
    recall = tools["memory_exploration_recall"].input_schema["properties"]
    assert (recall["limit"]["minimum"], recall["limit"]["maximum"], recall["limit"]["default"]) == (
        1,
        20,
        5,
    )
    assert recall["include_stale"]["default"] is True
    annotations = {name: t.annotations for name, t in tools.items()}
    assert annotations["memory_exploration_recall"].read_only_hint is True
    assert annotations["memory_exploration_stale"].read_only_hint is True
    assert annotations["memory_exploration_forget"].destructive_hint is True
    assert annotations["memory_exploration_record"].idempotent_hint is True
    assert (
        "memory_exploration_recall" in instructions and "memory_exploration_record" in instructions
    )
    assert server_info.name == "explomemo"


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        (
            "memory_exploration_record",
            {"question": "x" * 2001, "conclusion": "c", "files": ["a"], "project": "p"},
            "question: String should have at most 2000 characters",
        ),
        (
            "memory_exploration_record",
            {"question": "q", "conclusion": "c", "files": [], "project": "p"},
            "files",
        ),
        (
            "memory_exploration_recall",
            {"query": "q", "project": "p", "limit": 21},
            "limit: Input should be less than or equal to 20",
        ),
        ("memory_exploration_recall", {"project": "p"}, "query: Field required"),
        (
            "memory_exploration_recall",
            {"query": "q", "project": "p" * 201},
            "project: String should have at most 200 characters",
        ),
        ("memory_exploration_forget", {"project": "p", "id": 4}, "no memo with id 4"),
        (
            "memory_exploration_stale",
            {"project": "p", "root": "relative/dir"},
            "not an absolute path",
        ),
    ],
)
def test_errors_are_one_plain_sentence(
    db_path: Path, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    async def story(client: Client) -> Any:
        return await client.call_tool(tool, arguments)

    result = run(db_path, story)
    assert result.is_error
    text = result.content[0].text
    assert expected in text
    assert "\n" not in text and "Traceback" not in text


def test_output_schemas_are_inlined_and_valid(db_path: Path) -> None:
    from jsonschema import Draft202012Validator

    from explomemo.shapes import Match, RecallResult, to_dict

    async def story(client: Client) -> Any:
        return await client.list_tools()

    tools = {t.name: t for t in run(db_path, story).tools}
    for tool in tools.values():
        schema = tool.output_schema
        assert schema is not None
        assert schema["properties"], tool.name
        # Clients check every result against it: no $ref to resolve per item.
        assert "$ref" not in json.dumps(schema) and "$defs" not in schema, tool.name
        Draft202012Validator.check_schema(schema)
    recall_schema = tools["memory_exploration_recall"].output_schema
    match = Match(
        id=1,
        question="q",
        conclusion="c",
        score=0.5,
        matched_by="both",
        status="fresh",
        recorded_at="2026-11-30T10:00:00Z",
        files=[],
    )
    result = RecallResult(project="p", root="/r", query="q", semantic_index=True, matches=[match])
    good = to_dict(result)
    assert not list(Draft202012Validator(recall_schema).iter_errors(good))
    bad = {**good, "matches": [{**good["matches"][0], "status": "maybe"}]}
    assert list(Draft202012Validator(recall_schema).iter_errors(bad))


def test_an_optional_parameter_sent_as_null_is_left_out(db_path: Path, tmp_path: Path) -> None:
    """The schema lists optional parameters as plain types; a null sent anyway is accepted."""

    async def story(client: Client) -> Any:
        return await client.call_tool(
            "memory_exploration_stale", {"project": None, "root": str(tmp_path)}
        )

    result = run(db_path, story)
    assert not result.is_error, result.content
    assert result.structured_content["project"] == tmp_path.name
