"""The import graph of a package, read from its source with ``ast``: which of its modules
each module imports, at module level or inside a function alike. Imports under
``if TYPE_CHECKING:`` are left out: they never run. Importing ``a.b.c`` runs ``a/__init__``
and ``a/b/__init__`` first; those implicit edges are left out too (a package's
``__init__`` is kept light for that reason), only the modules an import names count."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

Graph = dict[str, set[str]]


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` (whose folder is ``root``), by dotted name."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def import_graph(root: Path, package: str) -> Graph:
    """Each module of ``package`` → the modules of ``package`` it imports."""
    modules = module_names(root, package)
    return {
        name: {target for target in _imported(name, path, modules) if target != name}
        for name, path in modules.items()
    }


def _imported(name: str, path: Path, modules: Mapping[str, Path]) -> Iterator[str]:
    # A package's relative imports start from the package itself; a module's from its parent.
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _run_imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _known(alias.name, modules)
            continue
        base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
        source = ".".join([*base, node.module] if node.module else base)
        for alias in node.names:
            # ``from package import module`` names the module; ``from module import name``
            # the module.
            yield from _known(f"{source}.{alias.name}", modules) or _known(source, modules)


def _known(dotted: str, modules: Mapping[str, Path]) -> list[str]:
    return [dotted] if dotted in modules else []


def _run_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of ``tree`` that may run, wherever they are."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from (n for child in node.orelse for n in _run_imports_of(child))
            continue
        yield from _run_imports_of(node)


def _run_imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    else:
        yield from _run_imports(node)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def within(graph: Graph, prefixes: Iterable[str]) -> Graph:
    """The part of ``graph`` among the modules named by ``prefixes`` (a package and all
    below it, or one module)."""
    prefixes = tuple(prefixes)

    def inside(name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in prefixes)

    return {
        name: {t for t in targets if inside(t)} for name, targets in graph.items() if inside(name)
    }


def find_cycle(graph: Graph) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated last), or
    None when it has none."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, on_path = [start], {start}
        branches = [iter(sorted(graph[start]))]
        while branches:
            step = next(branches[-1], None)
            if step is None:
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                branches.pop()
                continue
            if step in on_path:
                return [*path[path.index(step) :], step]
            if step in done or step not in graph:
                continue
            path.append(step)
            on_path.add(step)
            branches.append(iter(sorted(graph[step])))
    return None
