"""The house (issues 25 and 31): no import circle among lazylab's units, and no module over 600 lines.

Imports are read with ``ast`` from every module under ``lazylab/``, function-level ones
included (a deferred import still ties the two modules together), and grouped by
top-level unit: ``lazylab.experiments.trajectory`` belongs to ``lazylab.experiments``.
Every unit (top-level module or subpackage) is checked, and a circle found is named unit by unit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import lazylab

ROOT = Path(lazylab.__file__).parent
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def imports_in(source: str, package: str, modules) -> set[str]:
    """Every lazylab module ``source`` (code of a module in ``package``) imports, at any depth of its code
    (``from a import b`` counts ``a.b`` when that is a module, else ``a``); relative imports resolved."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([base] if base else []))
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
    return {m for m in found if m == "lazylab" or m.startswith("lazylab.")}


def imports_of(path: Path, modules) -> set[str]:
    """``imports_in`` of a file under ``lazylab/``."""
    name = _module_name(path)
    return imports_in(path.read_text(), name if path.name == "__init__.py" else name.rpartition(".")[0], modules)


def _unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def unit_graph() -> dict[str, set[str]]:
    """``{unit: units it imports}`` over lazylab's top-level modules and subpackages."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = graph.setdefault(_unit(name), set())
        edges |= {_unit(m) for m in imports_of(path, modules) if _unit(m) not in ("lazylab", _unit(name))}
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected group of ``graph`` that has one: ``[a, b, ..., a]``, the shortest
    chain of imports from the group's first unit (by name) back to itself, each circle starting there."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm; lazylab's graph is a few dozen units deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, ()):
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    circles = []
    for group in groups:
        start = min(group)
        came: dict[str, str] = {}
        todo = [start]
        while start not in came:  # breadth first, within the group: the shortest way back
            nxt = []
            for v in todo:
                for w in sorted(graph.get(v, ())):
                    if w in group and w not in came:
                        came[w] = v
                        nxt.append(w)
            todo = nxt
        path = [start]
        while path[-1] != start or len(path) == 1:
            path.append(came[path[-1]])
        circles.append(path[::-1])
    return sorted(circles)


def test_the_reader_sees_top_function_level_and_relative_imports():
    modules = _modules()
    # experiments/__init__ imports the backends at the top; the render experiments' paper ladder imports
    # the reference loader inside a function.
    assert "lazylab.backends" in imports_of(ROOT / "experiments" / "__init__.py", modules)
    assert "lazylab.reference" in imports_of(ROOT / "experiments" / "render" / "ladders.py", modules)
    # lazylab has no relative import; one would be read as its absolute twin.
    source = "def f():\n    from . import gram\n    from .trajectory import run\n    from ..backends import RayBackend\n"
    assert imports_in(source, "lazylab.experiments", modules) == {
        "lazylab.experiments.gram", "lazylab.experiments.trajectory", "lazylab.backends"}


def test_backends_import_nothing_from_the_experiments():
    modules = _modules()
    direct = imports_of(ROOT / "backends.py", modules)
    assert not {m for m in direct if _unit(m) == "lazylab.experiments"}, direct


def test_no_import_circle_passes_through_the_backends():
    """No chain of imports, deferred ones included, leads from the backends back to them."""
    graph = unit_graph()
    assert "lazylab.experiments" in graph and "lazylab.backends" in graph["lazylab.experiments"]
    back = _reachable(graph, "lazylab.backends")
    assert "lazylab.backends" not in back, f"lazylab.backends reaches itself through {sorted(back)}"


def test_the_circle_finder_names_each_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"g"}, "g": {"f", "a"}}
    assert import_circles(graph) == [["a", "b", "c", "a"], ["e", "e"], ["f", "g", "f"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_the_reference_loader_imports_no_experiment():
    """Issue 31: ``lazylab.reference`` reads, writes and checks files; building one from the memo
    (``build_reference``) is the render experiments' (``lazylab.experiments.render.export``)."""
    graph = unit_graph()
    assert "lazylab.experiments" not in _reachable(graph, "lazylab.reference"), graph["lazylab.reference"]


def test_no_import_circle_among_lazylabs_units():
    """No chain of imports, deferred ones included, leads from any unit of lazylab back to itself."""
    graph = unit_graph()
    units = {_unit(m) for m in _modules()}  # lazylab/__init__.py is the unit "lazylab"
    assert set(graph) == units and len(units) > 20  # every top-level module and subpackage is read
    circles = import_circles(graph)
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_no_module_over_600_lines():
    long = {}
    for path in ROOT.rglob("*.py"):
        name, n = path.relative_to(ROOT).as_posix(), len(path.read_text().splitlines())
        if n > MAX_LINES:
            long[name] = n
    assert not long, f"modules over {MAX_LINES} lines (split them along a seam): {long}"
