"""Every module of studio/ can be read in one sitting: at most 700 lines, and no class with over 30 methods."""

from __future__ import annotations

import ast
from pathlib import Path

STUDIO = Path(__file__).resolve().parents[2] / "studio"
MAX_LINES = 700
MAX_METHODS = 30


def _too_big(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES:
            found.append(f"{path.relative_to(root.parent)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                methods = [x for x in node.body if isinstance(x, (ast.FunctionDef, ast.AsyncFunctionDef))]
                if len(methods) > MAX_METHODS:
                    found.append(f"{path.relative_to(root.parent)}: class {node.name} has {len(methods)} methods")
    return found


def test_no_module_or_class_of_studio_is_too_big() -> None:
    assert _too_big(STUDIO) == []


def test_the_size_check_finds_a_big_module_and_a_big_class(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    methods = "".join(f"    def m{i}(self):\n        pass\n" for i in range(MAX_METHODS + 1))
    (pkg / "wide.py").write_text(f"class Wide:\n{methods}")
    found = _too_big(pkg)
    assert any("long.py" in f for f in found) and any("class Wide" in f for f in found)
