"""The MCP surface an agent sees: tools/list, schemas, annotations, errors."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
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
    assert size < 8 * 1024, size
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
