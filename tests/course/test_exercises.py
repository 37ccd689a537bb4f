"""The notebooks' self-checks say right, close or wrong, and why."""

import pytest

from ddp_lessons.course import exercises
from ddp_lessons.cases.case1 import exercises as case1_exercises  # noqa: F401 - registers 01-03
from ddp_lessons.cases.case2 import exercises as case2_exercises  # noqa: F401 - registers 04-06
from ddp_lessons.cases.intro import exercises as intro_exercises  # noqa: F401 - registers 00
from ddp_lessons.cases.own import exercises as own_exercises  # noqa: F401 - registers 07


def _verdict(capsys, name, answer):
    exercises.check(name, answer)
    return capsys.readouterr().out.strip()


def test_number_answers(capsys):
    assert _verdict(capsys, "00.1", 18) == "right"
    assert _verdict(capsys, "00.1", 17).startswith("close: busbw in GB/s is 6% too small")
    assert _verdict(capsys, "00.1", 12).startswith("wrong: busbw in GB/s is too small by a factor 1.5")
    assert _verdict(capsys, "00.1", "a lot").startswith("wrong: expected a number")


def test_unanswered_and_unknown(capsys):
    assert _verdict(capsys, "00.2", ...).startswith("not answered yet")
    with pytest.raises(KeyError, match="no exercise '99.9'"):
        exercises.check("99.9", 1)


def test_choice_answers_explain_the_wrong_ones(capsys):
    assert _verdict(capsys, "00.3", 2) == "right"
    assert "collateral" in _verdict(capsys, "00.3", 3)


def test_every_notebook_exercise_is_registered_by_the_module_it_imports():
    import importlib
    import re
    from pathlib import Path
    for src in (Path(__file__).resolve().parents[2] / "notebooks" / "src").glob("*.py"):
        text = src.read_text()
        asked = set(re.findall(r'check\("(\d\d\.\d+)"', text))
        (module,) = re.findall(r"^from (ddp_lessons\.[a-z0-9_.]+) import .*\bcheck\b", text, re.M)
        assert importlib.import_module(module).check is exercises.check, src.name
        registered = {n for n, fn in exercises._EXERCISES.items() if fn.__module__.startswith(module)}
        assert asked and asked <= registered, src.name
