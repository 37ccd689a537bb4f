"""Options that refuse nonsense: the small base both cases' options share.

A case's options are a dataclass on `Options` whose fields declare their type (a choice is
`Literal[...]`), their role (`workload`, `switch` or `measurement`) and limits where nonsense is obvious.
Every value set (construction, `replace`, assignment) is checked against its field; a bad one raises
a one-line ValueError naming the field, the value and what is allowed (`Options.check`). Presets are
data (`PRESETS`: name -> changes from the defaults), and `diff` says what two runs disagree on.
Defined in notebook 01_case1_broken.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import types
import typing

ROLES = ("workload", "switch", "measurement")
LIMITS = ("min", "above", "fraction")
_NONE = type(None)
_MISSING = object()
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def option(default, role: str, doc: str = "", **limits) -> dataclasses.Field:
    """A field with its role, a one-line doc and its limits (kept in the field's metadata): `min` (>=),
    `above` (>), `fraction` (a float must be in (0, 1])."""
    if role not in ROLES:
        raise ValueError(f"role {role!r}: use one of {', '.join(map(repr, ROLES))}")
    if set(limits) - set(LIMITS):
        raise ValueError(f"limits {sorted(set(limits) - set(LIMITS))}: use {', '.join(LIMITS)}")
    return dataclasses.field(default=default, metadata={"role": role, "doc": doc, **limits})


def workload(default, doc: str = "", **limits) -> dataclasses.Field:
    """What is trained: the post's numbers (or a stand-in's scale)."""
    return option(default, "workload", doc, **limits)


def switch(default, doc: str = "", **limits) -> dataclasses.Field:
    """One behaviour of the run; the default is the post's. A fix (the presets) or an experiment flips it."""
    return option(default, "switch", doc, **limits)


def measurement(default, doc: str = "", **limits) -> dataclasses.Field:
    """Only how the run is measured (steps, seed, timing barriers)."""
    return option(default, "measurement", doc, **limits)


# -- types: what a value may be, said in words, parsed from text ---------------
def members(hint) -> tuple:
    """A union's members (`int | None` -> (int, NoneType)), else the hint alone."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _is_literal(part) -> bool:
    return typing.get_origin(part) is typing.Literal


def _in_range(value, meta) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return False
    if isinstance(value, float) and meta.get("fraction"):
        return 0 < value <= 1
    return value >= meta.get("min", -math.inf) and value > meta.get("above", -math.inf)


def fits(part, value, meta) -> bool:
    """Whether `value` is one of `part` (a member of a field's type) within the field's limits."""
    if part is _NONE:
        return value is None
    if _is_literal(part):
        return any(type(value) is type(a) and value == a for a in typing.get_args(part))
    if part is bool or part is str:
        return isinstance(value, part)
    if isinstance(value, bool):
        return False                      # True is an int to Python, not a count to us
    if part is int:
        return isinstance(value, int) and _in_range(value, meta)
    if part is float:
        return isinstance(value, (int, float)) and _in_range(value, meta)
    raise TypeError(f"options cannot check a field of type {part!r}")


def _bound(meta) -> str:
    return "".join(f" {op} {meta[k]}" for k, op in (("min", ">="), ("above", ">")) if k in meta)


def describe(part, meta) -> str:
    """`part` in words, for the error: "one of 'same', 'halved'", "an int >= 1", ..."""
    if part is _NONE:
        return "None"
    if _is_literal(part):
        allowed = typing.get_args(part)
        return repr(allowed[0]) if len(allowed) == 1 else "one of " + ", ".join(map(repr, allowed))
    if part is bool:
        return "True or False"
    if part is float and meta.get("fraction"):
        return "a float in (0, 1]"
    return {int: "an int", float: "a number", str: "a string"}[part] + _bound(meta)


def _parse_as(part, raw: str):
    if _is_literal(part):
        return next((a for a in typing.get_args(part) if str(a) == raw), _MISSING)
    if part is bool:
        low = raw.lower()
        return True if low in _TRUE else False if low in _FALSE else _MISSING
    if part is str:
        return raw
    try:
        return part(raw)                  # int or float
    except (TypeError, ValueError):
        return _MISSING


def parse(hint, raw: str):
    """Text (`--set NAME=VALUE`'s VALUE) as a value of `hint`; the raw text where none fits."""
    parts = members(hint)
    if _NONE in parts and raw.lower() in ("none", "null"):
        return None
    order = [p for p in parts if _is_literal(p)] + [p for p in (bool, int, float, str) if p in parts]
    for part in order:                    # "3" for `float | int` is the count 3, not 3.0
        value = _parse_as(part, raw)
        if value is not _MISSING:
            return value
    return raw                            # refused by the field's check, with its message


@functools.cache
def _spec(cls) -> dict:
    """name -> (type, metadata) for every field of an options class."""
    hints = typing.get_type_hints(cls)
    return {f.name: (hints[f.name], f.metadata) for f in dataclasses.fields(cls)}


# -- the base ------------------------------------------------------------------
class Options:
    """Base of a case's options dataclass: checked values, roles, presets, `replace`, `diff`.

    A subclass is a `@dataclasses.dataclass` whose fields come from `workload`,
    `switch` or `measurement`, and sets `PRESETS` (name -> changes from the
    defaults). A field's type may be a union with choices: `int | Literal["cores"]`, `... | None`.
    Defined in notebook 01_case1_broken.
    """
    PRESETS: dict = {}   # not annotated, so not a field

    @classmethod
    def label(cls) -> str:
        """'case1.Options' for ddp_lessons.cases.case1.options.Options: how errors name the class."""
        parts = cls.__module__.split(".")
        package = parts[-2] if parts[-1] == "options" and len(parts) > 1 else parts[-1]
        return f"{package}.{cls.__qualname__}"

    @classmethod
    def check(cls, name: str, value) -> None:
        """Raise ValueError unless `value` is allowed for field `name` (its type and limits), e.g.
        `case1.Options.batch='halve': use one of 'same', 'halved', 'scale_lr'`."""
        spec = _spec(cls)
        if name not in spec:
            raise AttributeError(f"{cls.label()} has no option {name!r}: use one of {', '.join(spec)}")
        hint, meta = spec[name]
        parts = members(hint)
        if not any(fits(p, value, meta) for p in parts):
            allowed = " or ".join(describe(p, meta) for p in parts)
            raise ValueError(f"{cls.label()}.{name}={value!r}: use {allowed}")

    def __setattr__(self, name, value):
        # Every assignment is checked: the dataclass __init__, dataclasses.replace and o.x = v.
        type(self).check(name, value)
        object.__setattr__(self, name, value)

    @classmethod
    def preset(cls, name: str, **overrides):
        """The options of preset `name` (see PRESETS), with `overrides` on top."""
        if name not in cls.PRESETS:
            raise ValueError(f"{cls.label()} preset {name!r}: use one of {', '.join(map(repr, cls.PRESETS))}")
        return cls(**{**cls.PRESETS[name], **overrides})

    @classmethod
    def fields_by_role(cls) -> dict[str, list[str]]:
        """Role -> the names of its fields, in field order; every role present."""
        out = {role: [] for role in ROLES}
        for name, (_, meta) in _spec(cls).items():
            out[meta["role"]].append(name)
        return out

    @classmethod
    def choices(cls) -> dict[str, tuple]:
        """Field -> its allowed values, for every field with a `Literal[...]` among its types."""
        out = {}
        for name, (hint, _) in _spec(cls).items():
            allowed = [a for p in members(hint) if _is_literal(p) for a in typing.get_args(p)]
            if allowed:
                out[name] = tuple(allowed)
        return out

    @classmethod
    def parse_override(cls, text: str) -> tuple[str, object]:
        """'find_unused_parameters=false' -> ('find_unused_parameters', False), typed by the field."""
        name, sep, raw = text.partition("=")
        name, spec = name.strip(), _spec(cls)
        if not sep or name not in spec:
            raise ValueError(f"--set {text!r}: use NAME=VALUE with NAME one of {', '.join(spec)}")
        value = parse(spec[name][0], raw.strip())
        cls.check(name, value)
        return name, value

    @classmethod
    def override_arg(cls, text: str) -> tuple[str, object]:
        """`parse_override` as argparse's `type=`: a refused `--set` is argparse's one-line error."""
        try:
            return cls.parse_override(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    def replace(self, **changes):
        """A copy with `changes`, checked like a new instance."""
        return dataclasses.replace(self, **changes)

    def diff(self, other, role: str | None = None) -> dict:
        """Fields whose values differ: name -> (self's, other's); only `role`'s fields if given."""
        if role is not None and role not in ROLES:
            raise ValueError(f"role {role!r}: use one of {', '.join(map(repr, ROLES))}")
        a, b = dataclasses.asdict(self), dataclasses.asdict(other)
        keep = self.fields_by_role()[role] if role else a
        return {k: (a[k], b[k]) for k in a if a[k] != b[k] and k in keep}
