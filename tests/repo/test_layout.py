"""The house can be read from its docstrings: each package names its modules,
module docstrings stay short, every name a notebook calls says which notebook
defines it, and the README's layout is made from those docstrings."""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path

import notebook_names

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import layout  # noqa: E402  (scripts/layout.py, as tests/repo/test_notebooks.py reads scripts/notebooks.py)

PACKAGE = ROOT / "src" / "ddp_lessons"
MODULE_DOC_LINES = 10      # a module's docstring: what it is for; the why sits at the line it explains
PACKAGE_DOC_LINES = 20     # a package's: also a line or two per module


def _doc(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""


def test_every_module_is_named_in_its_package_docstring():
    missing = {}
    for init in PACKAGE.rglob("__init__.py"):
        words = set(re.findall(r"\w+", _doc(init)))
        members = [p.stem for p in init.parent.glob("*.py") if p.stem != "__init__"]
        members += [d.name for d in init.parent.iterdir() if (d / "__init__.py").exists()]
        if absent := sorted(m for m in members if m not in words):
            missing[str(init.parent.relative_to(PACKAGE.parent))] = absent
    assert not missing, f"modules their package's docstring does not name: {missing}"


def test_docstrings_are_short():
    long = {}
    for path in PACKAGE.rglob("*.py"):
        limit = PACKAGE_DOC_LINES if path.name == "__init__.py" else MODULE_DOC_LINES
        if (n := len(_doc(path).splitlines())) > limit:
            long[str(path.relative_to(PACKAGE))] = n
    assert not long, f"docstrings over {MODULE_DOC_LINES} lines ({PACKAGE_DOC_LINES} for a package): {long}"


def test_every_name_a_notebook_calls_says_which_notebook_defines_it():
    called = notebook_names.called()
    assert len(called) > 100   # the reader above still finds the notebooks' calls
    wrong = []
    for key, (obj, first) in sorted(called.items()):
        said = re.findall(r"Defined in notebook\s+(\d\d_\w+)", inspect.getdoc(obj) or "")
        if said != [first]:
            wrong.append(f"{key}: first called in {first}, its docstring says {said or 'nothing'}")
    assert not wrong, "\n".join(wrong)


def test_the_readme_layout_is_made_from_the_docstrings():
    assert layout.readme_block((ROOT / "README.md").read_text()) == layout.layout(), \
        "README.md's layout is out of date: python scripts/layout.py --write"


def test_the_layout_names_every_package_and_module():
    text = layout.layout()
    for path in PACKAGE.rglob("*.py"):
        assert re.search(rf"(^|[\s·]){re.escape(path.stem if path.stem != '__init__' else path.parent.name + '/')}"
                         rf"($|[\s·])", text, re.M), path
