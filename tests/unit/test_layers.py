"""The import structure holds: layers only import downwards, packages have no import cycles, the
core stays pure (the contracts are in pyproject.toml, `[tool.importlinter]`), SQLAlchemy stays
in the store, and only the runner drives LangGraph."""

from __future__ import annotations

import ast
from pathlib import Path

from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "src" / "juru"


def test_the_import_contracts_are_kept() -> None:
    assert lint_imports(str(REPO / "pyproject.toml"), no_cache=True, no_logo=True) == 0


def sqlalchemy_importers() -> set[str]:
    """Modules outside `juru.store` that import SQLAlchemy (they hold a `store.Database`)."""
    found = set()
    for path in SOURCE.rglob("*.py"):
        relative = path.relative_to(SOURCE)
        if relative.parts[0] == "store":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if any(name.split(".")[0] == "sqlalchemy" for name in names):
                found.add(str(relative))
    return found


def test_no_sqlalchemy_outside_the_store() -> None:
    assert sqlalchemy_importers() == set()


def graph_driving_calls() -> set[str]:
    """Modules other than the runner that step or inspect a graph themselves: `aget_state`,
    `aupdate_state`, or `astream` with a `stream_mode` (a model's `astream` has none)."""
    found = set()
    for path in SOURCE.rglob("*.py"):
        relative = str(path.relative_to(SOURCE))
        if relative == "runner.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            streams = name == "astream" and any(k.arg == "stream_mode" for k in node.keywords)
            if name in {"aget_state", "aupdate_state"} or streams:
                found.add(relative)
    return found


def test_only_the_runner_drives_langgraph() -> None:
    assert graph_driving_calls() == set()
