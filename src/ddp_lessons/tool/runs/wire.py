"""`read(cls, d)`: a dataclass read from a JSON dict by its field names, once (what a worker returned
beside its timer, a row of a record), so the code after it reads attributes; the JSON stays the wire."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, TypeVar

T = TypeVar("T")


def read(cls: type[T], d: Mapping[str, Any], **convert: Callable[[Any], Any]) -> T:
    """An instance of the dataclass `cls` from `d`: each field from the key of its name, through
    `convert[name]` where given. A field with a default keeps it where the key is absent; one without
    raises KeyError, as `d[name]` would. Keys that are no field are left out."""
    kw = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in d:
            value = d[f.name]
            kw[f.name] = convert[f.name](value) if f.name in convert else value
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise KeyError(f.name)
    return cls(**kw)
