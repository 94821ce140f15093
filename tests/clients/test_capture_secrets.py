"""Secrets and ``<private>`` in a captured turn: the Stop hook, run on real transcripts,
stores no secret (redacted with a visible mark), keeps no snapshot of a file that holds
secrets, records nothing of a turn marked private in any spelling, and ``export`` writes no
secret; ``explomemo scrub`` removes what an older version stored."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from helpers import Repo, invoke_cli, open_cache
from test_capture import QUESTION, Turn, memos, show, stop, write_transcript

from explomemo.store import pending
from explomemo.store.database import Store
from explomemo.store.pending import Capture, CapturedFile

# Fake secrets of realistic shape, put together here so that no scanner of this
# repository takes the test's source for a leak.
GITHUB = "ghp_" + "R8kQ2mXv7LpA3nZ9wYc4TbE6uJ1sHd5fGo0i"
ANTHROPIC = "sk-ant-api03-" + "Xq7Lm2Np9Rs4Tv6Wz8Yb1Cd3Ef5Gh0Jk-_AbCdEfGhIjKlMnOpQrStUv"
AWS_ID = "AKIA" + "Q3ZX7NB2LW5KT9RM"
PASSWORD = "Tr0ub4dor&3xyz"
KEY_LINE = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    f"{KEY_LINE}\nQyNTUxOQAAACDx9Vq3kT2mY8bLwR4nJ7hP0sA6cE1fG5dH2iK9oM3uQ\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
ENV_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz8Q2mR4nT6"
SECRETS = [GITHUB, ANTHROPIC, AWS_ID, PASSWORD, KEY_LINE, ENV_SECRET]

PROMPT = f"where are tokens checked? my token is {GITHUB} and the key {ANTHROPIC}"
ANSWER = (
    f"Tokens are checked in src/auth.py: check() calls verify(). The deploy uses {AWS_ID}"
    f" with password={PASSWORD} and this key:\n{PRIVATE_KEY}\nThe .env holds the AWS secret."
)


@pytest.fixture
def shop(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "shop")
    repo.write("src/auth.py", "def check(token):\n    return verify(token)\n")
    repo.write(".gitignore", ".env\ndeploy.yml\n")
    repo.commit("code")
    repo.write(".env", f"AWS_SECRET_ACCESS_KEY={ENV_SECRET}\nDEBUG=1\n")
    # Not in git either, and its name says nothing: what it holds does.
    repo.write("deploy.yml", f'host: db.internal\npassword: "{PASSWORD}"\n')
    return repo


def secret_turn(shop: Repo, prompt: str = PROMPT, answer: str = ANSWER) -> Turn:
    turn = Turn(prompt)
    turn.read(shop.path / "src/auth.py")
    turn.read(shop.path / ".env")
    turn.read(shop.path / "deploy.yml")
    turn.say(answer)
    return turn


def stored_bytes(db: Path) -> bytes:
    """Every byte of the database: its file, its write-ahead log, anything beside it."""
    return b"".join(p.read_bytes() for p in db.parent.glob(f"{db.name}*") if p.is_file())


def assert_no_secret(data: bytes | str) -> None:
    """No secret in ``data``, in any case (the word index keeps words lowercased)."""
    text = (data if isinstance(data, str) else data.decode("utf-8", "replace")).lower()
    for secret in SECRETS:
        assert secret.lower() not in text
        # The word index keeps a token's parts (split at "-", "/", "_" and so on).
        assert secret.lower()[4:24] not in text


def snapshot_count(db: Path, sha256: str) -> int:
    with sqlite3.connect(db) as conn:
        found = conn.execute("SELECT COUNT(*) FROM snapshots WHERE sha256 = ?", (sha256,))
        return int(found.fetchone()[0])


def test_secrets_in_a_turn_reach_neither_the_database_nor_the_export(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    path = write_transcript(tmp_path / "t.jsonl", secret_turn(shop))
    assert stop(db_path, path, shop.path, last=ANSWER, process=True) == (None, "")
    (memo,) = memos(db_path)
    shown = show(db_path, memo["id"], shop.path)
    assert shown["question"] == (
        "where are tokens checked? my token is [redacted: github token] and the key"
        " [redacted: anthropic key]"
    )
    conclusion = shown["conclusion"]
    assert "[redacted: aws access key id]" in conclusion
    assert "password=[redacted: password] and" in conclusion
    assert "this key:\n[redacted: private key]\nThe .env holds" in conclusion
    # The .env is recorded (its SHA-256 keeps the memo's validity) without a snapshot.
    env = next(f for f in shown["files"] if f["path"] == ".env")
    auth = next(f for f in shown["files"] if f["path"] == "src/auth.py")
    assert shown["status"] == "fresh"
    deploy = next(f for f in shown["files"] if f["path"] == "deploy.yml")
    assert snapshot_count(db_path, env["sha256"]) == 0
    assert snapshot_count(db_path, deploy["sha256"]) == 0
    assert snapshot_count(db_path, auth["sha256"]) == 1
    assert_no_secret(stored_bytes(db_path))
    # The secret rotated: what changed in the .env is not shown from anything kept.
    (shop.path / ".env").write_text("AWS_SECRET_ACCESS_KEY=rotated\nDEBUG=1\n")
    (shop.path / "deploy.yml").write_text('host: db.internal\npassword: "rotated"\n')
    diff = invoke_cli(["--db", str(db_path), "diff", str(memo["id"]), "--root", str(shop.path)])
    assert diff.code == 0, diff.err
    assert ".env" in diff.out and "deploy.yml" in diff.out
    assert_no_secret(diff.out)
    recall = invoke_cli(
        ["--db", str(db_path), "recall", "where are tokens checked", "--json",
         "--root", str(shop.path)]
    )  # fmt: skip
    assert recall.code == 0 and "[redacted: github token]" in recall.out
    assert_no_secret(recall.out)
    target = shop.path / ".explomemo" / "memos.jsonl"
    run = invoke_cli(["--db", str(db_path), "export", "--project", "shop", "-o", str(target)])
    assert run.code == 0, run.err
    exported = target.read_text()
    assert "[redacted: github token]" in exported
    assert_no_secret(exported)


@pytest.mark.parametrize(
    "tag",
    [
        "<private>",
        "<private/>",
        "<private />",
        '<private reason="x">',
        "< private >",
        "</private>",
        "<PRIVATE>",
        "&lt;private&gt;",
        "&#60;private&#62;",
        "&amp;lt;private&amp;gt;",
        "\uff1cprivate\uff1e",
        "<pri\nvate>",
        "<private\n>",
        "<pri\u200bvate>",
        "<\u200bprivate>",
    ],
)
@pytest.mark.parametrize("where", ["prompt", "answer"])
def test_a_turn_marked_private_in_any_spelling_is_not_recorded(
    tmp_path: Path, db_path: Path, shop: Repo, tag: str, where: str
) -> None:
    marked = f"ticket 4411 {tag} is internal"
    prompt = f"{QUESTION} {marked}" if where == "prompt" else QUESTION
    answer = f"Tokens are checked in src/auth.py. {marked}" if where == "answer" else "Checked."
    turn = Turn(prompt)
    turn.read(shop.path / "src/auth.py")
    turn.say(answer)
    path = write_transcript(tmp_path / "t.jsonl", turn)
    assert stop(db_path, path, shop.path, last=answer) == (None, "")
    assert not db_path.exists()


@pytest.mark.parametrize(
    "text", ["the <privateer> class", "a private key", "<private-key> element", "privately"]
)
def test_words_near_the_tag_do_not_stop_the_capture(
    tmp_path: Path, db_path: Path, shop: Repo, text: str
) -> None:
    answer = f"Tokens are checked in src/auth.py, see {text}."
    turn = Turn(QUESTION)
    turn.read(shop.path / "src/auth.py")
    turn.say(answer)
    path = write_transcript(tmp_path / "t.jsonl", turn)
    assert stop(db_path, path, shop.path, last=answer) == (None, "")
    assert len(memos(db_path)) == 1


def test_export_refuses_a_memo_that_holds_a_secret_and_names_it(
    tmp_path: Path, db_path: Path, shop: Repo
) -> None:
    with open_cache(db_path) as cache:
        cache.record(question="clean?", conclusion="c", files=["src/auth.py"], root=str(shop.path))
        held = cache.record(
            question="which token deploys?",
            conclusion=f"the deploy token is {GITHUB}",
            files=["src/auth.py"],
            root=str(shop.path),
        )
    target = tmp_path / "memos.jsonl"
    run = invoke_cli(["--db", str(db_path), "export", "-o", str(target)])
    assert run.code == 2 and run.out == ""
    assert run.err.count("\n") == 1
    assert f"memo {held.id} " in run.err and "github token" in run.err
    assert "explomemo scrub" in run.err
    assert_no_secret(run.err)
    assert not target.exists()


def old_capture(shop: Repo, env_bytes: bytes) -> Capture:
    """A capture as a version before redaction stored it: secrets and a .env snapshot."""
    digest = hashlib.sha256(env_bytes).hexdigest()
    auth = (shop.path / "src/auth.py").read_bytes()
    return Capture(
        project="shop",
        question=PROMPT,
        conclusion=ANSWER,
        root=str(shop.path),
        recorded_at="2026-01-02T03:04:05Z",
        files=[
            CapturedFile(".env", digest, "0" * 32, len(env_bytes), None),
            CapturedFile(
                "src/auth.py", hashlib.sha256(auth).hexdigest(), "0" * 32, len(auth), None
            ),
        ],
        snapshots=[
            (digest, "zlib", zlib.compress(env_bytes)),
            (hashlib.sha256(auth).hexdigest(), "raw", auth),
        ],
    )


def test_scrub_removes_what_an_older_version_stored(
    tmp_path: Path, db_path: Path, shop: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_bytes = (shop.path / ".env").read_bytes()
    with open_cache(db_path) as cache:
        cache.record(question="clean?", conclusion="c", files=["src/auth.py"], root=str(shop.path))
    # A secret in a file whose name says nothing: its snapshot goes too.
    shop.write("config/settings.txt", f"deploy with {GITHUB}\n")
    with open_cache(db_path, snapshots=False) as cache:
        cache.record(
            question="where is the deploy configured?",
            conclusion="config/settings.txt",
            files=["config/settings.txt"],
            root=str(shop.path),
        )
    store = Store.open(db_path)
    try:
        with store.write() as conn:
            store.save_capture(conn, old_capture(shop, env_bytes))
            settings = (shop.path / "config/settings.txt").read_bytes()
            store.save_snapshots(conn, [(hashlib.sha256(settings).hexdigest(), "raw", settings)])
    finally:
        store.close()
    assert GITHUB.encode() in stored_bytes(db_path)
    run = invoke_cli(["--db", str(db_path), "scrub"])
    assert run.code == 0, run.err
    assert "redacted" in run.out and "2 snapshots" in run.out
    assert_no_secret(stored_bytes(db_path))
    captured = next(m for m in memos(db_path) if m["origin"] == "transcript")
    shown = show(db_path, captured["id"], shop.path)
    assert "[redacted: github token]" in shown["question"]
    assert "[redacted: private key]" in shown["conclusion"]
    # The word index finds the memo by its other words, and not by the secret (words only:
    # a recall would otherwise embed these few memos and find others by meaning).
    monkeypatch.setenv("EXPLOMEMO_EMBEDDINGS", "off")
    assert [m["id"] for m in recall(db_path, shop, "where are tokens checked")] == [captured["id"]]
    assert recall(db_path, shop, GITHUB) == []
    again = invoke_cli(["--db", str(db_path), "scrub"])
    assert again.code == 0 and "nothing" in again.out.lower()
    export = invoke_cli(["--db", str(db_path), "export"])
    assert export.code == 0, export.err
    assert_no_secret(export.out)


def test_scrub_removes_the_snapshot_of_a_secret_file_by_its_name_alone(
    db_path: Path, shop: Repo
) -> None:
    """A ``.env`` an older version kept a snapshot of is removed for its name, though no
    secret is found in what it holds; the snapshot of ``src/auth.py`` stays. Kills
    ``Store.snapshot_paths`` 15 and 17 (the paths a snapshot is held by lost)."""
    env_bytes = b"DEBUG=1\n"
    (shop.path / ".env").write_bytes(env_bytes)
    store = Store.open(db_path)
    try:
        with store.write() as conn:
            store.save_capture(conn, old_capture(shop, env_bytes))
    finally:
        store.close()
    env = hashlib.sha256(env_bytes).hexdigest()
    auth = hashlib.sha256((shop.path / "src/auth.py").read_bytes()).hexdigest()
    assert (snapshot_count(db_path, env), snapshot_count(db_path, auth)) == (1, 1)
    run = invoke_cli(["--db", str(db_path), "scrub"])
    assert run.code == 0, run.err
    assert (snapshot_count(db_path, env), snapshot_count(db_path, auth)) == (0, 1)


def recall(db: Path, shop: Repo, query: str) -> list[dict[str, Any]]:
    run = invoke_cli(["--db", str(db), "recall", query, "--json", "--root", str(shop.path)])
    assert run.code == 0, run.err
    return json.loads(run.out)["matches"]  # type: ignore[no-any-return]


def test_record_keeps_no_snapshot_of_a_file_that_holds_secrets(db_path: Path, shop: Repo) -> None:
    shop.write("deploy/id_ed25519", "not a key at all\n")
    shop.write("notes.txt", f"the password={PASSWORD} for staging\n")
    with open_cache(db_path) as cache:
        recorded = cache.record(
            question="where are the deploy secrets?",
            conclusion="in .env, deploy/id_ed25519 and notes.txt",
            files=[".env", "deploy/id_ed25519", "notes.txt", "src/auth.py"],
            root=str(shop.path),
        )
        assert cache.wait_for_snapshots(30)
    kept = {f.path: snapshot_count(db_path, f.sha256) for f in recorded.files}
    assert kept == {".env": 0, "deploy/id_ed25519": 0, "notes.txt": 0, "src/auth.py": 1}
    assert_no_secret(stored_bytes(db_path))


def test_scrub_forgets_a_memo_whose_redacted_question_is_another_memos(
    db_path: Path, shop: Repo
) -> None:
    other = "ghp_" + "Z" * 36
    with open_cache(db_path) as cache:
        kept = cache.record(
            question=f"why is {GITHUB} refused?", conclusion="c", files=["src/auth.py"],
            root=str(shop.path),
        )  # fmt: skip
        gone = cache.record(
            question=f"why is {other} refused?", conclusion="d", files=["src/auth.py"],
            root=str(shop.path),
        )  # fmt: skip
    run = invoke_cli(["--db", str(db_path), "scrub"])
    assert run.code == 0, run.err
    assert run.out.splitlines() == [
        f"memo {kept.id} (shop): redacted github token",
        f"memo {gone.id} (shop): forgotten (held github token; once redacted, its question"
        f" is memo {kept.id}'s)",
    ]
    (memo,) = memos(db_path)
    assert memo["id"] == kept.id and memo["question"] == "why is [redacted: github token] refused?"
    assert_no_secret(stored_bytes(db_path))
    assert other.lower() not in stored_bytes(db_path).decode("utf-8", "replace").lower()


def test_a_capture_an_earlier_release_parked_is_stored_redacted(db_path: Path, shop: Repo) -> None:
    """An earlier release parked captures in the pending file as they came, secrets and all:
    the next writer stores them redacted, and a parked line it can never store (a lone
    surrogate) goes to the quarantine file redacted too."""
    env_bytes = (shop.path / ".env").read_bytes()
    with open_cache(db_path) as cache:
        cache.record(question="clean?", conclusion="c", files=["src/auth.py"], root=str(shop.path))
    parked = old_capture(shop, env_bytes)
    pending.keep(db_path, parked)
    broken = parked._replace(question=f"broken {GITHUB} \ud800?")
    pending.keep(db_path, broken)
    run = invoke_cli(
        ["--db", str(db_path), "record", "--root", str(shop.path), "--question", "again?",
         "--conclusion", "c", "src/auth.py"]
    )  # fmt: skip
    assert run.code == 0, run.err
    questions = [m["question"] for m in memos(db_path)]
    assert any("[redacted: github token]" in q for q in questions), questions
    assert_no_secret(stored_bytes(db_path))
    quarantined = pending.quarantine_path(db_path).read_bytes()
    assert b"broken [redacted: github token]" in quarantined
    assert_no_secret(quarantined)
