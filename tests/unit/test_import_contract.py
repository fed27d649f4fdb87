"""The import contracts: only studio/ui may import Qt (PySide6, pyqtgraph, shiboken6); no circle between modules
or between studio's packages; pyproject.toml's import-linter contracts (the layers among them) are kept."""

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


def _package(module: str) -> str:
    """The package of studio a module belongs to (``studio.pipeline.core`` -> ``pipeline``); the training tools count
    as a package of their own (they sit on top, beside the command line; the runtime never imports them)."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1:3] == ["neural", "training"]:
        return "neural.training"
    return parts[1] if len(parts) > 1 else parts[0]


class _PackageGraph:
    """The package-level graph of a module graph: package A imports package B when any module of A imports one of
    B (lazy imports inside functions included)."""

    def __init__(self, graph) -> None:
        self.edges: dict[str, set[str]] = {}
        for m in graph.modules:
            a = _package(m)
            self.edges.setdefault(a, set())
            for w in graph.find_modules_directly_imported_by(m):
                if (b := _package(w)) != a:
                    self.edges[a].add(b)
        self.modules = set(self.edges)

    def find_modules_directly_imported_by(self, package: str) -> set[str]:
        return self.edges[package]


def test_no_circle_between_studios_packages() -> None:
    import grimp

    packages = _PackageGraph(grimp.build_graph("studio"))
    assert {"contracts", "pipeline", "generators", "encode", "presenter", "speech"} <= packages.modules
    assert "pipeline" in packages.edges["cli"]  # the graph sees imports between packages
    assert _cycles(packages) == []


def test_the_package_graph_finds_a_circle_between_packages() -> None:
    class Graph:
        modules = {"studio.a.x", "studio.a.y", "studio.b.z", "studio.neural.training.t", "studio.neural.m"}

        @staticmethod
        def find_modules_directly_imported_by(m: str) -> set[str]:
            return {"studio.a.x": {"studio.b.z"}, "studio.a.y": set(), "studio.b.z": {"studio.a.y"},
                    "studio.neural.training.t": {"studio.a.x"}, "studio.neural.m": {"studio.neural.training.t"}
                    }.get(m, set())

    packages = _PackageGraph(Graph())
    assert _cycles(packages) == [["a", "b"]]  # modules without a circle, packages with one
    assert packages.edges["neural"] == {"neural.training"}


def test_the_circle_finder_finds_one() -> None:
    class Graph:
        modules = {"a", "b", "c"}

        @staticmethod
        def find_modules_directly_imported_by(m: str) -> set[str]:
            return {"a": {"b"}, "b": {"a"}, "c": {"a"}}[m]

    assert _cycles(Graph()) == [["a", "b"]]


def test_import_linter_contracts_are_kept() -> None:
    """pyproject.toml's contracts: studio's packages in layers, only studio.ui imports Qt, the runtime never imports
    the training tools, only the command line and the tooling import the bench. Run on this checkout's files."""
    import os
    import shutil
    import subprocess
    import sys

    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe is not None, "import-linter is part of the dev extra"
    env = {**os.environ, "PYTHONPATH": str(STUDIO.parent)}
    proc = subprocess.run([exe], cwd=STUDIO.parent, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    import tomllib

    contracts = tomllib.loads((STUDIO.parent / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert any(c["type"] == "layers" for c in contracts)
    assert f"{len(contracts)} kept, 0 broken" in proc.stdout
