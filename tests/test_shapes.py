"""Result shapes behave as frozen keyword-only dataclasses would (that they start up without
the dataclasses module is checked by tests/cli/test_startup.py)."""

from __future__ import annotations

import pytest

from explomemo.shapes import CheckedFile, RecordedFile, StaleEntry, fields, replace, to_dict


def test_a_shape_is_built_by_keyword_with_its_defaults() -> None:
    checked = CheckedFile(path="a.py", sha256="00", size=1, state="missing")
    assert (checked.path, checked.state, checked.moved_to) == ("a.py", "missing", None)
    with pytest.raises(TypeError, match="missing required keyword argument 'sha256'"):
        RecordedFile(path="a.py", size=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'mode'"):
        RecordedFile(path="a.py", sha256="00", size=1, mode=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        RecordedFile("a.py", "00", 1)  # type: ignore[misc]


def test_a_shape_is_frozen_and_compared_by_value() -> None:
    one = RecordedFile(path="a.py", sha256="00", size=1)
    with pytest.raises(AttributeError):
        one.size = 2  # type: ignore[misc]
    same = RecordedFile(path="a.py", sha256="00", size=1)
    assert one == same and hash(one) == hash(same) and len({one, same}) == 1
    assert replace(one, size=2) == RecordedFile(path="a.py", sha256="00", size=2)
    assert one != CheckedFile(path="a.py", sha256="00", size=1, state="unchanged")
    assert repr(one) == "RecordedFile(path='a.py', sha256='00', size=1)"


def test_fields_keep_their_order_and_descriptions() -> None:
    names = [item.name for item in fields(StaleEntry)]
    assert names == ["id", "question", "changed", "missing", "project"]
    (path,) = [item for item in fields(CheckedFile) if item.name == "path"]
    assert path.description == "Path relative to root, with / separators."
    changed = CheckedFile(path="a", sha256="0", size=1, state="changed", diff="d")
    assert "moved_to" not in to_dict(changed) and to_dict(changed)["diff"] == "d"
    assert "diff" not in to_dict(replace(changed, state="unchanged"))
