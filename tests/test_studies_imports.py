"""The studies form no import circle (issue 17 item 7, issue 22 item 5, issue
39): every import among bandsolve.studies' modules, lazy ones inside
functions included, read from the source, makes an acyclic graph; the shared
pieces import no study; each study imports no other study but the one whose
task it reuses; and each module imports alone in a fresh interpreter."""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "bandsolve/studies"
#: the shared pieces: each study may import them, they import no study
SHARED = ("claims", "jobs", "plotting", "rules", "stats", "tables")
#: the studies that reuse another's task: study -> the one it reuses
REUSES = {"stress": "bandit", "frontier": "bandit"}


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: pathlib.Path, known) -> set[str]:
    """The modules of ``known`` that ``name`` imports anywhere in its source.
    A package that contains ``name`` is left out: ``from . import study``
    names the package, whose ``__init__`` imports its parts, and that is no
    circle between modules (as in tests/test_layers.py)."""
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
        found |= {t for t in targets if t in known and t != name
                  and not name.startswith(t + ".")}
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


def test_studies_import_graph_has_no_circle():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # the graph is read, not empty: the studies import their shared pieces
    assert "bandsolve.studies.stats" in graph["bandsolve.studies.bandit.claims"]
    assert _cycle(graph) is None, _cycle(graph)


def _study(module: str) -> str | None:
    """The study folder a module belongs to (None for the shared pieces and the report)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 3 else None


@pytest.mark.parametrize("shared", SHARED)
def test_shared_pieces_import_no_study(shared):
    modules = _modules()
    name = f"bandsolve.studies.{shared}"
    imported = _imports(name, modules[name], modules)
    assert {m for m in imported if _study(m) or m.endswith(".report")} == set(), imported


def test_a_study_imports_no_other_study_but_the_task_it_reuses():
    """Changing one study's task touches one folder: a study reads another
    only where it runs that one's task (REUSES), and the report alone reads
    them all."""
    modules = _modules()
    for name, path in modules.items():
        own = _study(name)
        if own is None:
            continue
        others = {_study(m) for m in _imports(name, path, modules)} - {own, None}
        assert others <= {REUSES.get(own)} - {None}, (name, others)


@pytest.mark.parametrize("name", sorted(_modules()))
def test_each_module_imports_alone(name):
    if name.endswith("__main__"):
        pytest.skip("runs the command line")
    result = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
