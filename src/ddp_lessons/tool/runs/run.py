"""`Run`: every rank of one run, in rank order, with the waits for a slower rank worked out across the
ranks where their timers could not (the doctor's), into its own `Step`s: what it is given stays as it was.
`Record`: a saved record read as runs."""

from __future__ import annotations

from pathlib import Path

from .. import kineto, records
from ..timing.sync import waits_across
from .rank import KEY, Rank, timer_of


class Run:
    """Every rank of one run, in rank order. `Run(values)`: what `launch`/`run`/`gather` returned
    (or a list of timer results, or a `Run`); `Run.load(name, setup=, round=)`: a saved one.
    Index it (`run[0]` is rank 0, a `Rank`) or iterate it. Defined in notebook 00_first_launch."""

    def __init__(self, values, name: str | None = None, record: dict | None = None,
                 setup: str | None = None, round: int | None = None, trace=None):
        if isinstance(values, Run):
            src = values
            values, name, record = src.ranks, name or src.name, record or src.record
            setup, round, trace = setup or src.setup, src.round if round is None else round, trace or src.trace
        if isinstance(values, dict) and timer_of(values) is not None:
            values = [values]
        if not isinstance(values, (list, tuple)) or not values:
            raise ValueError("pass what launch/run/gather returned (one value per rank), a record's name "
                             f"(Run.load), or a Run; got {type(values).__name__}")
        missing = [i for i, v in enumerate(values) if timer_of(v) is None]
        if missing:
            raise ValueError(f"value {missing[0]} holds no StepTimer result: return timer.result(), or a dict "
                             f"with it under {KEY!r}, from the worker")
        ranks = sorted((v if isinstance(v, Rank) else Rank(v) for v in values), key=lambda r: r.rank)
        waits = waits_across([r.clock for r in ranks], [r.steps() for r in ranks])
        self.ranks: list[Rank] = ranks if waits is None else [r.with_waits(w)
                                                                for r, w in zip(ranks, waits, strict=True)]
        self.name: str | None = name
        self.record: dict | None = record
        self.setup: str | None = setup
        self.round: int | None = round
        self.trace: Path | None = trace

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
    `Record.load(name)`; `.setups`; `.rounds(setup)` (a list of `Run`); `.run(setup, round)`; its `kind`,
    `machine`, `config` and `results` as saved.
    Defined in notebook 07_diagnose_your_own_run."""

    def __init__(self, raw: dict, name: str, trace=None):
        self.raw, self.name, self.trace = raw, name, trace
        self._found = _find_runs(raw.get("results"))

    kind = property(lambda self: self.raw.get("kind"))
    machine = property(lambda self: self.raw.get("machine"))
    config = property(lambda self: self.raw.get("config"))
    results = property(lambda self: self.raw.get("results"))
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
    return acc["wall"] if acc else sum(s.step_time for s in rank.steps())


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
