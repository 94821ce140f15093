"""The public transcripts the replay reads, and how they are read.

Each codebase is a fetched GitHub repository whose branch ``entire/checkpoints/v1``
(written by the Entire CLI) holds Claude Code transcripts (``full.jsonl``) of the
people who work on it. The commit of each branch is pinned: the replay, its labels
and its figures are of these commits. The transcripts are read with ``git cat-file``
from the fetched git directory and never committed: what the replay needs of them
goes into a local cache (``.cache/``, ignored by git).

A session appears in several checkpoints (each checkpoint holds the transcript so
far): sessions are merged by session id, entries by ``uuid``, and ordered by time.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
BRANCH = "entire/checkpoints/v1"
MIRRORS = Path(os.environ.get("REPLAY_MIRRORS", "/work/.mirror"))


@dataclass(frozen=True)
class Codebase:
    """One codebase: its name in the replay, its GitHub repository, the pinned commit."""

    name: str
    repo: str
    commit: str

    @property
    def git_dir(self) -> Path:
        return MIRRORS / self.repo.replace("/", "+") / "repo"

    def source(self, path: str) -> str:
        """The public address of a file of the pinned commit."""
        return f"https://github.com/{self.repo}/blob/{self.commit}/{path}"


CODEBASES = (
    Codebase("entire", "entireio/cli", "394f81fab87f71aa8938d91ff7a067c524ff344b"),
    Codebase("gaia", "theexperiencecompany/gaia", "7be372234a43142549e41edb01935056a7d47e7f"),
    Codebase("cybervpn", "Beep206/CyberVPN", "89efea0382702104b0524f7549735e1b5e5a91e2"),
)


def transcripts(codebase: Codebase) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of every ``full.jsonl`` at the pinned commit."""
    git = ["git", "--git-dir", str(codebase.git_dir)]
    listing = subprocess.run(
        [*git, "ls-tree", "-r", codebase.commit], check=True, capture_output=True, text=True
    ).stdout
    wanted = [
        (line.split()[2], line.split("\t", 1)[1])
        for line in listing.splitlines()
        if line.endswith("/full.jsonl")
    ]
    batch = subprocess.Popen(
        [*git, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert batch.stdin is not None and batch.stdout is not None
    try:
        for blob, path in wanted:
            batch.stdin.write(blob.encode() + b"\n")
            batch.stdin.flush()
            header = batch.stdout.readline().split()
            if len(header) < 3:  # absent from the fetched snapshot
                continue
            size = int(header[2])
            data = batch.stdout.read(size)
            batch.stdout.read(1)
            yield path, data
    finally:
        batch.stdin.close()
        batch.wait()


@dataclass
class Session:
    """One session, merged from every checkpoint that holds part of it."""

    id: str
    codebase: str
    cwd: str
    developer: str
    start: str
    sources: list[str]
    entries: list[dict[str, Any]]


def developer_of(cwd: str) -> str:
    """Who ran the session, as far as its folder tells (``/Users/NAME/…``, ``/home/NAME/…``)."""
    parts = cwd.split("/")
    if len(parts) > 2 and parts[1] in ("Users", "home"):
        return parts[2]
    return "unknown"


def sessions(codebase: Codebase) -> list[Session]:
    """The codebase's sessions, each merged and in time order, ordered by their start."""
    found: dict[str, dict[str, Any]] = {}
    for path, data in transcripts(codebase):
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            sid, uuid = entry.get("sessionId"), entry.get("uuid")
            if not isinstance(sid, str) or not isinstance(uuid, str) or "timestamp" not in entry:
                continue
            session = found.setdefault(sid, {"entries": {}, "sources": []})
            session["entries"].setdefault(uuid, entry)
            if path not in session["sources"]:
                session["sources"].append(path)
    result = []
    for sid, merged in found.items():
        entries = sorted(merged["entries"].values(), key=lambda e: e["timestamp"])
        cwd = next((e["cwd"] for e in entries if isinstance(e.get("cwd"), str)), "")
        if not cwd:
            continue
        result.append(
            Session(
                id=sid,
                codebase=codebase.name,
                cwd=cwd,
                developer=developer_of(cwd),
                start=entries[0]["timestamp"],
                sources=sorted(merged["sources"]),
                entries=entries,
            )
        )
    return sorted(result, key=lambda s: (s.start, s.id))


def cache_sessions(codebase: Codebase) -> Path:
    """Write the codebase's merged sessions into the local cache (once); its folder."""
    folder = CACHE / codebase.name / codebase.commit[:12]
    index = folder / "sessions.json"
    if index.exists():
        return folder
    (folder / "sessions").mkdir(parents=True, exist_ok=True)
    listed = []
    for session in sessions(codebase):
        with open(folder / "sessions" / f"{session.id}.jsonl", "w", encoding="utf-8") as out:
            for entry in session.entries:
                out.write(json.dumps(entry, ensure_ascii=False) + "\n")
        listed.append(
            {
                "id": session.id,
                "cwd": session.cwd,
                "developer": session.developer,
                "start": session.start,
                "sources": session.sources,
                "entries": len(session.entries),
            }
        )
    index.write_text(json.dumps(listed, indent=1), encoding="utf-8")
    return folder


def load_index(codebase: Codebase) -> list[dict[str, Any]]:
    folder = cache_sessions(codebase)
    return json.loads((folder / "sessions.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def load_session(codebase: Codebase, sid: str) -> list[dict[str, Any]]:
    folder = cache_sessions(codebase)
    with open(folder / "sessions" / f"{sid}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


if __name__ == "__main__":
    for cb in CODEBASES:
        listed = load_index(cb)
        devs: dict[str, int] = {}
        for s in listed:
            devs[s["developer"]] = devs.get(s["developer"], 0) + 1
        print(cb.name, len(listed), devs)
