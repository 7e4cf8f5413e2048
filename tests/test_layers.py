"""The package in layers (issue 32): bandsolve's imports, read from the source
with ast, form no circle, and none runs from the core up to the command line,
the studies and the reproduction, or the trainer plug-ins.

Every import counts, at module level or inside a function, and so does
``importlib.import_module("bandsolve...")`` with a literal name. Code under
``if __name__ == "__main__":`` and ``__main__`` modules are entry points,
the top of the stack, and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "bandsolve"

#: the layers above the core, from the top down: each may import those below
#: it and the core, never one above
UPPER = ("cli", "studies", "integrations")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_main_guard(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name) and node.test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__"
                    for c in node.test.comparators))


def _imported_names(tree: ast.Module, package: str) -> set[str]:
    """Every dotted name a module imports (``from a import b`` gives a and
    a.b), relative imports resolved against ``package``."""
    names: set[str] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if _is_main_guard(node):
            continue
        stack.extend(ast.iter_child_nodes(node))
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant)):
            names.add(str(node.args[0].value))
    return names


def import_graph() -> dict[str, set[str]]:
    """module -> the bandsolve modules it imports."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for module, path in files.items():
        if path.name == "__main__.py":
            continue
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for name in _imported_names(ast.parse(path.read_text()), package):
            while name and name not in files:  # `from pkg import name`: name is no module
                name = name.rpartition(".")[0]
            if name.startswith("bandsolve") and name != module \
                    and not files[name].name == "__main__.py":
                targets.add(name)
        graph[module] = targets
    return graph


def layer(module: str) -> str:
    """``core`` or one of :data:`UPPER`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in UPPER else "core"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _package_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """A package's ``__init__`` imports its submodules, which import the
    package back for its names: that is no circle between modules. So a
    module's edge to a package that contains it is dropped."""
    return _cycles({m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()})


def test_the_graph_sees_the_imports():
    """The walker reads relative, function-level and importlib imports."""
    graph = import_graph()
    assert "bandsolve.api" in graph["bandsolve"]  # importlib.import_module(f".{module}") is
    # not a literal, but the TYPE_CHECKING block names it
    assert "bandsolve.verify" in graph["bandsolve.cli.verify"]  # inside a function
    # an absolute import inside a function
    assert "bandsolve.integrations.verl" in graph["bandsolve.integrations.verl_entry_point"]


def test_no_import_circle():
    assert _package_cycles(import_graph()) == []


@pytest.mark.parametrize("upper", UPPER)
def test_no_import_runs_up_a_layer(upper):
    graph = import_graph()
    order = ("core", *reversed(UPPER))  # from the bottom up
    upward = sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts
                    if layer(t) == upper and order.index(layer(m)) < order.index(upper))
    assert upward == []


def test_the_walker_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layer("bandsolve.calibrate") == "core" and layer("bandsolve.cli.verify") == "cli"


def test_regression_no_library_module_imports_the_command_line():
    """doctor.py imported bandsolve.cli.doctor under ``if __name__ ==
    "__main__":``, the house's one circle, and bandsolve.paper_repro had an
    entry point of its own: each command has one, ``bandsolve <command>``
    (and ``python -m bandsolve``). Main guards count here."""
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        module = _module_name(path)
        if module.startswith("bandsolve.cli") or module == "bandsolve.__main__":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                     else [])
            if isinstance(node, ast.ImportFrom) and node.level:
                package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                names = [".".join(base + ([node.module] if node.module else []))]
            offenders += [f"{module} -> {n}" for n in names
                          if n == "bandsolve.cli" or n.startswith("bandsolve.cli.")]
    assert offenders == []
    assert sorted(p.name for p in PACKAGE.rglob("__main__.py")) == ["__main__.py"]
