"""The switches of the environment: on/off in their spellings, anything else refused in one
line by every front end (a command, the server, a hook)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import EXPLOMEMO, invoke_cli

from explomemo.errors import InputError
from explomemo.inputs import SWITCHES, switched_on


@pytest.mark.parametrize("value", ["on", "ON", " 1 ", "true", "Yes"])
def test_on_values_turn_a_switch_on(value: str) -> None:
    assert switched_on({"EXPLOMEMO_REMIND": value}, "EXPLOMEMO_REMIND", default=False) is True


@pytest.mark.parametrize("value", ["off", "OFF", " 0", "false", "No "])
def test_off_values_turn_a_switch_off(value: str) -> None:
    assert switched_on({"EXPLOMEMO_CAPTURE": value}, "EXPLOMEMO_CAPTURE") is False


@pytest.mark.parametrize("default", [True, False])
def test_an_unset_or_empty_switch_takes_its_default(default: bool) -> None:
    assert switched_on({}, "EXPLOMEMO_CAPTURE", default) is default
    assert switched_on({"EXPLOMEMO_CAPTURE": "  "}, "EXPLOMEMO_CAPTURE", default) is default


@pytest.mark.parametrize("value", ["disabled", "none", "n", "y", "enable", "of"])
def test_any_other_value_is_refused_naming_the_variable(value: str) -> None:
    with pytest.raises(InputError, match=f"EXPLOMEMO_CAPTURE={value!r}.*on or off"):
        switched_on({"EXPLOMEMO_CAPTURE": value}, "EXPLOMEMO_CAPTURE")


def test_the_refusal_names_every_value_it_takes_and_the_way_out() -> None:
    with pytest.raises(InputError) as refused:
        switched_on({"EXPLOMEMO_CAPTURE": "disabled"}, "EXPLOMEMO_CAPTURE")
    assert str(refused.value) == (
        "EXPLOMEMO_CAPTURE='disabled' is not a switch value: set it to on or off"
        " (also 1/0, true/false, yes/no), or unset it"
    )


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_a_command_refuses_a_bad_switch_with_exit_2_and_one_line(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "disabled")
    result = invoke_cli(["--db", str(tmp_path / "memos.db"), "list"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert name in result.stderr and "disabled" in result.stderr
    assert not (tmp_path / "memos.db").exists()


def test_a_hook_given_a_bad_switch_adds_nothing_says_one_line_and_exits_0(
    tmp_path: Path,
) -> None:
    env = {"PATH": "/usr/bin:/bin", "EXPLOMEMO_CAPTURE": "none", "HOME": str(tmp_path)}
    done = subprocess.run(
        [EXPLOMEMO, "--db", str(tmp_path / "memos.db"), "hook", "stop"],
        input=b'{"transcript_path": "/nonexistent", "cwd": "/"}',
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout == b""
    assert done.stderr.count(b"\n") == 1 and b"EXPLOMEMO_CAPTURE='none'" in done.stderr


def test_the_server_does_not_start_on_a_bad_switch(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "EXPLOMEMO_EMBEDDINGS": "nope", "HOME": str(tmp_path)}
    done = subprocess.run(
        [EXPLOMEMO, "--db", str(tmp_path / "memos.db"), "serve"],
        input=b"",
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert b"EXPLOMEMO_EMBEDDINGS='nope'" in done.stderr
