"""What a Lightning `strategy='ddp'` launch costs apart from the fit: `posted_script` run as the user
runs it (`python posted_script.py`), one launch at a time (`run_script`), taken apart on rank 0, the
user's own process, from the stamps every rank wrote (`parts`). `benchmarks/lightning_launch.py`
times setups in interleaved rounds with it and saves a record. Defined in notebook 04_case2_lightning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ...tool.runs import read

SCRIPT = Path(__file__).with_name("posted_script.py")
EPOCHS = "the epochs (train + validate)"
SETUP = "fit set-up (other ranks start, rendezvous)"
STARTUP = "start Python, import torch and Lightning"
BUILD = "build data, model, logger, Trainer"  # Lightning's environment checks run here (MPI's among them)


def setup_name(accelerator: str, devices: int, strategy: str) -> str:
    """'cpu:3:ddp': how a setup of the benchmark is named in its record."""
    return f"{accelerator}:{devices}:{strategy}"


def run_script(devices: int, strategy: str | None = None, accelerator: str = "cpu", epochs: int = 1,
               nvml: bool = False, timeout: float = 600) -> dict:
    """Run `posted_script` once as a command, from a fresh Python, as the post's user ran it: wall clock at
    the call and at rank 0's exit, and every rank's stamps. `strategy` None: 'ddp' on several devices,
    'auto' on one. Raises RuntimeError with the script's last error line if it fails.
    Defined in notebook 04_case2_lightning."""
    strategy = strategy or ("ddp" if devices > 1 else "auto")
    env = dict(os.environ)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # gloo's sockets on loopback, as the course's launcher's
    with tempfile.TemporaryDirectory(prefix="ddp_lessons-launch-") as tmp:
        cmd = [sys.executable, str(SCRIPT), "--devices", str(devices), "--strategy", strategy,
               "--accelerator", accelerator, "--epochs", str(epochs), "--stamps", tmp, "--logs", tmp]
        if nvml:
            cmd.append("--nvml")
        t_call = time.time()
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp)
        t_exit = time.time()
        if out.returncode != 0:
            tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"posted_script exited with {out.returncode}: {tail}")
        ranks = _stamps(Path(tmp), devices)
    return {"setup": setup_name(accelerator, devices, strategy), "devices": devices, "strategy": strategy,
            "accelerator": accelerator, "epochs": epochs, "nvml": nvml, "t_call": t_call, "t_exit": t_exit,
            "wall": t_exit - t_call, "ranks": ranks}


def _stamps(folder: Path, devices: int, wait_s: float = 30.0) -> list[dict]:
    """Every rank's stamps; the other ranks may write theirs just after rank 0 has exited."""
    deadline = time.time() + wait_s
    while len(list(folder.glob("rank*.json"))) < devices and time.time() < deadline:
        time.sleep(0.05)
    return sorted((json.loads(p.read_text()) for p in folder.glob("rank*.json")), key=lambda r: r["rank"])


@dataclass(frozen=True)
class Stamps:
    """One rank's stamps (`posted_script --stamps`, `time.time()`): its script's first line, imports done,
    data to Trainer built, first epoch's start and last epoch's end; its process, parent, command line and
    the child processes it had at its first epoch; None where it wrote none."""
    rank: int
    pid: int | None = None
    ppid: int | None = None
    argv: list | None = None
    first_line: float | None = None
    imported: float | None = None
    built: float | None = None
    train_start: float | None = None
    train_end: float | None = None
    children: list | None = None


@dataclass(frozen=True)
class Launch:
    """One launch of `run_script` (a run of a `case2-launch` record): its setup, the wall clock at the call
    and at rank 0's exit, every rank's `Stamps`; in a record its round, epochs and the load around it."""
    setup: str
    t_call: float
    t_exit: float
    wall: float
    ranks: list[Stamps]
    epochs: int = 1
    round: int | None = None
    load_before: float | None = None
    load_after: float | None = None

    @classmethod
    def of(cls, run: dict) -> Launch:
        return read(cls, run, ranks=lambda ranks: [read(Stamps, r) for r in ranks])


def parts(run: dict) -> dict:
    """Rank 0's wall time (the user's process) taken apart, in seconds: starting Python and importing,
    building the data, model, logger and Trainer, the fit's set-up up to the first epoch (on several
    devices: starting the other ranks, which re-run the whole script, and the rendezvous), the epochs,
    and the end (teardown, exit). Defined in notebook 04_case2_lightning."""
    launch = Launch.of(run)
    r0 = launch.ranks[0]
    return {STARTUP: r0.imported - launch.t_call,
            BUILD: r0.built - r0.imported,
            SETUP: r0.train_start - r0.built,
            EPOCHS: r0.train_end - r0.train_start,
            "end of fit, exit": launch.t_exit - r0.train_end}


def launch_s(run: dict) -> float:
    """The launch apart from the fit: rank 0's wall time less its epochs (s). Defined in notebook 04_case2_lightning."""
    return Launch.of(run).wall - parts(run)[EPOCHS]


def other_ranks(run: dict) -> list[dict]:
    """Ranks 1..N-1 as rank 0 saw them: whether rank 0 started it, whether it ran the same script with
    the same arguments, when its script's first line ran after rank 0 called `fit` (s), and how long it
    took from there to its first epoch. Defined in notebook 04_case2_lightning."""
    ranks = Launch.of(run).ranks
    r0 = ranks[0]
    return [{"rank": r.rank, "child_of_rank0": r.ppid == r0.pid, "same_command": r.argv == r0.argv,
             "script_began_after_fit_call": r.first_line - r0.built,
             "to_first_epoch": r.train_start - r.first_line} for r in ranks[1:]]


COLORS = ("#bbbbbb", "#8172b2", "#ffbf00", "#4c72b0", "#c44e52")


def plot_parts(bars: dict, title: str = ""):
    """Horizontal stacked bars of `parts` (label -> parts in s), one per launch; the Figure, closed.
    Defined in notebook 04_case2_lightning."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9.5, 0.7 * len(bars) + 1.4))
    for y, bar in enumerate(bars.values()):
        left = 0.0
        for (name, s), color in zip(bar.items(), COLORS, strict=False):
            ax.barh(y, s, left=left, color=color, edgecolor="white", label=name if y == 0 else None)
            left += s
        ax.text(left, y, f" {left:.1f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(bars)), list(bars))
    ax.invert_yaxis()
    ax.set_xlabel("wall time of rank 0, the user's process (s)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.margins(x=0.12)
    fig.tight_layout()
    plt.close(fig)
    return fig
