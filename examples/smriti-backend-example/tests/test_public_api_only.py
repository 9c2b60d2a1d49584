"""The example imports from Smriti only what a third party may: ``smriti`` and
``smriti.backend`` (the layer contracts of the repository say the same for its plugins)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "smriti_backend_example"
PUBLIC = {"smriti", "smriti.backend"}


def imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_only_smriti_and_smriti_backend_are_imported() -> None:
    modules = sorted(PACKAGE.glob("*.py"))
    assert len(modules) >= 5
    for path in modules:
        smriti = {n for n in imported(path) if n == "smriti" or n.startswith("smriti.")}
        assert smriti <= PUBLIC, f"{path.name} imports {sorted(smriti - PUBLIC)}"
