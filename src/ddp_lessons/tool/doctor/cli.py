"""`python -m ddp_lessons doctor [options] -- COMMAND ...`: the doctor from a shell. The command's own
output and exit status pass through; the doctor writes to stderr and exits with the command's status."""

from __future__ import annotations

import sys

from ..commands import positive_int


def doctor_command(p):
    p.add_argument("--steps", type=positive_int, help="stop the command after the warm-up and this many "
                   "optimizer steps (a diagnosis in seconds of a run that trains for hours)")
    p.add_argument("--warmup", type=positive_int, default=3, help="optimizer steps before the measured ones")
    p.add_argument("--confirm", action="store_true", help="run the command again with each suspicion's knob "
                   "changed, in interleaved rounds, and say what each saves")
    p.add_argument("--rounds", type=positive_int, default=5, help="rounds for --confirm (5 or more decide)")
    p.add_argument("--confirm-steps", type=positive_int, help="optimizer steps measured per --confirm run (default: "
                   "as many as the diagnosed run's step-to-step spread needs to resolve a 3%% saving)")
    p.add_argument("--profile-steps", type=int, default=5, metavar="N", help="on a GPU, profile N optimizer steps "
                   "after the warm-up for the GPU's busy share, which decides host-bound steps (0: none)")
    p.add_argument("--knob", action="append", default=[], metavar="NAME=VALUE",
                   help="another knob to try: ddp.<argument>=V, loader.<argument>=V, threads=N, hook=bf16|fp16")
    p.add_argument("--record", dest="record_name", metavar="NAME",
                   help="the record's name (default doctor-<script>-<time>, in ./runs or $DDP_LESSONS_RUNS)")
    p.add_argument("cmd", nargs="*", metavar="-- COMMAND", help="the command you run today")

    def run(args):
        from . import DoctorError, doctor
        try:
            up = doctor(args.cmd, steps=args.steps, warmup=args.warmup, confirm=args.confirm, rounds=args.rounds,
                        confirm_steps=args.confirm_steps, knobs=args.knob, record=args.record_name,
                        profile_steps=args.profile_steps)
        except DoctorError as exc:
            p.error(str(exc))
        print(up, file=sys.stderr)
        sys.exit(up.returncode)
    return run
