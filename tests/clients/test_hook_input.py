"""What a Claude Code hook reads: a bounded standard input, and a bounded prompt to match."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import open_cache

from explomemo.clients.hooks import run as hooks
from explomemo.recall import prompts


def run(event: str, data: bytes, db: Path) -> tuple[int, bytes, bytes]:
    out, err = io.BytesIO(), io.BytesIO()
    code = hooks.run_hook(event, db=db, project="p", stdin=io.BytesIO(data), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_an_input_over_the_bound_is_refused_in_one_line(tmp_path: Path) -> None:
    """Finding 9: the hooks read standard input whole, whatever its size (a 200 MB
    input peaked at 614 MB)."""
    prompt = "x" * (hooks.MAX_INPUT_BYTES + 1)
    data = json.dumps({"cwd": str(tmp_path), "prompt": prompt}).encode()
    code, out, err = run("prompt", data, tmp_path / "memos.db")
    assert (code, out) == (0, b"")
    assert (
        err
        == (
            f"explomemo hook prompt: stdin holds more than {hooks.MAX_INPUT_BYTES:,} bytes:"
            " the hook reads no more and adds nothing\n"
        ).encode()
    )


def test_a_real_hook_process_given_too_much_drains_it_and_exits_0(tmp_path: Path) -> None:
    """At the surface: a real hook process given three times the bound exits 0 with one
    line on stderr and nothing on stdout."""
    data = json.dumps({"cwd": str(tmp_path), "prompt": "y" * (3 * hooks.MAX_INPUT_BYTES)})
    done = subprocess.run(
        [sys.executable, "-m", "explomemo", "--db", str(tmp_path / "m.db"), "hook", "prompt"],
        input=data.encode(),
        capture_output=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0 and done.stdout == b""
    assert done.stderr.count(b"\n") == 1 and b"more than" in done.stderr


def _memo(tmp_path: Path, question: str) -> Path:
    """A database with one memo of project p asking ``question``, on tmp_path/a.py."""
    db = tmp_path / "memos.db"
    (tmp_path / "a.py").write_text("A = 1\n")
    with open_cache(db) as cache:
        cache.record(
            question=question, conclusion="c", files=["a.py"], root=str(tmp_path), project="p"
        )
    return db


def test_the_prompt_hook_matches_the_start_of_a_long_prompt_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 9: a 50 MB pasted log in a prompt took the prompt hook 9.5 s and 1.1 GB,
    every word of it stemmed. Only the first MATCH_CHARS characters are matched."""
    seen: list[int] = []
    real = prompts.content_stems

    def recording(text: str) -> dict[str, str]:
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(prompts, "content_stems", recording)
    db = _memo(tmp_path, "How is the frobnicator wired?")
    prompt = "how is the frobnicator wired? " * 50_000
    data = json.dumps({"cwd": str(tmp_path), "prompt": prompt}).encode()
    code, out, err = run("prompt", data, db)
    assert (code, err) == (0, b"")
    assert b"frobnicator" in out
    assert seen and max(seen) <= prompts.MATCH_CHARS


def test_undecodable_input_is_named_without_a_codec(tmp_path: Path) -> None:
    """Finding 10: a hook's error line for input that is not UTF-8 named a codec
    ("utf-16-be", which JSON's own detection guessed from the NUL bytes), which says
    nothing to a user."""
    db = tmp_path / "memos.db"
    code, out, err = run("prompt", b'{"prompt": "\xff"}', db)
    assert (code, out) == (0, b"")
    assert (
        err == b"explomemo hook prompt: stdin is not UTF-8 JSON: Claude Code sends a JSON object\n"
    )
    code, out, err = run("prompt", b'\x00{\x00"', db)
    assert (code, out) == (0, b"")
    assert err.startswith(b"explomemo hook prompt: stdin is not JSON (") and b"utf" not in err


def test_a_hook_with_its_standard_streams_closed_exits_0(tmp_path: Path) -> None:
    """A second reader's finding: with standard input or output closed, the hook read
    ``sys.stdin.buffer`` before its guard and ended in a traceback, exit 1."""
    db = str(tmp_path / "m.db")
    for close in ("<&-", ">&-"):
        done = subprocess.run(
            f"echo '{{}}' | {sys.executable} -m explomemo --db {db} hook prompt {close}",
            shell=True,
            capture_output=True,
            cwd=tmp_path,
        )
        assert done.returncode == 0, (close, done.stderr)
        assert b"Traceback" not in done.stderr


def test_an_endless_input_ends_the_hook(tmp_path: Path) -> None:
    """A second reader's finding: past the bound the hook read on to the end, so an input
    that never ends (``/dev/zero``) held it for ever. It drops at most as much again."""
    with open("/dev/zero", "rb") as zeros:
        done = subprocess.run(
            [sys.executable, "-m", "explomemo", "--db", str(tmp_path / "m.db"), "hook", "prompt"],
            stdin=zeros,
            capture_output=True,
            cwd=tmp_path,
            timeout=120,
        )
    assert done.returncode == 0 and done.stdout == b""
    assert b"more than" in done.stderr


def test_a_prompt_of_exactly_match_chars_is_matched_whole(tmp_path: Path) -> None:
    db = _memo(tmp_path, "What is a frobnicator?")
    prompt = "what is a frobnicator?".rjust(prompts.MATCH_CHARS)
    data = json.dumps({"cwd": str(tmp_path), "prompt": prompt}).encode()
    code, out, err = run("prompt", data, db)
    assert (code, err) == (0, b"")
    assert b"]\\n| What is a frobnicator?" in out


def test_a_word_ending_where_the_match_ends_is_kept(tmp_path: Path) -> None:
    """The cut falls at a space, just after "frobnicator": that word is whole, so it is
    matched (only a word the cut splits is dropped)."""
    db = _memo(tmp_path, "What is a frobnicator?")
    prompt = "what is a frobnicator".rjust(prompts.MATCH_CHARS) + " in the log below"
    data = json.dumps({"cwd": str(tmp_path), "prompt": prompt}).encode()
    code, out, err = run("prompt", data, db)
    assert (code, err) == (0, b"")
    assert b"]\\n| What is a frobnicator?" in out
