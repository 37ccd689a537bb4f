"""`python -m ddp_lessons COMMAND`: the course's runs from a shell.

Each command runs the same worker functions as the notebooks, two ways:
  python -m ddp_lessons allreduce --nproc 2            # starts 2 workers itself
  torchrun --standalone --nproc_per_node 2 -m ddp_lessons allreduce
Under torchrun `--nproc` is ignored: torchrun's WORLD_SIZE wins. Rank 0
prints the summary and, with `--record NAME`, saves a run record to data/runs/.
Each case declares its own commands (`Case.commands`, read through
`ddp_lessons.cases.registry()`); the tool's are in `TOOL_COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command -> "module:function" that adds the command's arguments and returns its
# runner. Imported by name so that only the chosen command's module loads
# (Lightning is slow to import); the modules named import `tool.commands`, never this one.
TOOL_COMMANDS = {
    "whatif": "ddp_lessons.tool.predict.cli:whatif_command",
    "diagnose": "ddp_lessons.tool.diagnosis.cli:diagnose_command",
    "compare": "ddp_lessons.tool.diagnosis.cli:compare_command",
    "doctor": "ddp_lessons.tool.doctor.cli:doctor_command",
}


def commands(chosen: str | None = None) -> dict:
    """Every command: the cases' (their `Case.commands`) and the tool's. A tool command chosen by name
    reads no case: the tool runs from its own install, without the course's packages."""
    return {name: target for name, (target, _) in _described(chosen).items()}


def _described(chosen: str | None = None) -> dict:
    """command -> (target, help): a case's commands say which case and notebooks they serve (`Case.describe`)."""
    tool = {name: (target, "the tool") for name, target in TOOL_COMMANDS.items()}
    if chosen in TOOL_COMMANDS:
        return tool
    from .cases import registry
    return {**{name: (target, f"{case.name}: {case.describe()}") for case in registry().values()
               for name, target in case.commands.items()}, **tool}


def build_parser(chosen: str | None = None) -> tuple[argparse.ArgumentParser, dict]:
    """The parser; only the chosen command's module is imported (Lightning is slow to import)."""
    parser = argparse.ArgumentParser(prog="python -m ddp_lessons", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    runners = {}
    for name, (target, what) in _described(chosen).items():
        p = sub.add_parser(name, help=what, description=what)
        if name != chosen:
            continue
        mod, fn = target.split(":")
        try:
            runners[name] = getattr(importlib.import_module(mod), fn)(p)
        except ModuleNotFoundError as exc:  # a case whose extra dependency is missing
            if (exc.name or "").startswith("ddp_lessons"):
                raise
            runners[name] = _missing(exc)
    return parser, runners


def _missing(exc):
    def run(args):
        sys.exit(f"this command needs a package that is not installed ({exc}); run `make install`")
    return run


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser, runners = build_parser(chosen)
    args = parser.parse_args(argv)
    from .tool import commands
    commands.check_record(parser, args)
    runners[args.command](args)
    return 0
