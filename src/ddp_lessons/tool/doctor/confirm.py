"""`--confirm`: the knobs of the findings the diagnosis printed, tried in their order. The command runs
again in interleaved rounds, as it is and with one knob changed at construction (DDP's bucket cap,
find_unused_parameters, static_graph, gradient_as_bucket_view, a compression hook; the DataLoader's workers,
persistence and pinning, within the core budget; torch's threads in each rank's own process), and each
round is paired: the run from its first step to its end (the window: steady steps, evaluation and loader
starts in it) and the seconds per steady optimizer step. A knob is confirmed when the window is shorter in
every round, refuted when longer in every one, else not resolvable in this many rounds. The steps per
round come from the diagnosed run's own spread. What was measured is then ranked: each knob by what it
saved, each fix that needs code by what its finding measured.
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass, field
from typing import Any

from .. import spread
from ..diagnosis.findings import MIN_SHARE
from ..diagnosis.ranking import unused_none
from . import command as cmd
from .wire import REACHED_END, Knobs

AS_IS = "as it is"
MOST_KNOBS = 5        # knobs tried at most (each costs `rounds` more runs)
STEPS = (10, 200)     # steps per round chosen within these


@dataclass(frozen=True)
class Knob:
    """A change the doctor can make without the script's code: `name` as printed, the finding it tests
    (`cause`, its label) and `knobs` as the rank half applies them (`wire.Knobs`)."""
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
    return Knobs.of(knobs).name()


def plan(diagnosis, run, most: int = MOST_KNOBS) -> list[Knob]:
    """The knobs of the printed findings, in the findings' order, then find_unused_parameters where no rank
    left a parameter unused (a note); one per name, at most `most`."""
    out = [Knob(name_of(f.knob), f.label, f.knob) for f in diagnosis.findings if f.knob]
    if unused_none(run):
        out.append(Knob("find_unused_parameters=False", "find_unused_parameters with nothing unused",
                        {"ddp": {"find_unused_parameters": False}}))
    seen, unique = set(), []
    for k in out:
        if k.name not in seen:
            seen.add(k.name)
            unique.append(k)
    return unique[:most]


def choose_steps(run, effect: float = MIN_SHARE) -> tuple[int, str]:
    """Optimizer steps per round that resolve a saving of `effect` against this run's step-to-step spread:
    the difference of two means of n steps has a standard error of sd * sqrt(2 / n), so n >= 8 (sd /
    (effect * mean))^2 puts the effect at two of them. Within STEPS; says when the spread needs more."""
    per = []
    for r in run:
        it = r.iterations()
        if len(it) >= 5:
            per.append(it)
    if not per:
        return 20, "20 optimizer steps a round: too few steps measured to choose from their spread"
    it = max(per, key=statistics.median)
    # a robust spread (the interquartile range over 1.35 estimates a standard deviation): the first step of
    # each pass over a loader, or one with an evaluation in it, would otherwise set it alone
    q = statistics.quantiles(it, n=4)
    cv = (q[2] - q[0]) / 1.35 / statistics.median(it) if statistics.median(it) > 0 else 0.0
    need = math.ceil(8 * (cv / effect) ** 2)
    n = min(max(need, STEPS[0]), STEPS[1])
    why = (f"{n} optimizer steps a round: the steps here vary by {cv:.0%} (their interquartile range over 1.35, over "
           f"the median), which resolves a {effect:.0%} saving in {need} steps")
    if need > STEPS[1]:
        why += f"; capped at {STEPS[1]}: savings under about {math.sqrt(8 / n) * cv:.0%} may not resolve"
    return n, why


def per_step(ran) -> float | None:
    """Seconds per optimizer step in the measured window, on the slowest rank (None where too few steps)."""
    out = []
    for r in ran.ranks:
        d = r.get("doctor") or {}
        (a, b), first = d.get("window") or (None, None), (d.get("warmup") or 0)
        n = (d.get("optimizer_steps") or 0) - first - ((d.get("busy") or {}).get("steps") or 0)
        if a is None or b is None or n < 1:
            return None
        out.append((b - a) / n)
    return max(out) if out else None


def window(ran) -> float | None:
    """The run from its first step to its end, on the slowest rank (start-up left out: it is the same)."""
    out = [acc["wall"] - acc["before_first_step"] for r in ran.ranks if (acc := r.get("account"))]
    return max(out) if out and len(out) == len(ran.ranks) else None


def rounds(command: list[str], knobs: list[Knob], n: int = spread.MIN_ROUNDS, steps: int | None = 20,
           warmup: int = 3, timeout: float | None = None, log=sys.stderr) -> list[dict]:
    """Run the command as it is and with each knob, `n` interleaved rounds; each knob's verdict."""
    names = [AS_IS] + [k.name for k in knobs]
    by_name = {k.name: k for k in knobs}
    step_s: dict[str, list] = {name: [] for name in names}
    window_s: dict[str, list] = {name: [] for name in names}
    applied: dict[str, list] = {k.name: [] for k in knobs}
    for i, row in enumerate(spread.interleave(names, n)):
        for name in row:
            ran = cmd.run(command, steps, warmup, by_name[name].knobs if name in by_name else {}, timeout,
                          capture=True)
            ok = ran.returncode == 0 or bool(ran.ranks) and all(  # failed at exit, after every rank's end
                (r.get("doctor") or {}).get("reason") in REACHED_END for r in ran.ranks)
            step_s[name].append(per_step(ran) if ok else None)
            window_s[name].append(window(ran) if ok else None)
            if name in by_name:
                applied[name].append(_applied(by_name[name], ran) if ok else None)
        if log is not None:
            print(f"doctor --confirm: round {i + 1}/{n}: " + ", ".join(
                f"{name} {v:.3g} s" if (v := window_s[name][-1]) else f"{name} failed" for name in names),
                file=log, flush=True)
    out = []
    for k in knobs:
        cmp = spread.compare_rounds(window_s[AS_IS], window_s[k.name])
        steady = spread.compare_rounds(step_s[AS_IS], step_s[k.name])
        failed = sum(v is None for v in window_s[k.name])
        out.append({"knob": k.name, "cause": k.cause, "knobs": k.knobs, "as_is": window_s[AS_IS],
                    "with": window_s[k.name], "compare": cmp, "per_step": steady,
                    "verdict": verdict(cmp, failed), "per_step_line": steady_line(steady),
                    "applied": all(x for x in applied[k.name] if x is not None) if applied[k.name] else None})
    return out


def verdict(cmp: dict, failed: int = 0) -> str:
    if cmp["rounds"] == 0:
        return ("not measured: the command failed with the knob in every round (its output says why)" if failed else
                "not measured: the runs did not reach their warm-up's end")
    lo, hi, med = 1 - cmp["max_ratio"], 1 - cmp["min_ratio"], 1 - cmp["median_ratio"]
    tail = f" ({lo:.0%}..{hi:.0%} over {cmp['rounds']} rounds, the run from its first step)"
    if failed:
        tail += f"; the command failed in {failed} round(s) with it"
    if cmp["verdict"] == spread.B_FASTER:
        return f"confirmed: saves {med:.0%}, at least {lo:.0%} in every round" + tail
    if cmp["verdict"] == spread.A_FASTER:
        return f"refuted: costs {-med:.0%}, at least {-hi:.0%} in every round" + tail
    if cmp["rounds"] < spread.MIN_ROUNDS:
        return f"not resolvable: {cmp['rounds']} rounds (at least {spread.MIN_ROUNDS} decide)"
    return f"not resolvable in {cmp['rounds']} rounds: {med:+.0%} median, the rounds disagree ({lo:+.0%}..{hi:+.0%})"


def steady_line(cmp: dict) -> str:
    if not cmp["rounds"]:
        return ""
    med, lo, hi = 1 - cmp["median_ratio"], 1 - cmp["max_ratio"], 1 - cmp["min_ratio"]
    word = "saves" if med >= 0 else "costs"
    sign = 1 if med >= 0 else -1
    a, b = sorted((sign * lo, sign * hi))
    return f"a steady optimizer step: {word} {sign * med:.0%} ({a:.0%}..{b:.0%})"


def ranked(diagnosis, confirmed: list[dict]) -> list[tuple[str, float, str]]:
    """(what, share of the window, how it was measured), largest first: each confirmed knob by its median
    saving, each finding whose fix needs code by its measured share (its knob-less seconds)."""
    out = [(f"{c['knob']} ({c['cause']})" if c["cause"] else c["knob"], 1 - c["compare"]["median_ratio"],
            "saved, paired rounds") for c in confirmed if c["verdict"].startswith("confirmed")]
    tried = {c["cause"] for c in confirmed}
    out += [(f.label, f.window_share if f.saves is None else f.saves,
             f"{f.status} in the diagnosed run, needs your code" + ("" if f.saves is None else
                                                                    "; the part the change saves, modelled"))
            for f in diagnosis.findings if f.needs_code and f.label not in tried]
    return sorted(out, key=lambda x: -x[1])


def chance_line(n_knobs: int, rounds_: int) -> str:
    """What `n_knobs` sign tests of `rounds_` rounds risk together."""
    p = spread.chance_level(rounds_) / 2   # one side: a knob that does nothing looks faster in every round
    return (f"{n_knobs} knob(s) tried, {rounds_} rounds each: a knob that changes nothing is 'confirmed' by chance "
            f"with odds {p:.1%} each, {min(1.0, n_knobs * p):.0%} for any of them")


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
        if key in loader and loader[key] != val and not (key == "persistent_workers" and not loader.get("num_workers")):
            return False
    if knob.knobs.get("threads") and r.get("threads") not in (None, knob.knobs["threads"]):
        return False
    return True
