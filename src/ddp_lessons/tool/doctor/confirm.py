"""`--confirm`: each suspicion that has a knob, tried. The command runs again in interleaved rounds, as
it is and with one knob changed at construction (DDP's bucket cap, find_unused_parameters, static_graph,
gradient_as_bucket_view, a compression hook; the DataLoader's workers and pinning; torch's threads per
rank), and the seconds per optimizer step after the warm-up are paired round by round: confirmed (faster
in every round), refuted (slower in every round) or not resolvable in this many rounds.
"""

from __future__ import annotations

from typing import Any

import sys
from dataclasses import dataclass, field

from .. import spread
from ..diagnosis.findings import threads_knob
from ..diagnosis.setting import setting_of
from . import command as cmd

AS_IS = "as it is"


@dataclass(frozen=True)
class Knob:
    """A change the doctor can make without the script's code: `name` as printed, the cause it tests,
    and `knobs` as the recorder applies them ({"ddp": {...}, "loader": {...}, "threads": n, "hook": dtype})."""
    name: str
    cause: str
    knobs: dict = field(default_factory=dict)


def parse(text: str) -> Knob:
    """`--knob ddp.bucket_cap_mb=50`, `loader.num_workers=2`, `threads=1`, `hook=bf16`."""
    key, sep, value = text.partition("=")
    if not sep or not value:
        raise cmd.DoctorError(f"--knob {text!r}: use NAME=VALUE, e.g. ddp.bucket_cap_mb=50, loader.num_workers=2, "
                              "threads=1, hook=bf16")
    val: Any = {"true": True, "false": False}.get(value.lower(), value)
    if isinstance(val, str):
        try:
            val = int(val) if val.isdigit() else float(val)
        except ValueError:
            pass
    where, _, name = key.rpartition(".")
    if where in ("ddp", "loader"):
        return Knob(text, "", {where: {name: val}})
    if key in ("threads", "hook"):
        return Knob(text, "", {key: val})
    raise cmd.DoctorError(f"--knob {text!r}: the doctor sets ddp.<argument>, loader.<argument>, threads or hook")


def name_of(knobs: dict) -> str:
    """A knob as printed: `bucket_cap_mb=25`, `num_workers=1`, `threads=1`, `hook=bf16`."""
    parts = [f"{k}={v}" for where in ("ddp", "loader") for k, v in (knobs.get(where) or {}).items()
             if k != "persistent_workers"]
    parts += [f"{k}={knobs[k]}" for k in ("threads", "hook") if knobs.get(k)]
    return ", ".join(parts)


def plan(diagnosis, run, most: int = 4) -> list[Knob]:
    """The knobs that test the run's findings (each finding's `knob`, in the findings' order), then
    what the notes name: find_unused_parameters with nothing unused, threads on shared cores."""
    out = [Knob(name_of(f.knob), f.cause, f.knob) for f in diagnosis.findings if f.knob]
    model = run[0].model
    if model.get("find_unused_parameters") and model.get("unused_parameter_bytes") == 0:
        out.append(Knob("find_unused_parameters=False", "find_unused_parameters with nothing unused",
                        {"ddp": {"find_unused_parameters": False}}))
    threads = threads_knob(setting_of(run))
    if threads:
        out.append(Knob(name_of(threads), "ranks sharing cores", threads))
    seen, unique = set(), []
    for k in out:
        if k.name not in seen:
            seen.add(k.name)
            unique.append(k)
    return unique[:most]


def per_step(ran) -> float | None:
    """Seconds per optimizer step after the warm-up, on the slowest rank (None where too few steps)."""
    out = []
    for r in ran.ranks:
        d = r.get("doctor") or {}
        (a, b), n = d.get("window") or (None, None), (d.get("optimizer_steps") or 0) - (d.get("warmup") or 0)
        if a is None or b is None or n < 1:
            return None
        out.append((b - a) / n)
    return max(out) if out else None


def rounds(command: list[str], knobs: list[Knob], n: int = spread.MIN_ROUNDS, steps: int = 20, warmup: int = 3,
           timeout: float | None = None, log=sys.stderr) -> list[dict]:
    """Run the command as it is and with each knob, `n` interleaved rounds; each knob's verdict."""
    names = [AS_IS] + [k.name for k in knobs]
    by_name = {k.name: k for k in knobs}
    values: dict[str, list] = {name: [] for name in names}
    applied: dict[str, list] = {k.name: [] for k in knobs}
    for i, row in enumerate(spread.interleave(names, n)):
        for name in row:
            ran = cmd.run(command, steps, warmup, by_name[name].knobs if name in by_name else {}, timeout,
                          capture=True)
            values[name].append(per_step(ran))
            if name in by_name:
                applied[name].append(_applied(by_name[name], ran))
        if log is not None:
            print(f"doctor --confirm: round {i + 1}/{n}: " + ", ".join(
                f"{name} {v * 1e3:.1f} ms" if (v := values[name][-1]) else f"{name} -" for name in names),
                file=log, flush=True)
    out = []
    for k in knobs:
        cmp = spread.compare_rounds(values[AS_IS], values[k.name])
        out.append({"knob": k.name, "cause": k.cause, "knobs": k.knobs, "as_is": values[AS_IS],
                    "with": values[k.name], "compare": cmp, "verdict": verdict(cmp),
                    "applied": all(applied[k.name]) if applied[k.name] else None})
    return out


def verdict(cmp: dict) -> str:
    v = cmp["verdict"]
    if cmp["rounds"] == 0:
        return "not measured: the runs did not reach their warm-up's end"
    lo, hi, med = 1 - cmp["max_ratio"], 1 - cmp["min_ratio"], 1 - cmp["median_ratio"]
    if v == spread.B_FASTER:
        return f"confirmed: saves {med:.0%} per step ({lo:.0%}..{hi:.0%} over {cmp['rounds']} rounds)"
    if v == spread.A_FASTER:
        return f"refuted: costs {-med:.0%} per step ({-hi:.0%}..{-lo:.0%} over {cmp['rounds']} rounds)"
    if cmp["rounds"] < spread.MIN_ROUNDS:
        return f"not resolvable: {cmp['rounds']} rounds (at least {spread.MIN_ROUNDS} decide)"
    return f"not resolvable in {cmp['rounds']} rounds: {med:+.0%} median, the rounds disagree ({lo:+.0%}..{hi:+.0%})"


def _applied(knob: Knob, ran) -> bool:
    """Whether the knob reached the run (a script that sets a value after construction overrides it)."""
    if not ran.ranks:
        return False
    r = ran.ranks[0]
    model, loader = r.get("model") or {}, r.get("loader") or {}
    for key, val in (knob.knobs.get("ddp") or {}).items():
        if key == "bucket_cap_mb" and model.get("bucket_cap_bytes") not in (None, int(val * 2 ** 20)):
            return False
        if key in model and isinstance(val, bool) and model[key] != val:
            return False
    for key, val in (knob.knobs.get("loader") or {}).items():
        if key in loader and loader[key] != val:
            return False
    if knob.knobs.get("threads") and r.get("threads") not in (None, knob.knobs["threads"]):
        return False
    return True
