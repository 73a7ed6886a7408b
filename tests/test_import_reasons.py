"""An import inside a function says why it is there (start-up time, an optional dependency, a cycle).

The Qt-free packages import at the top of a module unless a comment on the import, or on the line
just above its group of imports, gives the reason (``# why: ...``). Without the rule, deferred
imports pile up unexplained, and a reader cannot tell a start-up saving from a leftover.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "kmds_desktop"


def _function_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            found += [n for n in ast.walk(fn) if isinstance(n, ast.Import | ast.ImportFrom)]
    return sorted(set(found), key=lambda n: n.lineno)


def _unexplained(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """``file:line`` of each function-level import with no comment on it or above its group."""
    lines = path.read_text(encoding="utf-8").splitlines()
    imports = _function_imports(ast.parse("\n".join(lines)))
    ending_on = {n.end_lineno: n for n in imports}
    missing = []
    for node in imports:
        first = node.lineno
        while first - 1 in ending_on:  # the group's first import: one comment above serves the group
            first = ending_on[first - 1].lineno
        group = [n for n in imports if first <= n.lineno <= node.end_lineno]
        commented = any("#" in lines[i - 1] for n in group for i in range(n.lineno, n.end_lineno + 1))
        above = lines[first - 2].strip() if first >= 2 else ""
        if not commented and not above.startswith("#"):
            missing.append(f"{path.relative_to(root)}:{node.lineno}")
    return missing


def test_every_import_inside_a_function_in_the_qt_free_packages_says_why() -> None:
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if "ui" not in p.relative_to(PACKAGE).parts[:1]]
    assert len(files) > 100  # the package itself, not an empty glob
    missing = [where for path in files for where in _unexplained(path)]
    assert not missing, ("imports inside functions without a comment saying why (move them to the top of "
                         "the module, or add '# why: ...'): " + ", ".join(missing))


def test_the_check_sees_a_bare_import_and_accepts_a_reasoned_one(tmp_path: Path) -> None:
    module = tmp_path / "example.py"
    module.write_text(
        "def bare():\n"
        "    import json\n"
        "    return json\n\n\n"
        "def reasoned():\n"
        "    # why: start-up time\n"
        "    from csv import (\n"
        "        reader,\n"
        "    )\n"
        "    import zipfile\n"
        "    return reader, zipfile\n",
        encoding="utf-8",
    )
    assert _unexplained(module, root=tmp_path) == ["example.py:2"]
