"""`python -m ddp_lessons diagnose RECORD` and `compare RECORD [RECORD ...]`: a saved run read from a
shell (a record's name in the course's records or ./runs, or a path); no workers are started."""

from __future__ import annotations

from ..commands import positive_float, positive_int
from ..records import RecordError
from ..runs import Record, Run
from .ranking import diagnose
from .side_by_side import compare


def diagnose_command(p):
    p.add_argument("name", metavar="RECORD", help="a run record: a name (data/runs/, ./runs) or a path")
    p.add_argument("--setup", help="the setup to read, where the record holds several")
    p.add_argument("--round", type=int, help="the round to read (default: the round of median wall time)")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--epochs", type=positive_float, help="rank the causes at this many passes over the data")
    length.add_argument("--iterations", type=positive_int, help="rank the causes at this many optimizer steps")

    def run(args):
        try:
            r = Run.load(args.name, args.setup, args.round)
            print(f"{r!r}")
            print(diagnose(r, epochs=args.epochs, iterations=args.iterations))
        except (ValueError, FileNotFoundError, RecordError) as exc:  # one line, status 2
            p.error(str(exc).splitlines()[0])
    return run


def compare_command(p):
    p.add_argument("records", metavar="RECORD", nargs="+", help="one record with several setups (compared with "
                   "each other, its rounds as repeats), or several records (each one run)")
    p.add_argument("--setup", help="the setup to read from each of several records")
    p.add_argument("--baseline", help="the run to set the others against (default: the first)")

    def run(args):
        try:
            if len(args.records) == 1:
                rec = Record.load(args.records[0])
                runs = {s or rec.name: rec.rounds(s) for s in rec.setups}
            else:
                runs = {name: Record.load(name).rounds(args.setup) for name in args.records}
            if len(runs) < 2:
                raise ValueError(f"{args.records[0]} holds one setup: name two or more records to compare")
            same = len({len(v) for v in runs.values()}) == 1 and len(next(iter(runs.values()))) > 1
            print(compare(runs, baseline=args.baseline, paired=same and len(args.records) == 1))
        except (ValueError, FileNotFoundError, RecordError) as exc:
            p.error(str(exc).splitlines()[0])
    return run
