"""The public library API: what ``import explomemo`` names, loads and types."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import explomemo
from explomemo import errors, shapes

INIT = Path(explomemo.__file__)


def test_a_bare_import_loads_the_package_alone() -> None:
    """Nothing but explomemo itself (and ``__future__``) is loaded: no module of the
    package, no typing, and none of the heavy dependencies a short command avoids."""
    code = (
        "import sys; before = set(sys.modules); import explomemo;"
        " print(' '.join(sorted(set(sys.modules) - before)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert loaded == ["__future__", "explomemo"]


def test_every_public_name_resolves_to_the_object_of_its_module() -> None:
    from explomemo.memos.cache import MemoCache
    from explomemo.recall.sources import FixedModel

    assert explomemo.MemoCache is MemoCache
    assert explomemo.FixedModel is FixedModel
    for name in explomemo.__all__:
        assert getattr(explomemo, name) is not None
    assert sorted(dir(explomemo)) == sorted(explomemo.__all__)


def test_the_public_names_are_the_errors_the_shapes_and_the_cache() -> None:
    exported = set(explomemo.__all__)
    error_classes = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.ExplomemoError)
    }
    shape_classes = {
        name
        for name, value in vars(shapes).items()
        if isinstance(value, type)
        and issubclass(value, shapes.Shape)
        and value is not shapes.Shape
        and value.__module__ == shapes.__name__
    }
    assert error_classes <= exported
    assert shape_classes <= exported
    assert exported - error_classes - shape_classes == {
        "__version__",
        "MemoCache",
        "FixedModel",
        "ModelSource",
    }


def test_type_checkers_see_the_same_names() -> None:
    """The names imported for type checkers are exactly the public ones."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    (block,) = [n for n in tree.body if isinstance(n, ast.If)]
    typed = {
        alias.asname
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module != "typing"
        for alias in node.names
    }
    assert typed == set(explomemo.__all__) - {"__version__"}


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = explomemo.Nope  # type: ignore[attr-defined]
