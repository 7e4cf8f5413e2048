"""The analysis and reproduction modules form no import circle (issue 17 item 7,
issue 22 item 5): every import among them, lazy ones inside functions
included, read from the source, makes an acyclic graph, and each module
imports alone in a fresh interpreter."""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("bandsolve/analysis", "bandsolve/paper_repro")


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).glob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: pathlib.Path, known) -> set[str]:
    """The modules of ``known`` that ``name`` imports anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {t for t in targets if t in known and t != name}
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_cycle_finder_finds_a_planted_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_analysis_import_graph_has_no_circle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # the graph is read, not empty: the studies import their shared helpers
    assert "bandsolve.analysis.common" in graph["bandsolve.analysis.dynamics"]
    assert _cycle(graph) is None, _cycle(graph)


def test_shared_helpers_import_no_study_module():
    modules = _modules()
    assert _imports("bandsolve.analysis.common", modules["bandsolve.analysis.common"],
                    modules) == set()


@pytest.mark.parametrize("name", sorted(_modules()))
def test_each_module_imports_alone(name):
    if name.endswith("__main__"):
        pytest.skip("runs the command line")
    result = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
