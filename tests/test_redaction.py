"""Redaction (``explomemo/redaction.py``): every secret of ``benchmarks/redaction/cases.jsonl``
is redacted as its kind, every lookalike is kept whole, and the project's own committed memos
lose nothing; redacting twice changes nothing; files that hold secrets are named."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from explomemo.redaction import find, redact, secret_file, secrets_in

REPO = Path(__file__).resolve().parent.parent


def benchmark() -> ModuleType:
    path = REPO / "benchmarks" / "redaction" / "run.py"
    spec = importlib.util.spec_from_file_location("redaction_run", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_secret_of_the_benchmark_is_redacted_and_every_lookalike_kept() -> None:
    run = benchmark()
    cases = run.load_cases()
    secrets = [c for c in cases if c["secret"]]
    lookalikes = [c for c in cases if not c["secret"]]
    assert len(secrets) >= 30 and len({c["kind"] for c in secrets}) >= 10
    assert len(lookalikes) >= 30
    _, failures = run.check_cases(cases)
    assert failures == []


def test_the_projects_committed_memos_lose_nothing() -> None:
    line, failures = benchmark().check_memos()
    assert int(line.split()[0]) > 0
    assert failures == []


@pytest.mark.parametrize(
    "text",
    [
        "token ghp_" + "a1B2" * 9 + " and password=hunter22.",
        "postgres://app:Sup3r@db/x and AKIA" + "Q3ZX7NB2LW5KT9RM",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc",
    ],
)
def test_redacting_twice_changes_nothing(text: str) -> None:
    once = redact(text)
    assert once.kinds and redact(once.text) == (once.text, [])


def test_a_secret_is_replaced_by_a_mark_naming_its_kind() -> None:
    text = "use ghp_" + "a1B2" * 9 + " now"
    assert redact(text).text == "use [redacted: github token] now"
    assert secrets_in(f"{text} and {text}") == ["github token"]
    assert find("ghp_" + "a1B2" * 9)[0].kind == "github token"
    # Inside a longer word it is not a token of that kind.
    assert find("xghp_" + "a1B2" * 9) == []


@pytest.mark.parametrize(
    ("path", "content", "held"),
    [
        (".env", None, True),
        ("deploy/.env.production", None, True),
        ("home/.ssh/id_rsa", None, True),
        ("certs/server.pem", None, True),
        ("tls/server.KEY", None, True),
        (".netrc", None, True),
        ("src/auth.py", b"def check(token):\n    return verify(token)\n", False),
        ("src/settings.py", b'SECRET_KEY = "k3y-' + b"x9" * 10 + b'"\n', True),
        ("src/env.py", None, False),
        ("id_rsa.pub", None, False),
        (".envrc", None, False),
    ],
)
def test_files_that_hold_secrets(path: str, content: bytes | None, held: bool) -> None:
    assert secret_file(path, content) is held


def test_a_key_cut_before_its_end_line_is_redacted_to_its_last_key_line() -> None:
    text = (
        "the key:\n-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
        "DEK-Info: AES-128-CBC,0A1B\n\nMIIEpAIBAAKCAQEA7x9Vq3kT2mY8bLwR4n\nJ7hP0sA6cE1f==\n"
        "The rest is elided."
    )
    assert redact(text).text == "the key:\n[redacted: private key]\nThe rest is elided."
