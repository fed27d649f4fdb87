"""The import contract (STYLE rule 1): only studio/ui may import Qt (PySide6, pyqtgraph, shiboken6)."""

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


def test_import_linter_contract_is_kept() -> None:
    """The same rule as an import-linter contract (pyproject.toml), which also follows imports across modules."""
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "lint-imports"
    if not exe.exists():
        import pytest

        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    proc = subprocess.run([str(exe)], cwd=STUDIO.parent, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kept, 0 broken" in proc.stdout
