"""The package's import graph: no cycle, and arrows only point down.

Floors (see src/ddp_lessons/__init__.py): the ground floor (runtime, common,
launcher, timing, records, plots, allreduce, exercises, cmdline, ... : every
top-level module that is not one of the floors above, and the package's own
__init__, which runs before any of its modules) ; intro, case1, case2, own ; cli
and __main__. A module imports only from its own floor's package or below;
runtime and common import nothing from ddp_lessons.

The graph is read from the source (ast), not by importing it, so imports
inside functions count as well, and so do import strings: a string constant
that is exactly a module of the package, optionally with ":name"
("ddp_lessons.case1.cli:cli_command" in cli.COMMANDS, the argument of an
importlib.import_module("ddp_lessons.x")).

How an import becomes edges, the way Python executes it. Importing module T
from module M runs T and, first, every package above T not yet loaded. The
packages above M are always loaded (partly) before M runs, so they are not
edges; every other package above T is. So `from . import y` in x/sub is the
edge x/sub -> x.y only: Python finds x in sys.modules (x/__init__ may be half
way through importing x/sub) and loads its submodule y. But `from . import
name`, where `name` is not a submodule, reads a name from x/__init__: the edge
x/sub -> x, and with x/__init__ importing x/sub that is a cycle, a real one
(the name may not be bound yet). `from pkg import a` is an edge to pkg (unless
pkg is above M and only submodules are taken from it), plus one to pkg.a where
a is a module.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "ddp_lessons"
CASES = ("intro", "case1", "case2", "own")   # the floor above the ground: never import each other
TOP = ("cli", "__main__")             # the top floor
LEAVES = ("runtime", "common")        # import nothing from the package


def _modules(src: Path, package: str) -> dict[str, Path]:
    """Module name -> file, a package named by its __init__.py."""
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _from_base(node: ast.ImportFrom, here: str) -> str:
    """The module a `from X import ...` names, a relative one resolved against package `here`."""
    if not node.level:
        return node.module
    parts = here.split(".")
    return ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))


def _imported(name: str, path: Path, modules: dict[str, Path], package: str) -> set[str]:
    """The modules of the package that module `name` makes Python run: see the module docstring."""
    tree = ast.parse(path.read_text(), str(path))
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]  # what `.` means here
    import_string = re.compile(rf"{re.escape(package)}(\.\w+)+(:\w+)?")
    targets, reads_names = set(), set()  # reads_names: modules a name (not a submodule) is taken from
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _from_base(node, here)
            subs = {f"{base}.{a.name}" for a in node.names}
            targets |= {base} | (subs & modules.keys())
            if subs - modules.keys():
                reads_names.add(base)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and import_string.fullmatch(node.value):
            targets.add(node.value.partition(":")[0])
    ours = targets & modules.keys()
    unknown = {t for t in targets if t == package or t.startswith(package + ".")} - ours
    assert not unknown, f"{name} imports modules that do not exist: {sorted(unknown)}"
    loaded_before = {*_ancestors(name), name}
    edges = set()
    for t in ours:
        edges |= set(_ancestors(t)) - loaded_before
        if t not in loaded_before or t in reads_names:
            edges.add(t)
    return edges - {name}


def import_graph(src: Path = SRC, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (see the module docstring)."""
    modules = _modules(src, package)
    return {name: _imported(name, path, modules, package) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = "done"
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def _floor(name: str) -> str:
    """'ground', the name of a case package, or 'top'."""
    parts = name.split(".")
    if len(parts) == 1:
        return "ground"
    if parts[1] in TOP:
        return "top"
    return parts[1] if parts[1] in CASES else "ground"


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for name, targets in sorted(graph.items()):
        floor = _floor(name)
        for t in sorted(targets):
            to = _floor(t)
            if floor == "ground" and to != "ground" or floor in CASES and to not in ("ground", floor):
                wrong.append(f"{name} ({floor}) imports {t} ({to})")
    return wrong


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_the_graph_sees_every_kind_of_import(graph):
    # If one of these edges vanished, the reader above stopped seeing a kind of import.
    p = PACKAGE
    assert f"{p}.launcher.child" in graph[f"{p}.launcher.parent"]          # from . import child
    assert f"{p}.runtime" in graph[f"{p}.launcher.parent"]                 # from ..runtime import x
    assert f"{p}.launcher" in graph[f"{p}.intro.workers"]                  # from ..launcher import x
    assert f"{p}.case2.timing" in graph[f"{p}.case2.lightning"]            # inside a function
    assert {f"{p}.case1", f"{p}.case1.cli", f"{p}.case2.cli"} <= graph[f"{p}.cli"]  # import strings
    assert graph[f"{p}.__main__"] == {f"{p}.cli"}
    assert {"ground", "top", *CASES} == {_floor(n) for n in graph}


def test_no_import_cycle(graph):
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_arrows_point_down(graph):
    wrong = layering_violations(graph)
    assert not wrong, "imports against the floors:\n" + "\n".join(wrong)


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaves_import_nothing_from_the_package(graph, leaf):
    assert graph[f"{PACKAGE}.{leaf}"] == set()


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_the_model_on_a_package_made_up_for_it(tmp_path):
    # pkg/x/__init__ imports pkg.x.sub; pkg.x.sub imports its sibling pkg.x.y
    # through the package: Python runs that without a cycle, and so does the model.
    _write(tmp_path, {"pkg/__init__.py": "from .x import f\n",
                      "pkg/x/__init__.py": "from .sub import f\n",
                      "pkg/x/sub.py": "from . import y\ndef f():\n    return y.g()\n",
                      "pkg/x/y.py": "def g():\n    from ..other import h\n    return h\n",
                      "pkg/other.py": '"""pkg.x.sub:f in a sentence is no import string."""\nh = 1\n'})
    g = import_graph(tmp_path, "pkg")
    assert g == {"pkg": {"pkg.x"}, "pkg.x": {"pkg.x.sub"}, "pkg.x.sub": {"pkg.x.y"},
                 "pkg.x.y": {"pkg.other"}, "pkg.other": set()}
    assert find_cycle(g) is None
    # An import string naming pkg.x.y: importing it from pkg.other runs pkg/x/__init__ first.
    _write(tmp_path, {"pkg/other.py": "h = 'pkg.x.y:g'\n"})
    g = import_graph(tmp_path, "pkg")
    assert g["pkg.other"] == {"pkg.x", "pkg.x.y"}
    assert find_cycle(g) == ["pkg.x", "pkg.x.sub", "pkg.x.y", "pkg.other", "pkg.x"]
    # A name read from the package's own __init__ by a module inside it: a cycle.
    _write(tmp_path, {"pkg/other.py": "h = 1\n", "pkg/x/sub.py": "from . import y, f as _f\n"})
    g = import_graph(tmp_path, "pkg")
    assert g["pkg.x.sub"] == {"pkg.x", "pkg.x.y"}
    assert find_cycle(g) == ["pkg.x", "pkg.x.sub", "pkg.x"]


def test_the_floors_on_made_up_edges():
    p = PACKAGE
    assert layering_violations({f"{p}.records": {f"{p}.case1.data"},       # ground -> case
                                f"{p}.case1.train": {f"{p}.case2.model"},  # case -> other case
                                f"{p}.intro.cli": {f"{p}.cli"},            # case -> top
                                f"{p}.case2.cli": {f"{p}.case2", f"{p}.cmdline"},  # fine
                                f"{p}.cli": {f"{p}.case1.cli"}}) == [      # fine
        f"{p}.case1.train (case1) imports {p}.case2.model (case2)",
        f"{p}.intro.cli (intro) imports {p}.cli (top)",
        f"{p}.records (ground) imports {p}.case1.data (case1)"]
