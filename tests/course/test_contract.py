"""A new case, made by course/contract.py's recipe, is found by the registry, its commands reach the command
line with its title, and what it lacks is named."""

import sys

import pytest

from ddp_lessons.cases import problems
from ddp_lessons.course.contract import SKELETON, Case

TOY = '''from ddp_lessons.course.contract import Case

CASE = Case("toy", "a toy case", ("08_toy",), commands={"toy": "toycases.toy.cli:toy_command"})
'''
CLI = '''def toy_command(p):
    p.add_argument("--n", type=int, default=1)
    return lambda args: print("toy", args.n)
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    root = tmp_path / "toycases"
    (root / "toy").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "toy" / "__init__.py").write_text(TOY)
    for m in SKELETON:
        (root / "toy" / f"{m}.py").write_text(CLI if m == "cli" else "")
    (tmp_path / "notebooks" / "src").mkdir(parents=True)
    (tmp_path / "notebooks" / "src" / "08_toy.py").write_text("# %% [markdown]\n# # 08 · a toy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path, root
    for name in [n for n in sys.modules if n.startswith("toycases")]:
        del sys.modules[name]


def test_a_case_made_by_the_recipe_has_no_problem_and_reaches_the_command_line(toy, monkeypatch, capsys):
    tmp_path, _ = toy
    assert problems("toy", package="toycases", notebooks=tmp_path / "notebooks") == []
    import ddp_lessons.cases as cases
    from ddp_lessons import cli
    import toycases.toy
    monkeypatch.setattr(cases, "registry", lambda: {"toy": toycases.toy.CASE})
    parser, _ = cli.build_parser()
    assert "toy: a toy case (notebooks 08_toy)" in parser.format_help()
    assert cli.main(["toy", "--n", "3"]) == 0 and capsys.readouterr().out.strip() == "toy 3"


def test_what_a_case_lacks_is_named(toy):
    tmp_path, root = toy
    (root / "toy" / "claims.py").unlink()
    (tmp_path / "notebooks" / "src" / "08_toy.py").unlink()
    (root / "toy" / "__init__.py").write_text(TOY.replace('"toy", "a toy', '"toys", "a toy').replace(
        "cli:toy_command", "cli:missing"))
    found = problems("toy", package="toycases", notebooks=tmp_path / "notebooks")
    assert any(p.startswith("module claims") for p in found)
    assert "notebook source notebooks/src/08_toy.py" in found
    assert any("is not its package's name" in p for p in found)
    assert any("does not resolve" in p for p in found)


def test_every_field_of_a_case_is_read():
    """name (the registry), title and notebooks (the command line's help, the notebook scripts), commands
    (the command line): no field that no code reads."""
    import dataclasses
    assert [f.name for f in dataclasses.fields(Case)] == ["name", "title", "notebooks", "commands"]
