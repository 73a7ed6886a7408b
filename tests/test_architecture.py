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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth: inside functions and classes, and under
    ``if TYPE_CHECKING:`` too. A circle through a type-checking import never fails at run time, but it
    still means two modules know each other, which is what the house rules forbid."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def internal_import_graph() -> dict[str, set[str]]:
    """``{module: the package's modules it imports}``, read from the source with ``ast``.

    ``from pkg import name`` is an import of the submodule ``pkg.name`` when there is one, else
    of ``pkg`` itself; relative imports are resolved against the importing module's package.
    """
    paths = {_module_name(p): p for p in PKG.rglob("*.py")}
    modules = set(paths)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                # ``import a.b.c`` names a.b.c; the nearest module of the package it falls in.
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return components


def test_the_graph_reader_sees_function_level_and_submodule_imports() -> None:
    """The cycle check below reads imports inside functions and ``from pkg import submodule``."""
    graph = internal_import_graph()
    # ``from kmds_desktop.app import literature as app_lit`` is the submodule, not the package.
    assert "kmds_desktop.app.literature" in graph["kmds_desktop.ui.literature.panel"]
    # cli.py imports its commands inside functions (start-up time).
    assert any(m.startswith("kmds_desktop.commands") for m in graph["kmds_desktop.cli"])


def test_the_graph_reader_sees_type_checking_imports(tmp_path: Path) -> None:
    """An import under ``if TYPE_CHECKING:`` is an edge of the graph like any other."""
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from a import b\n")
    assert [getattr(node, "module", None) for node in _imports(tree)] == ["typing", "a"]


def test_no_import_cycle_in_the_package() -> None:
    """No module imports itself through others, counting imports inside functions and under
    TYPE_CHECKING: a cycle hidden by a function-level or type-only import is still one the contracts
    cannot see, and two views that know each other are one view split in two files."""
    assert import_cycles(internal_import_graph()) == []


def test_no_view_module_is_over_500_lines() -> None:
    """Each module of ui/ does one job (a view, a section of one, its job wiring): a module past 500
    lines has grown a second one."""
    long = {str(p.relative_to(PKG)): n for p in (PKG / "ui").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert long == {}


def test_no_method_is_typed_with_a_host_self() -> None:
    """No mixins that reach into a host: a method annotated ``self: SomeView`` is one view's code living
    in another file, touching attributes nobody can see from there."""
    offenders = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.args.args:
                first = node.args.args[0]
                if first.arg == "self" and first.annotation is not None:
                    offenders.append(f"{path.relative_to(PKG.parent)}:{node.lineno} {node.name}")
    assert offenders == []


def test_views_live_in_folders_by_job() -> None:
    """``ui/`` holds packages by job (shell, jobs, kb, ask, literature, screening, preferences, evidence,
    reviews): a module lying loose at its top belongs to no part of the screen."""
    loose = sorted(p.name for p in (PKG / "ui").glob("*.py") if p.name != "__init__.py")
    assert loose == []
