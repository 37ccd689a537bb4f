"""A run as an object: every rank's `StepTimer` result, read through named accessors.

`Run(values)` takes what `launch`, `run` or `gather` returned (one value per rank: the timer's result
itself, or a dict holding it under "timer" beside the worker's own keys); `Run.load(name, setup=,
round=)` reads one run of a saved record, and `Record.load(name)` the whole record with its setups
and rounds. `diagnose`, `compare`, `whatif` and the plots take a `Run` (or anything `Run` takes).
`StepTimer.result()` stays the JSON wire format; `Rank` reads it. Defined in notebook 00_first_launch.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from . import kineto, records
from .timing.sync import waits_across

KEY = "timer"   # where a worker's dict holds its StepTimer result
# Per-step numbers that are positions, flags or labels, not durations: no median of them.
NOT_DURATIONS = ("step", "t_start", "wait_for", "ready", "sync", "forwards", "optimizer_steps", "computed",
                 "collective_calls")
WARMUP = 2      # DDP builds its buckets in step 0 and rebuilds them after it: left out of medians


def timer_of(value) -> dict | None:
    """The StepTimer result in one rank's value: value["timer"], or the value itself; None if neither.
    A dict is a timer's result when its steps are the timer's (a list of dicts with `step_time`), so a
    worker's own key called "steps" is not mistaken for it."""
    if isinstance(value, Rank):
        return value.timer
    if not isinstance(value, dict):
        return None
    for cand in (value.get(KEY), value):
        if isinstance(cand, dict) and _is_timer(cand):
            return cand
    return None


def _is_timer(d: dict) -> bool:
    steps = d.get("steps")
    if not isinstance(steps, list):
        return False
    if steps:
        return isinstance(steps[0], dict) and "step_time" in steps[0]
    return "comm_source" in d or "account" in d or d.get("kind") == "ddp-lessons/step-timer"


class Rank:
    """One rank of a run: `timer` (its StepTimer result) and `value` (all the worker returned;
    `rank["key"]` reads the worker's own keys). Defined in notebook 00_first_launch."""

    def __init__(self, value):
        timer = timer_of(value)
        if timer is None:
            raise ValueError(f"no StepTimer result here: return timer.result(), or a dict with it under {KEY!r}, "
                             "from the worker")
        self.value, self.timer = value, timer

    def __getitem__(self, key):
        return self.value[key]

    def get(self, key, default=None):
        return self.value.get(key, default) if isinstance(self.value, dict) else default

    def __repr__(self) -> str:
        return f"Rank({self.rank} of {self.world_size}, {len(self.timer['steps'])} steps)"

    # what ran where
    rank = property(lambda self: int(self.timer.get("rank", 0)))
    world_size = property(lambda self: int(self.timer.get("world_size") or 1))
    device = property(lambda self: str(self.timer.get("device", "cpu")))
    backend = property(lambda self: self.timer.get("backend"))
    threads = property(lambda self: self.timer.get("threads"))
    cores = property(lambda self: self.timer.get("cores"))
    host = property(lambda self: self.timer.get("host"))
    mode = property(lambda self: self.timer.get("mode"))
    batch_size = property(lambda self: self.timer.get("batch_size"))
    account = property(lambda self: self.timer.get("account"))
    outside = property(lambda self: self.timer.get("outside") or [])
    model = property(lambda self: self.timer.get("model") or {})
    loader = property(lambda self: self.timer.get("loader"))
    on_gpu = property(lambda self: self.device.startswith("cuda"))

    def steps(self, skip: int = 0) -> list[dict]:
        """The timed steps (micro-steps under accumulation), leaving out the first `skip`."""
        return self.timer["steps"][skip:]

    def median_step(self, skip: int = WARMUP) -> dict:
        """Median of every per-step number, leaving out the first `skip` steps (all kept when there
        are no more); each number over the steps that have it; {} without steps."""
        every = self.timer["steps"]
        steps = every[skip:] or every
        keys = dict.fromkeys(k for s in steps for k, v in s.items()
                             if k not in NOT_DURATIONS and isinstance(v, (int, float)) and not isinstance(v, bool))
        return {k: statistics.median(v for s in steps if isinstance(v := s.get(k), (int, float))) for k in keys}

    def knows_optimizer_steps(self) -> bool:
        """Whether the timer saw torch's optimizer steps (timers from before it did: every step is one)."""
        return any("optimizer_steps" in s for s in self.timer["steps"])

    def iterations(self, skip: int = WARMUP) -> list[float]:
        """Seconds per optimizer step (its micro-steps from the first one's start to the last one's
        end), leaving out the first `skip` optimizer steps; each step is one where the timer did not
        see optimizer steps."""
        steps = self.timer["steps"]
        if not self.knows_optimizer_steps() or not any(s.get("optimizer_steps") for s in steps):
            return [s["step_time"] for s in steps][skip:]
        out, first = [], None
        for s in steps:
            first = s if first is None else first
            if s.get("optimizer_steps"):
                out.append(s["t_start"] + s["step_time"] - first["t_start"])
                first = None
        return out[skip:]


class Run:
    """Every rank of one run, in rank order. `Run(values)`: what `launch`/`run`/`gather` returned
    (or a list of timer results, or a `Run`); `Run.load(name, setup=, round=)`: a saved one.
    Index it (`run[0]` is rank 0, a `Rank`) or iterate it. Defined in notebook 00_first_launch."""

    def __init__(self, values, name: str | None = None, record: dict | None = None,
                 setup: str | None = None, round: int | None = None, trace=None):
        if isinstance(values, Run):
            values, name, record = values.ranks, name or values.name, record or values.record
            setup, round, trace = setup or values.setup, values.round if round is None else round, trace or values.trace
        if isinstance(values, dict) and timer_of(values) is not None:
            values = [values]
        if not isinstance(values, (list, tuple)) or not values:
            raise ValueError("pass what launch/run/gather returned (one value per rank), a record's name "
                             f"(Run.load), or a Run; got {type(values).__name__}")
        missing = [i for i, v in enumerate(values) if timer_of(v) is None]
        if missing:
            raise ValueError(f"value {missing[0]} holds no StepTimer result: return timer.result(), or a dict "
                             f"with it under {KEY!r}, from the worker")
        self.ranks: list[Rank] = sorted((v if isinstance(v, Rank) else Rank(v) for v in values), key=lambda r: r.rank)
        self.name, self.record, self.setup, self.round, self.trace = name, record, setup, round, trace
        waits_across([r.timer for r in self.ranks])

    def __len__(self):
        return len(self.ranks)

    def __iter__(self):
        return iter(self.ranks)

    def __getitem__(self, i) -> Rank:
        return self.ranks[i]

    def __repr__(self) -> str:
        where = f" {self.name!r}" + (f" {self.setup}" if self.setup else "") + \
            (f" round {self.round}" if self.round is not None else "") if self.name else ""
        return f"Run{where}: {len(self)} of {self.world_size} ranks, {self.ranks[0].device}"

    world_size = property(lambda self: max(r.world_size for r in self.ranks))
    backend = property(lambda self: self.ranks[0].backend)
    device = property(lambda self: self.ranks[0].device)
    machine = property(lambda self: (self.record or {}).get("machine"))

    def rank(self, i: int) -> Rank:
        return next(r for r in self.ranks if r.rank == i)

    def gpu_busy(self) -> list[dict] | None:
        """The GPU's busy fraction per traced step, from the run's profiler trace (a record folder's
        `trace/`); None without one."""
        if self.trace is None:
            return None
        try:
            return kineto.read(self.trace) or None
        except (OSError, ValueError):
            return None

    @classmethod
    def load(cls, name, setup: str | None = None, round: int | None = None, runs_dir=None) -> Run:
        """One run of a saved record (see `Record`): `setup` where it holds several, `round` where it
        holds repeats (None: the round of median wall time)."""
        return Record.load(name, runs_dir).run(setup, round)


class Record:
    """A saved record read as runs: its setups (where it holds several) and each one's rounds.
    `Record.load(name)`; `.setups`; `.rounds(setup)` (a list of `Run`); `.run(setup, round)`.
    Defined in notebook 07_diagnose_your_own_run."""

    def __init__(self, raw: dict, name: str, trace=None):
        self.raw, self.name, self.trace = raw, name, trace
        self._found = _find_runs(raw.get("results"))

    machine = property(lambda self: self.raw.get("machine"))
    config = property(lambda self: self.raw.get("config"))
    setups = property(lambda self: list(self._found))

    @classmethod
    def load(cls, name, runs_dir=None) -> Record:
        path = Path(str(name))
        folder = path if path.is_dir() else None
        if folder is None and runs_dir is None:
            for d in records._search_dirs(None):
                if (Path(d) / str(name)).is_dir():
                    folder = Path(d) / str(name)
                    break
        if folder is not None:  # a record with files beside it: record.json, trace/
            raw = records.load(folder / "record.json")
            trace = folder / "trace" if (folder / "trace").is_dir() else None
            return cls(raw, folder.name, trace)
        return cls(records.load(name, runs_dir), path.stem)

    def rounds(self, setup: str | None = None) -> list[Run]:
        setup = self._setup(setup)
        return [Run(ranks, self.name, self.raw, setup or None, i if len(self._found[setup]) > 1 else None,
                    self._trace_of(setup)) for i, ranks in enumerate(self._found[setup])]

    def _trace_of(self, setup):
        """The profiler trace, for the setup it was made of (the record's `results.trace.setup`; a
        record of one setup: that one)."""
        results = self.raw.get("results")
        trace = results.get("trace") if isinstance(results, dict) else None
        traced = trace.get("setup") if isinstance(trace, dict) else None
        return self.trace if traced == setup or (traced is None and len(self._found) == 1) else None

    def run(self, setup: str | None = None, round: int | None = None) -> Run:
        runs = self.rounds(setup)
        if round is None:
            walls = [max(_wall(r) for r in run) for run in runs]
            round = sorted(range(len(runs)), key=walls.__getitem__)[len(runs) // 2] if len(runs) > 1 else 0
        if not 0 <= round < len(runs):
            raise ValueError(f"round={round}: record {self.name!r} holds rounds 0..{len(runs) - 1}")
        return runs[round]

    def _setup(self, setup):
        if not self._found:
            raise ValueError(f"record {self.name!r} holds no StepTimer result per rank: diagnose reads runs whose "
                             "workers were timed with StepTimer")
        if setup is None:
            if len(self._found) > 1:
                raise ValueError(f"record {self.name!r} holds several setups: pick one with setup= "
                                 f"({', '.join(self._found)})")
            return next(iter(self._found))
        if setup not in self._found:
            raise ValueError(f"setup {setup!r}: record {self.name!r} holds {', '.join(self._found) or 'none'}")
        return setup


def _wall(rank: Rank) -> float:
    acc = rank.account
    return acc["wall"] if acc else sum(s["step_time"] for s in rank.steps())


STRUCTURE = ("results", "rounds", "runs", "ranks", "per_rank")   # record keys that are not a setup's name


def _find_runs(obj, path=()) -> dict:
    """setup name -> list of rounds (each a list of rank values), for every list of timer-bearing
    values in a record's results. A list whose values are ranks 0..n-1 is one run; one whose values
    repeat a rank (or hold lists) is rounds."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_find_runs(v, (*path, k)))
    elif isinstance(obj, list) and obj:
        name = "/".join(str(p) for p in path if p not in STRUCTURE)
        if all(isinstance(v, list) and v and all(timer_of(x) is not None for x in v) for v in obj):
            out[name] = [list(v) for v in obj]
        elif all(timer_of(v) is not None for v in obj):
            ranks = [int((timer_of(v) or {}).get("rank", 0)) for v in obj]
            out[name] = [list(obj)] if len(set(ranks)) == len(ranks) else [[v] for v in obj]
    return out
