"""The package's import graph: no cycle, and arrows only point down.

Floors (see src/ddp_lessons/__init__.py), from the ground up: `tool` (what a
practitioner imports; the package's own __init__, which runs before any of its
modules, belongs here and imports only the tool) ; `course` (the course's
machinery) ; the cases under `cases` (intro, case1, case2, own: never each
other) ; `cli` and `__main__`. A module imports only from its own floor or
below. Inside the tool, its parts have an order of their own (TOOL_TIERS): a
part imports only parts of its own tier or a lower one, and the first tier's
parts import nothing from ddp_lessons.

The graph is read from the source (ast), not by importing it, so imports
inside functions count as well, and so do import strings: a string constant
that is exactly a module of the package, optionally with ":name"
("ddp_lessons.cases.case1.cli:cli_command" in a case's `Case.commands`, the argument of an
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

ROOT = Path(__file__).resolve().parents[2]
SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "ddp_lessons"
from ddp_lessons.cases import NAMES as CASES   # noqa: E402 - the cases, as the package lists them: never each other
TOP = ("cli", "__main__")             # the top floor
FLOORS = ("tool", "course", "cases", "top")  # bottom up; a case's floor is its own name, at "cases"
# The tool's parts, bottom up (see src/ddp_lessons/tool/__init__.py).
TOOL_TIERS = (("runtime", "paths", "spread", "ddp", "hooks", "kineto"),      # import nothing from the package
              ("verdict", "records", "launcher", "timing", "runs"),
              ("allreduce", "commands", "diagnosis"),
              ("plots", "predict", "doctor"))
LEAVES = TOOL_TIERS[0]


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
    """'tool', 'course', the name of a case, or 'top'."""
    parts = name.split(".")
    if len(parts) == 1 or parts[1] == "tool":
        return "tool"
    if parts[1] in TOP:
        return "top"
    if parts[1] == "cases":
        return parts[2] if len(parts) > 2 else "cases"
    return parts[1]


def _level(floor: str) -> int:
    return FLOORS.index("cases" if floor in CASES else floor)


def _tier(name: str) -> int | None:
    """The tier of a module of the tool's parts (None: the tool's own __init__ or outside the tool)."""
    parts = name.split(".")
    if len(parts) < 3 or parts[1] != "tool":
        return None
    return next(i for i, tier in enumerate(TOOL_TIERS) if parts[2] in tier)


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for name, targets in sorted(graph.items()):
        floor = _floor(name)
        for t in sorted(targets):
            to = _floor(t)
            if _level(to) > _level(floor) or floor in CASES and to in CASES and to != floor:
                wrong.append(f"{name} ({floor}) imports {t} ({to})")
            elif _tier(name) is not None and _tier(t) is not None and _tier(t) > _tier(name):
                wrong.append(f"{name} (tool tier {_tier(name)}) imports {t} (tool tier {_tier(t)})")
    return wrong


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_the_graph_sees_every_kind_of_import(graph):
    # If one of these edges vanished, the reader above stopped seeing a kind of import.
    p, t, c = PACKAGE, f"{PACKAGE}.tool", f"{PACKAGE}.cases"
    assert f"{t}.launcher.child" in graph[f"{t}.launcher.parent"]          # from . import child
    assert f"{t}.runtime" in graph[f"{t}.launcher.parent"]                 # from ..runtime import x
    assert f"{t}.launcher" in graph[f"{c}.intro.workers"]                  # from ...tool.launcher import x
    assert f"{c}.case2.lightning_timer" in graph[f"{c}.case2.lightning"]   # inside a function
    assert {f"{c}.case1.cli", f"{c}.case1.synthetic"} <= graph[f"{c}.case1"]   # import strings (its Case)
    assert f"{c}" in graph[f"{p}.cli"] and f"{t}.doctor.cli" in graph[f"{p}.cli"]
    assert graph[f"{p}.__main__"] == {f"{p}.cli"}
    assert {"tool", "course", "top", *CASES} == {_floor(n) for n in graph} - {"cases"}
    assert {n.split(".")[2] for n in graph if _tier(n) is not None} == {m for tier in TOOL_TIERS for m in tier}


def test_every_case_declares_itself_and_has_the_same_skeleton():
    from ddp_lessons.cases import registry
    from ddp_lessons.cases import problems
    for name in registry():
        missing = problems(name, notebooks=ROOT / "notebooks")
        assert not missing, f"case {name} lacks {missing} (course/contract.py's recipe)"
        folder = SRC / PACKAGE / "cases" / name
        stems = [p.stem for p in folder.rglob("*.py") if p.stem != "__init__"]
        assert len(stems) == len(set(stems)), f"case {name}: two modules share a name"


def test_every_notebook_is_one_cases_in_course_order():
    from ddp_lessons.cases import registry
    declared = [nb for case in registry().values() for nb in case.notebooks]
    sources = sorted(p.stem for p in (ROOT / "notebooks" / "src").glob("*.py"))
    assert declared == sources, "each notebook belongs to one case, and the registry lists them in order"


def test_no_import_cycle(graph):
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_arrows_point_down(graph):
    wrong = layering_violations(graph)
    assert not wrong, "imports against the floors:\n" + "\n".join(wrong)


@pytest.mark.parametrize("leaf", LEAVES)
def test_leaves_import_nothing_from_the_package(graph, leaf):
    assert graph[f"{PACKAGE}.tool.{leaf}"] == set()


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
    p, t, c = PACKAGE, f"{PACKAGE}.tool", f"{PACKAGE}.cases"
    assert layering_violations({f"{t}.records": {f"{c}.case1.data"},          # tool -> case
                                f"{t}.verdict": {f"{p}.course.exercises"},    # tool -> course
                                f"{t}.launcher.parent": {f"{t}.diagnosis"},   # tool tier 1 -> tier 2
                                f"{p}": {f"{p}.course"},                      # the package -> course
                                f"{c}.case1.train": {f"{c}.case2.model"},     # case -> other case
                                f"{c}.intro.cli": {f"{p}.cli"},               # case -> top
                                f"{c}.case2.cli": {f"{c}.case2", f"{t}.commands", f"{p}.course.options"},  # fine
                                f"{t}.diagnosis.rules": {f"{t}.timing", f"{t}.spread"},                   # fine
                                f"{p}.cli": {f"{c}.case1.cli"}}) == [         # fine
        f"{p} (tool) imports {p}.course (course)",
        f"{c}.case1.train (case1) imports {c}.case2.model (case2)",
        f"{c}.intro.cli (intro) imports {p}.cli (top)",
        f"{t}.launcher.parent (tool tier 1) imports {t}.diagnosis (tool tier 2)",
        f"{t}.records (tool) imports {c}.case1.data (case1)",
        f"{t}.verdict (tool) imports {p}.course.exercises (course)"]


def test_importing_the_package_loads_the_tool_only():
    # What `import ddp_lessons` runs, in a fresh interpreter: nothing of the course or its cases.
    import subprocess
    import sys
    code = "import sys, ddp_lessons; print(sorted(m for m in sys.modules if m.startswith('ddp_lessons.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = eval(out)
    assert loaded and all(m.startswith(f"{PACKAGE}.tool.") or m == f"{PACKAGE}.tool" for m in loaded), loaded
