"""Running the user's own command under the doctor: what it may be, the environment that installs the
recorder in its Python processes, and each rank's result read back when it ends (also when it failed
or was interrupted: what was measured is kept).

The run's private folder (`launcher.cleanup.run_directory`) holds a copy of the bootstrap
`sitecustomize.py`, a link to this package, and the ranks' results; it is removed when the command
ends. Nothing else is written, and the command's output, exit status and files are its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..launcher import cleanup
from . import wire

PACKAGE = Path(__file__).resolve().parents[2]          # .../ddp_lessons
BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap" / "sitecustomize.py"
PYTHONS = ("python", "torchrun", "pytorch")


class DoctorError(ValueError):
    """A command the doctor cannot run, said in one line."""


@dataclass
class Ran:
    """One run of the command: its exit status, seconds, and every rank's result (rank order)."""
    returncode: int
    seconds: float
    ranks: list = field(default_factory=list)
    interrupted: bool = False
    stdout: str | None = None


def resolve(command: list[str]) -> list[str]:
    """The command as it will run; a one-line DoctorError for one that is missing or not Python."""
    if not command:
        raise DoctorError("give the command you run today after --, e.g. python -m ddp_lessons doctor -- "
                          "torchrun --standalone --nproc_per_node 2 train.py")
    exe = command[0]
    if exe.endswith(".py"):
        if not os.path.isfile(exe):
            raise DoctorError(f"{exe}: no such file")
        return [sys.executable, *command]
    path = shutil.which(exe)
    if path is None:
        raise DoctorError(f"{exe}: no such command (not on PATH)")
    if not _is_python(path):
        raise DoctorError(f"{exe} is not a Python program: the doctor times Python processes (python, torchrun, "
                          "python -m torch.distributed.run, a script with a Python #! line)")
    return [path, *command[1:]]


def _is_python(path: str) -> bool:
    if Path(path).name.startswith(PYTHONS):
        return True
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def environment(run_dir: str, steps: int | None, warmup: int, knobs: dict | wire.Knobs,
                profile: int = 0) -> dict:
    """The command's environment: the bootstrap first on its Python path, the settings (`wire.Settings`)
    its ranks read. A knob changes one thing: `threads=N` sets torch's threads in each rank's own process
    (`rank.inject`), not OMP_NUM_THREADS, which the loader's workers and other libraries would read too."""
    env = dict(os.environ)
    boot = Path(run_dir) / "boot"
    boot.mkdir()
    shutil.copy(BOOTSTRAP, boot / "sitecustomize.py")
    (boot / "ddp_lessons").symlink_to(PACKAGE)      # this package alone, whatever Python the command runs
    (Path(run_dir) / "ranks").mkdir()
    env["PYTHONPATH"] = os.pathsep.join([str(boot)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    knobs = knobs if isinstance(knobs, wire.Knobs) else wire.Knobs.of(knobs)
    return wire.Settings(str(Path(run_dir) / "ranks"), steps, warmup, knobs, profile).to_env(env)


def run(command: list[str], steps: int | None = None, warmup: int = 3, knobs: dict | wire.Knobs | None = None,
        timeout: float | None = None, capture: bool = False, profile: int = 0) -> Ran:
    """Run `command` once with the rank half in its processes; return its status and the ranks' results.
    `profile`: on a GPU, profile this many optimizer steps after the warm-up for the GPU's busy share.
    Public: benchmarks run the command under the doctor with it."""
    cleanup.sweep()
    run_dir = cleanup.run_directory()
    t0, interrupted, out = time.perf_counter(), False, None
    try:
        env = environment(run_dir, steps, warmup, knobs or {}, profile)
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE if capture else None,
                                stderr=subprocess.STDOUT if capture else None, text=capture)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except KeyboardInterrupt:   # the command got the terminal's SIGINT too: let it end, keep its results
            interrupted = True
            stop(proc)
        except subprocess.TimeoutExpired:
            interrupted = True
            proc.send_signal(signal.SIGINT)
            stop(proc, grace=10.0)
        ranks = wire.read_ranks(str(Path(run_dir) / "ranks"))
        return Ran(proc.returncode, time.perf_counter() - t0, ranks, interrupted, out)
    finally:
        cleanup.remove(run_dir)


def stop(proc, grace: float = 30.0) -> None:
    """Let the command end; past `grace` stop it and every process it started (a rank stuck in a
    collective ignores its launcher's signals)."""
    try:
        proc.wait(timeout=grace)
        return
    except subprocess.TimeoutExpired:
        pass
    import psutil
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        tree = []
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for p in tree:
        try:
            p.kill()
        except psutil.Error:
            pass
