"""Every import in the package points down the layers that docs/design.md lays out."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent


DESIGN = PROJECT / "docs" / "design.md"


SHARED = "shared"


#: What a module may import of the package itself without naming a layer.
FACADE_NAMES = {"__version__"}


def layer_rules(design: Path = DESIGN) -> dict[str, set[str]]:
    """Each layer of design.md's table with the layers it may import."""
    rules: dict[str, set[str]] = {}
    for line in design.read_text(encoding="utf-8").splitlines():
        row = re.match(r"\| `(\w+)` \|(.*)\|(.*)\|$", line)
        if row:
            rules[row[1]] = set(re.findall(r"`(\w+)`", row[3]))
    return rules


def layer_of(package: Path, module: str) -> str:
    """The layer of ``module`` (a dotted name under explomemo): its folder, or shared."""
    parts = module.split(".")[1:]
    if parts and (package / parts[0]).is_dir():
        return parts[0]
    return SHARED


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """Every module of the package that ``path`` imports, anywhere in it, by line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            if base == "explomemo":
                found += [
                    (node.lineno, f"explomemo.{a.name}")
                    for a in node.names
                    if a.name not in FACADE_NAMES
                ]
            else:
                found.append((node.lineno, base))
    return [(line, name) for line, name in found if name.split(".")[0] == "explomemo"]


def violations(package: Path, design: Path = DESIGN) -> list[str]:
    """Each import in ``package`` that runs against the layers of ``design``."""
    rules = layer_rules(design)
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        if module in ("explomemo", "explomemo.__main__"):
            continue  # the public API's lazy names, and `python -m explomemo`
        own = layer_of(package, module)
        if own not in rules:
            found.append(f"{rel}: folder {own!r} is not a layer of {design.name}")
            continue
        for line, name in _imports(path, module):
            target = layer_of(package, name)
            if name in ("explomemo", "explomemo.__init__"):
                target = "the public API"
            allowed = target in (own, SHARED) and not (own == SHARED and target != SHARED)
            if not allowed and target not in rules[own]:
                found.append(f"{rel}:{line}: {own} imports {name} ({target})")
    return found


def test_the_design_names_every_folder_of_the_package() -> None:
    rules = layer_rules()
    folders = {p.name for p in (PROJECT / "explomemo").iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(rules) - {SHARED}
    assert rules[SHARED] == set()
    assert rules["store"] == set()
    assert rules["cli"] == set(rules) - {SHARED, "cli"}


def test_every_import_points_down_the_layers() -> None:
    assert violations(PROJECT / "explomemo") == []


def test_an_import_against_the_layers_is_caught_even_inside_a_function(tmp_path: Path) -> None:
    """A planted bad import (the store calling up into the CLI, from inside a function)
    and a relative one from check up into memos are both named, with their lines."""
    package = tmp_path / "explomemo"
    shutil.copytree(PROJECT / "explomemo", package)
    database = package / "store" / "database.py"
    lines = len(database.read_text(encoding="utf-8").splitlines())
    with database.open("a", encoding="utf-8") as out:
        out.write("\n\ndef _planted() -> None:\n    from explomemo.cli.main import main\n")
    with (package / "check" / "stale.py").open("a", encoding="utf-8") as out:
        out.write("\nfrom ..memos import cache\n")
    assert violations(package) == [
        "explomemo/check/stale.py:"
        f"{len((package / 'check' / 'stale.py').read_text().splitlines())}:"
        " check imports explomemo.memos (memos)",
        f"explomemo/store/database.py:{lines + 4}: store imports explomemo.cli.main (cli)",
    ]


def test_a_shared_module_may_not_reach_into_a_folder(tmp_path: Path) -> None:
    package = tmp_path / "explomemo"
    shutil.copytree(PROJECT / "explomemo", package)
    with (package / "errors.py").open("a", encoding="utf-8") as out:
        out.write("\nfrom explomemo import store\n")
    (found,) = violations(package)
    assert found.startswith("explomemo/errors.py:") and found.endswith(
        "shared imports explomemo.store (store)"
    )
