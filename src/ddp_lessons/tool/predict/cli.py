"""`python -m ddp_lessons whatif RECORD --link NAME --nproc N`: the replay from a
shell; no workers are started.
(The README, "What-if", introduces it; notebook 03 uses it for case 1's gap, `cases.case1.gap`.)"""

from __future__ import annotations

from .. import commands
from . import LINKS, table_text, whatif, whatif_table


def whatif_command(p):
    p.add_argument("run_record", metavar="RECORD",
                   help="a run record (name in data/runs/, or a path) timed in mode 'full'")
    p.add_argument("--link", choices=[*LINKS, "all"], default="pcie4-x16", help="a row of the link table, "
                   "or 'all' for a table over every link")
    p.add_argument("--nproc", type=commands.positive_int, action="append", help="ranks to predict for "
                   "(repeat for several; default 2)")
    p.add_argument("--rank", type=int, default=0, help="the recorded rank whose steps are replayed")

    def run(args):
        sizes = args.nproc or [2]
        try:
            if args.link == "all" or len(sizes) > 1:
                links = list(LINKS) if args.link == "all" else [args.link]
                print(table_text(whatif_table(args.run_record, links, sizes, rank=args.rank)))
            else:
                print(whatif(args.run_record, args.link, sizes[0], rank=args.rank))
        except (ValueError, OSError) as exc:  # a record that cannot be replayed: one line, status 2
            p.error(str(exc).splitlines()[0])
    return run
