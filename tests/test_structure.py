"""The package's shape (issue 45's structural checks): no import circle between two files, no
family importing the engine's front door back, the fast paths only in `kernels/`, one registry
of ids, and a README a newcomer can read.

Imports are read with `ast`, inside functions too: a lazy import still ties two files together
for a reader and for anyone who moves one of them.
"""
from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "seedpool"


def _module_file(name: str) -> Path | None:
    path = ROOT.joinpath(*name.split("."))
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def _imported_files(path: Path) -> set[Path]:
    """The package's files that ``path`` imports (``from a import b`` names b's file where b is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" if _module_file(f"{node.module}.{a.name}") else node.module
                     for a in node.names]
        else:
            continue
        found |= {f for n in names if n.split(".")[0] == "seedpool" and (f := _module_file(n)) is not None}
    found.discard(path)
    return found


def _circle(graph: dict[Path, set[Path]]) -> list[Path]:
    """One circle of files that import each other through ``graph`` (first file repeated last), or []."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as err:
        return err.args[1]
    return []


def _graph() -> dict[Path, set[Path]]:
    return {path: _imported_files(path) for path in PACKAGE.rglob("*.py")}


def test_the_circle_finder_finds_a_circle():
    a, b, c = Path("a"), Path("b"), Path("c")
    assert set(_circle({a: {b}, b: {c}, c: {a}})) == {a, b, c}
    assert _circle({a: {b}, b: {c}, c: set()}) == []


def test_no_two_files_of_the_package_import_each_other_through_any_path():
    circle = [str(p.relative_to(PACKAGE)) for p in _circle(_graph())]
    assert not circle, "files that import each other: " + " -> ".join(circle)


def test_no_family_imports_the_engines_front_door():
    """A family registers into the registry; it never reaches back up to `make` or the package."""
    up = {_module_file("seedpool.envs.make"), _module_file("seedpool"), _module_file("seedpool.envs")}
    wrong = [f"{path.relative_to(PACKAGE)} imports {target.relative_to(PACKAGE)}"
             for path in (PACKAGE / "envs" / "families").rglob("*.py")
             for target in _imported_files(path) & up]
    assert not wrong, "\n".join(wrong)


def test_the_fast_paths_live_in_kernels_only():
    """`algos/` holds the plain autograd math: no numba, no ctypes, no private torch ops."""
    wrong = []
    for path in (PACKAGE / "algos").rglob("*.py"):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                wrong += [f"{path.name} imports {a.name}" for a in node.names if a.name.split(".")[0] in ("numba", "ctypes")]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("numba", "ctypes"):
                wrong.append(f"{path.name} imports from {node.module}")
        wrong += [f"{path.name} calls torch._{m}" for m in re.findall(r"torch\._(\w+)", text)]
    assert not wrong, "\n".join(wrong)


def test_envs_has_one_registry_of_ids():
    registries = sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "envs").rglob("registry.py"))
    assert registries == ["envs/registry.py"]


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text()) <= 8000
