"""The core never imports Qt: only kmds_desktop/ui/ may."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "kmds_desktop"
QT_MODULES = {"PySide6", "qasync", "shiboken6"}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_qt_import_outside_ui() -> None:
    offenders = []
    for path in PKG.rglob("*.py"):
        if "ui" in path.relative_to(PKG).parts[:1]:
            continue
        bad = _imported_roots(path) & QT_MODULES
        if bad:
            offenders.append(f"{path.relative_to(PKG.parent)}: {sorted(bad)}")
    assert offenders == []


def test_core_imports_with_qt_unimportable() -> None:
    """Import every core package in a fresh interpreter where PySide6 and qasync cannot load."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('PySide6', 'qasync', 'shiboken6'):\n"
        "            raise ImportError('Qt blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import kmds_desktop.cli, kmds_desktop.config, kmds_desktop.kb, kmds_desktop.search\n"
        "import kmds_desktop.literature, kmds_desktop.llm, kmds_desktop.ask, kmds_desktop.index\n"
        "kmds_desktop.cli.build_parser()\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


def test_import_layers_hold() -> None:
    """The import-linter contracts in pyproject.toml (ui -> app -> ask/literature -> index/llm -> kb ->
    config/tasks/paths; only ui imports Qt): the same check ``make test`` runs as ``lint-imports``."""
    lint = Path(sys.executable).parent / "lint-imports"
    assert lint.exists(), "import-linter is not installed (pip install -e '.[test]')"
    out = subprocess.run([str(lint)], cwd=PKG.parent, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout
