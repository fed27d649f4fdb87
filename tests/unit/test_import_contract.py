"""The import contract: only studio/ui may import Qt (PySide6, pyqtgraph, shiboken6)."""

from __future__ import annotations

import ast
from pathlib import Path

STUDIO = Path(__file__).resolve().parents[2] / "studio"
FORBIDDEN = {"PySide6", "pyqtgraph", "shiboken6", "PyQt5", "PyQt6", "PySide2"}


def _qt_imports(path: Path, root: Path = STUDIO.parent) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            names = [str(node.args[0].value)]
        found += [f"{path.relative_to(root)}:{node.lineno} imports {n}" for n in names
                  if n.split(".")[0] in FORBIDDEN]
    return found


def test_only_studio_ui_imports_qt() -> None:
    modules = [p for p in STUDIO.rglob("*.py") if "ui" not in p.relative_to(STUDIO).parts[:1]]
    assert len(modules) > 20  # the scan sees the package
    offenders = [hit for p in modules for hit in _qt_imports(p)]
    assert offenders == []


def test_the_scan_catches_a_qt_import(tmp_path: Path) -> None:
    fake = tmp_path / "mod.py"
    fake.write_text("import os\nif True:\n    from PySide6.QtCore import QObject\nimport shiboken6\n")
    assert sorted(_qt_imports(fake, root=tmp_path)) == ["mod.py:3 imports PySide6.QtCore", "mod.py:4 imports shiboken6"]


def _cycles(graph) -> list[list[str]]:
    """Strongly connected groups of modules that import each other (Tarjan), larger than one module."""
    import sys

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return out


def test_no_import_circle_in_studio() -> None:
    """Every import in studio/, lazy ones inside functions included (grimp reads them all), forms no circle."""
    import grimp

    graph = grimp.build_graph("studio")
    assert len(graph.modules) > 50
    assert _cycles(graph) == []


def test_the_circle_finder_finds_one() -> None:
    class Graph:
        modules = {"a", "b", "c"}

        @staticmethod
        def find_modules_directly_imported_by(m: str) -> set[str]:
            return {"a": {"b"}, "b": {"a"}, "c": {"a"}}[m]

    assert _cycles(Graph()) == [["a", "b"]]


def test_import_linter_contracts_are_kept() -> None:
    """pyproject.toml's contracts: only studio.ui imports Qt, the runtime never imports the training tools, only the
    command line and the tooling import the bench."""
    import shutil
    import subprocess
    import sys

    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe is not None, "import-linter is part of the dev extra"
    proc = subprocess.run([exe], cwd=STUDIO.parent, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "3 kept, 0 broken" in proc.stdout
