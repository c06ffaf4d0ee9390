"""privclust's modules import each other without cycles (issue 26).

The graph is built from the source (``ast``): an edge from a module to every privclust module it imports.
A module-level cycle breaks a fresh ``import``; a cycle hidden by an import inside a function still ties two
layers together, so function-level imports count too.  Imports of optional heavy dependencies (pyspark,
matplotlib, ...) are not privclust modules and do not appear."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import privclust

ROOT = Path(privclust.__file__).parent


def _module_name(path: Path) -> str:
    parts = ("privclust",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _targets(node: ast.AST, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The privclust modules an import statement loads (``from pkg import sub`` loads the submodule)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    package = module if is_package else module.rpartition(".")[0]
    if node.level:
        base = package
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        base = f"{base}.{node.module}" if node.module else base
    else:
        base = node.module or ""
    out = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
    if base in known and len(out) < len(node.names):
        out.append(base)
    return out


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(body, module: str, is_package: bool, known: set[str], function_level: bool, in_function=False):
    """The privclust modules ``body`` imports (inside its functions too, if ``function_level``)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if function_level or not in_function:
                yield from (t for t in _targets(node, module, is_package, known) if t != module)
        elif isinstance(node, ast.If) and _is_type_checking(node):
            continue  # never executed
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for field in ("body", "orelse", "finalbody", "handlers"):
            child = getattr(node, field, None)
            if isinstance(child, list):
                yield from _imports(child, module, is_package, known, function_level, inside)


def import_graph(function_level: bool) -> dict[str, set[str]]:
    """module -> the privclust modules it imports at module level (and inside functions, if asked)."""
    modules = _modules()
    known = set(modules)
    return {
        name: set(_imports(ast.parse(path.read_text()).body, name, path.name == "__init__.py", known, function_level))
        for name, path in modules.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = dfs(node)
            if found:
                return found
    return None


def test_the_graph_is_read_from_the_source():
    graph = import_graph(function_level=False)
    assert "privclust.queries.plan" in graph["privclust.algorithms.greedy"]
    assert "privclust.privacy.amplification" in graph["privclust.shuffle.oracle"]
    assert "privclust.queries.nearest" in graph["privclust.queries.spark"]
    # Relative imports of a package's own submodules resolve to them.
    assert "privclust.shuffle.oracle" in graph["privclust.shuffle"]


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycle_at_module_level():
    assert find_cycle(import_graph(function_level=False)) is None


def test_no_module_cycle_hidden_by_a_function_level_import():
    cycle = find_cycle(import_graph(function_level=True))
    assert cycle is None, " -> ".join(cycle)


def layers(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between privclust's layers (its top-level modules and subpackages): importing
    ``privclust.shuffle.oracle`` runs ``privclust/shuffle/__init__.py`` too, so a cycle between two layers
    (metrics <-> queries, local <-> shuffle) is one even when no two modules import each other."""

    def layer(module: str) -> str:
        return ".".join(module.split(".")[:2])

    out: dict[str, set[str]] = {}
    for source, targets in graph.items():
        if source != "privclust":  # the package's front door imports every layer
            out.setdefault(layer(source), set()).update(layer(t) for t in targets if layer(t) != layer(source))
    return out


def test_no_cycle_between_layers_even_through_function_level_imports():
    graph = layers(import_graph(function_level=True))
    assert "privclust.queries" in graph["privclust.metrics"]
    assert "privclust.local" in graph["privclust.shuffle"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_import_privclust_in_a_fresh_interpreter():
    done = subprocess.run(
        [sys.executable, "-c", "import privclust, privclust.shuffle, privclust.local.protocol, privclust.metrics"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_the_command_starts_without_scikit_learn_scipy_or_pandas():
    """`privclust --help` imports only what every command needs (the CLI's start); the heavy libraries are
    loaded by the commands that use them (issue 28: the start was about 4 s with everything imported)."""
    code = "import sys, privclust.cli; print(sorted(m for m in ('sklearn', 'scipy', 'pandas') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_public_names_load_on_first_use():
    code = "import privclust; print(privclust.KMeans.__name__, privclust.metrics.__name__, len(dir(privclust)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[:2] == ["KMeans", "privclust.metrics"]


def test_the_cli_names_every_registered_algorithm():
    from privclust.algorithms import ALGORITHMS
    from privclust.cli import PAPERS

    assert set(PAPERS) == set(ALGORITHMS)
