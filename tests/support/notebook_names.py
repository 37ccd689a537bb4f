"""The package's public names a notebook calls, and the notebook that calls each first.

Read from the notebooks' sources (notebooks/src/*.py, ast): a name imported
from ddp_lessons and called, or an attribute of an imported ddp_lessons module
or class that is called (`verdicts.same_counts(...)`, `case1.Options.fixed()`).
Used by tests/repo/test_layout.py: each such function or class says "Defined in
notebook NN_name" in its docstring, naming that first notebook (as d2l tags
every helper with the section that defines it).
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "notebooks" / "src"


def _bindings(tree: ast.Module) -> dict[str, object]:
    """Local name -> the ddp_lessons object it is bound to by the notebook's imports."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ddp_lessons":
            mod = importlib.import_module(node.module)
            for a in node.names:
                obj = getattr(mod, a.name, None)
                if obj is None:
                    obj = importlib.import_module(f"{node.module}.{a.name}")
                out[a.asname or a.name] = obj
    return out


def _resolve(node: ast.expr, names: dict[str, object]):
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, names)
        return getattr(base, node.attr, None) if base is not None else None
    return None


def _ours(obj) -> bool:
    return (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismethod(obj)) \
        and (getattr(obj, "__module__", "") or "").startswith("ddp_lessons")


def called() -> dict[str, tuple[object, str]]:
    """'module.qualname' -> (the function or class, the first notebook that calls it)."""
    first = {}
    for path in sorted(SOURCES.glob("*.py")):
        tree = ast.parse(path.read_text())
        names = _bindings(tree)
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Call):
                targets.append(node.func)
                # a worker handed to launch(fn, ...) is called too
                targets += [a for a in node.args[:1] if isinstance(a, (ast.Name, ast.Attribute))]
            for t in targets:
                obj = _resolve(t, names)
                if inspect.ismethod(obj):  # a classmethod: the class says where it is defined
                    obj = obj.__self__
                if _ours(obj):
                    key = f"{obj.__module__}.{obj.__qualname__}"
                    first.setdefault(key, (obj, path.stem))
    return first
