"""The package's layout, read from its import graph: no module imports another that (through
any chain) imports it back, and the producer side of the queue never imports the worker."""

from __future__ import annotations

import ast
from pathlib import Path

import django_redislock

from .support.import_graph import Graph, find_cycle, import_graph, within

PACKAGE = "django_redislock"
WORKER = f"{PACKAGE}.queue.worker"


def graph() -> Graph:
    return import_graph(Path(django_redislock.__file__).parent, PACKAGE)


def test_nothing_of_the_queue_outside_its_worker_imports_the_worker() -> None:
    queue = within(graph(), [f"{PACKAGE}.queue"])
    worker = within(queue, [WORKER])
    producers = {name: targets for name, targets in queue.items() if name not in worker}
    assert f"{PACKAGE}.queue.queue" in producers
    assert f"{PACKAGE}.queue.execution" in producers
    reaching = {name: sorted(targets & worker.keys()) for name, targets in producers.items()}
    assert {name: found for name, found in reaching.items() if found} == {}


def test_the_queue_and_the_tasks_backend_have_no_import_cycle() -> None:
    part = within(graph(), [f"{PACKAGE}.queue", f"{PACKAGE}.tasks"])
    assert f"{PACKAGE}.tasks.backend" in part[f"{PACKAGE}.tasks"]  # (the graph sees imports
    assert f"{PACKAGE}.tasks.results" in part[f"{PACKAGE}.queue.execution"]  # in functions)
    assert find_cycle(part) is None


def test_the_package_has_no_import_cycle() -> None:
    whole = graph()
    assert f"{PACKAGE}.views.locked" in whole
    assert f"{PACKAGE}.semaphores.base" in whole
    assert find_cycle(whole) is None


def test_the_graph_sees_every_kind_of_import_but_type_checking_ones(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__", "a", "b", "c", "d", "sub/__init__", "sub/e"):
        (package / f"{name}.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import os\n"
        "from . import b\n"
        "from .sub.e import thing\n"
        "if TYPE_CHECKING:\n"
        "    from .c import C\n"
        "else:\n"
        "    import pkg.d\n"
        "def f():\n"
        "    from .sub import e\n"
    )
    (package / "sub" / "e.py").write_text("from .. import a\nfrom ..c import C\n")
    found = import_graph(package, "pkg")
    assert found["pkg.a"] == {"pkg.b", "pkg.sub.e", "pkg.d"}
    assert found["pkg.sub.e"] == {"pkg.a", "pkg.c"}
    assert find_cycle(found) == ["pkg.a", "pkg.sub.e", "pkg.a"]
    assert find_cycle(within(found, ["pkg.sub", "pkg.c"])) is None


def private_imports(root: Path) -> list[str]:
    """``from <a module of the package> import _name`` anywhere under ``root``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or PACKAGE in (node.module or "")):
                names = [alias.name for alias in node.names]
                found += [f"{path.relative_to(root)}: {name}" for name in names
                          if name.startswith("_") and not name.startswith("__")]  # fmt: skip
    return found


def test_no_module_of_the_queue_or_the_tasks_backend_imports_another_one_s_private_names() -> None:
    root = Path(django_redislock.__file__).parent
    assert private_imports(root / "queue") == []
    assert private_imports(root / "tasks") == []


def test_private_imports_are_found(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from .b import _hidden, shown\nfrom .c import __all__\n")
    assert private_imports(tmp_path) == ["a.py: _hidden"]
