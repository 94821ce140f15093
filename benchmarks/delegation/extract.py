"""Extract every delegated subagent run from public Entire CLI checkpoint branches.

Each codebase's `entire/checkpoints/v1` branch holds Claude Code transcripts (`full.jsonl`).
A delegation is an assistant `tool_use` named `Task` or `Agent`; its report is the matching
`tool_result`, its cost the `toolUseResult.totalTokens`. The subagent's own tool calls come
as `agent_progress` entries whose `parentToolUseID` is the delegation's id; they tell which
runs edited files.

The transcripts are third-party text: this script writes them to a gitignored local cache
(`.cache/delegations.jsonl`) and the committed labels refer to runs by (codebase, tool_use id).

    python benchmarks/delegation/extract.py [--entire GITDIR] [--gaia GITDIR] [--cybervpn GITDIR]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "delegations.jsonl"
BRANCH = "entire/checkpoints/v1"
DELEGATING_TOOLS = frozenset({"Task", "Agent"})
EDITING_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
LAUNCHED = re.compile(r"^Async agent launched successfully\.\s*agentId: (\w+)")
NOTIFICATION = re.compile(
    r"<task-notification>\s*<task-id>(\w+)</task-id>.*?<status>(\w+)</status>.*?"
    r"<result>(.*?)</result>(.*?)</task-notification>",
    re.DOTALL,
)
NOTIFIED_TOKENS = re.compile(r"total_tokens: (\d+)")
NOT_A_REPORT = re.compile(
    r"^(Spawned successfully\.|Async agent launched successfully\.|Agent type '[^']*' not found"
    r"|<tool_use_error>|\[Request interrupted|API Error:|Prompt is too long"
    r"|The user doesn't want to proceed)"
)


@dataclass(frozen=True)
class Source:
    """One codebase's checkpoint branch, pinned to the commit the labels were made on."""

    codebase: str
    default_git_dir: str
    commit: str


SOURCES = (
    Source("entireio/cli", "/work/.mirror/entireio+cli/repo",
           "394f81fab87f71aa8938d91ff7a067c524ff344b"),
    Source("theexperiencecompany/gaia", "/work/.mirror/theexperiencecompany+gaia/repo",
           "7be372234a43142549e41edb01935056a7d47e7f"),
    Source("Beep206/CyberVPN", "/work/.mirror/Beep206+CyberVPN/repo",
           "89efea0382702104b0524f7549735e1b5e5a91e2"),
)


def transcript_blobs(git_dir: str, commit: str) -> list[tuple[str, str]]:
    """(path, blob id) of every `full.jsonl` in the pinned commit's tree."""
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "-r", commit],
        check=True, capture_output=True, text=True,
    ).stdout
    blobs = []
    for line in out.splitlines():
        meta, path = line.split("\t", 1)
        if path.endswith("/full.jsonl"):
            blobs.append((path, meta.split()[2]))
    return blobs


def read_blobs(git_dir: str, blob_ids: list[str]) -> dict[str, bytes]:
    """Contents of the blobs present in the git dir (a mirror may lack its largest files)."""
    proc = subprocess.run(
        ["git", "--git-dir", git_dir, "cat-file", "--batch"],
        input="".join(f"{b}\n" for b in blob_ids).encode(),
        check=True, capture_output=True,
    )
    data, pos, found = proc.stdout, 0, {}
    while pos < len(data):
        end = data.index(b"\n", pos)
        header = data[pos:end].decode().split()
        pos = end + 1
        if header[-1] == "missing":
            continue
        size = int(header[2])
        found[header[0]] = data[pos:pos + size]
        pos += size + 1
    return found


def text_of(content: Any) -> str:
    """The text of a tool_result content (a string or a list of text blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def json_text(entry: dict[str, Any]) -> str:
    """The text a user or queue entry carries (a background run's notification comes so)."""
    if entry.get("type") == "queue-operation":
        content: Any = entry.get("content", "")
    else:
        content = (entry.get("message") or {}).get("content", "")
    return text_of(content)


def entries(raw: bytes) -> list[dict[str, Any]]:
    """The JSON entries of one transcript; a line cut short or not JSON is skipped."""
    found = []
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            found.append(entry)
    return found


def delegations_in(codebase: str, path: str, raw: bytes) -> dict[str, dict[str, Any]]:
    """Every delegation of one transcript, keyed by tool_use id."""
    calls: dict[str, dict[str, Any]] = {}
    tools: dict[str, Counter[str]] = {}
    launched: dict[str, str] = {}
    for entry in entries(raw):
        if entry.get("type") in ("user", "queue-operation"):
            for agent_id, status, result, rest in NOTIFICATION.findall(json_text(entry)):
                call = calls.get(launched.get(agent_id, ""), {})
                if call and call.get("background_report") is None:
                    call["background_report"] = result.strip()
                    call["status"] = status
                    call["finished"] = entry.get("timestamp", "")
                    tokens = NOTIFIED_TOKENS.search(rest)
                    call["total_tokens"] = int(tokens.group(1)) if tokens else None
        message = entry.get("message") or {}
        content = message.get("content") if isinstance(message, dict) else None
        if entry.get("type") == "assistant" and isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_use" and block.get("name") in DELEGATING_TOOLS:
                    given = block.get("input") or {}
                    calls[block["id"]] = {
                        "codebase": codebase,
                        "session_id": entry.get("sessionId", ""),
                        "checkpoint": path,
                        "timestamp": entry.get("timestamp", ""),
                        "tool_use_id": block["id"],
                        "tool": block["name"],
                        "subagent_type": given.get("subagent_type", ""),
                        "description": given.get("description", ""),
                        "prompt": given.get("prompt", ""),
                        "run_in_background": bool(given.get("run_in_background", False)),
                        "report": None,
                        "finished": None,
                        "total_tokens": None,
                        "total_tool_uses": None,
                    }
        elif entry.get("type") == "user" and isinstance(content, list):
            result = entry.get("toolUseResult")
            for block in content:
                if block.get("type") != "tool_result" or block.get("tool_use_id") not in calls:
                    continue
                call = calls[block["tool_use_id"]]
                call["report"] = text_of(block.get("content"))
                call["finished"] = entry.get("timestamp", "")
                started = LAUNCHED.match(call["report"])
                if started:
                    launched[started.group(1)] = block["tool_use_id"]
                    call["background_report"] = None
                call["is_error"] = bool(block.get("is_error", False))
                if isinstance(result, dict):
                    call["total_tokens"] = result.get("totalTokens")
                    call["total_tool_uses"] = result.get("totalToolUseCount")
                    call["status"] = result.get("status")
        elif entry.get("type") == "progress":
            data = entry.get("data") or {}
            parent = entry.get("parentToolUseID", "")
            inner = (data.get("message") or {}).get("message") or {}
            if data.get("type") == "agent_progress" and isinstance(inner.get("content"), list):
                for block in inner["content"]:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        tools.setdefault(parent, Counter())[block.get("name", "")] += 1
    for tool_use_id, call in calls.items():
        if "background_report" in call:
            call["launch_result"] = call["report"]
            call["report"] = call.pop("background_report")
        used = tools.get(tool_use_id, Counter())
        call["subagent_tools"] = dict(sorted(used.items()))
        call["edited"] = any(name in EDITING_TOOLS for name in used)
        report = call["report"] or ""
        call["reported"] = bool(report.strip()) and not call.get("is_error", False) and not (
            NOT_A_REPORT.match(report)
        )
    return calls


def better(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Of two copies of one delegation (a session in several checkpoints), the fuller one."""
    def fullness(call: dict[str, Any]) -> tuple[int, int, int]:
        return (call["report"] is not None, call["total_tokens"] is not None,
                sum(call["subagent_tools"].values()))
    return new if fullness(new) > fullness(old) else old


def extract(git_dirs: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, tuple[int, int]]]:
    """All delegations, ordered by codebase then time; and (transcripts read, missing) each."""
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    seen: dict[str, tuple[int, int]] = {}
    for source in SOURCES:
        git_dir = git_dirs[source.codebase]
        blobs = transcript_blobs(git_dir, source.commit)
        contents = read_blobs(git_dir, sorted({b for _, b in blobs}))
        seen[source.codebase] = (
            sum(b in contents for _, b in blobs), sum(b not in contents for _, b in blobs)
        )
        for path, blob in blobs:
            if blob not in contents:
                continue
            for tool_use_id, call in delegations_in(source.codebase, path, contents[blob]).items():
                key = (source.codebase, tool_use_id)
                runs[key] = better(runs[key], call) if key in runs else call
    ordered = sorted(runs.values(), key=lambda c: (c["codebase"], c["timestamp"], c["tool_use_id"]))
    return ordered, seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for source, flag in zip(SOURCES, ("--entire", "--gaia", "--cybervpn"), strict=True):
        parser.add_argument(flag, default=source.default_git_dir,
                            help=f"git dir holding {source.codebase}'s {BRANCH}")
    args = parser.parse_args()
    git_dirs = {
        source.codebase: getattr(args, flag)
        for source, flag in zip(SOURCES, ("entire", "gaia", "cybervpn"), strict=True)
    }
    runs, seen = extract(git_dirs)
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with CACHE.open("w", encoding="utf-8") as out:
        for call in runs:
            out.write(json.dumps(call, ensure_ascii=False) + "\n")
    for codebase, (read, missing) in seen.items():
        count = sum(c["codebase"] == codebase for c in runs)
        print(f"{codebase}: {read} transcripts read, {missing} absent from the mirror, "
              f"{count} delegations")
    print(f"wrote {CACHE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
