"""Where a Lightning step's time goes, measured inside the Trainer (case 2).

`LightningStepTimer`: a `StepTimer` whose steps are opened and closed by Lightning's hooks instead
of a hand-written loop; `StepTimerCallback`: the Callback that does it, per micro-step and per epoch;
`TimedDDPStrategy` (made by `timed_strategy`): `DDPStrategy` that registers the comm hook on any
device. The posted test's whole run taken apart, one process against launched workers (Python's
start, spawn and rendezvous, Lightning's set-up, the fit), and its plot: `one_process`, `launched`,
`plot_run`. Defined in notebook 05_case2_where_time_goes.
"""

from __future__ import annotations

import subprocess
import sys
import time

import matplotlib.pyplot as plt
import pytorch_lightning as pl
from pytorch_lightning.strategies import DDPStrategy

from ...tool.timing import StepTimer


class LightningStepTimer(StepTimer):
    """A StepTimer driven by Callback hooks: `begin_step`, `begin`/`end` phases."""

    def __init__(self, device="cpu", hook=None, state=None):
        # No model yet: the strategy registers `comm_hook()` (see timed_strategy).
        super().__init__(None, device=device, hook=hook, state=state)
        self._open = {}

    def begin_epoch(self) -> None:
        self._new_step()  # a step starts where the previous one ended, or at the epoch's start

    def begin_step(self, gap_s: float) -> None:
        self._cur["data"] = gap_s  # host time waiting for the batch (inside step_time, as in StepTimer)

    def begin(self, name: str) -> None:
        self._open[name] = self.clock.mark()

    def end(self, name: str) -> None:
        if name in self._open:
            self._cur["phases"][name] = (self._open.pop(name), self.clock.mark())


class StepTimerCallback(pl.Callback):
    """Records every micro-step and epoch of `trainer.fit`; read `.result()` after.
    Per micro-step: forward (`training_step`: the model, the loss, `self.log`, NVML when on),
    backward (with the all-reduce on a step that syncs), optimizer, and the gap between two
    batches (fetching the batch, Lightning's loop); per epoch: the training pass, the
    validation pass, and the time from `fit` to the first batch.
    `hook`, `state`: the communication hook that sends (None: DDP's all-reduce),
    wrapped by the timer; pass the callback to `timed_strategy` to register it."""

    def __init__(self, device="cpu", hook=None, state=None):
        self.timer = LightningStepTimer(device, hook=hook, state=state)
        self.epochs = []
        self._t = {}
        self._last_end = None

    # -- run and epochs: host clock (whole passes; Lightning syncs at their ends)
    def on_fit_start(self, trainer, pl_module):
        self._t["fit_start"] = time.perf_counter()

    def on_train_epoch_start(self, trainer, pl_module):
        self.timer.begin_epoch()
        self._t["train"] = time.perf_counter()
        self._last_end = None  # the first batch's wait includes starting the loader
        self._t.setdefault("first_epoch", self._t["train"])

    def on_train_epoch_end(self, trainer, pl_module):
        now = time.perf_counter()
        val = self._t.pop("val_s", 0.0)
        self.epochs.append({"epoch": trainer.current_epoch, "train": now - self._t["train"] - val,
                            "validation": val})

    def on_validation_start(self, trainer, pl_module):
        self._t["val"] = time.perf_counter()

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        # Validation runs inside the training epoch, before on_train_epoch_end.
        self._t["val_s"] = self._t.get("val_s", 0.0) + time.perf_counter() - self._t["val"]

    # -- micro-steps: the timer's clock (CUDA events on GPUs)
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        now = time.perf_counter()
        gap = now - (self._last_end if self._last_end is not None else self._t["train"])
        self.timer.begin_step(gap)
        self.timer.begin("forward")

    def on_before_backward(self, trainer, pl_module, loss):
        self.timer.end("forward")
        self.timer.begin("backward")

    def on_after_backward(self, trainer, pl_module):
        self.timer.end("backward")

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.timer.begin("optimizer")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.timer.end("optimizer")
        self.timer.step_done()
        self._last_end = time.perf_counter()

    def result(self) -> dict:
        """StepTimer's per-step dict plus `epochs` and `startup` (fit to first epoch, s)."""
        out = self.timer.result()
        out["epochs"] = self.epochs
        out["startup"] = self._t.get("first_epoch", 0.0) - self._t.get("fit_start", 0.0)
        return out


class TimedDDPStrategy(DDPStrategy):
    """DDPStrategy that registers `ddp_comm_hook` on CPUs too. Lightning 2.6 registers it only
    when the root device is CUDA (`DDPStrategy._register_ddp_hooks`); on CPUs with gloo the hook
    would be silently dropped and no all-reduce would be timed."""

    def _register_ddp_hooks(self) -> None:
        if self._ddp_comm_hook is not None and self.root_device.type != "cuda":
            self.model.register_comm_hook(self._ddp_comm_state, self._ddp_comm_hook)
            return
        super()._register_ddp_hooks()


def timed_strategy(callback: StepTimerCallback, **kwargs) -> TimedDDPStrategy:
    """`TimedDDPStrategy(ddp_comm_state=timer, ddp_comm_hook=timed_comm_hook)`: the
    timer's hook around the callback's `hook` (`StepTimer.comm_hook()`)."""
    state, hook = callback.timer.comm_hook()
    return TimedDDPStrategy(ddp_comm_state=state, ddp_comm_hook=hook, **kwargs)


# -- the whole run taken apart (notebook 04): stamps are wall-clock (`time.time()`) in each process of
# this machine, so the kernel's and the workers' compare ----------------------------------------------
COLORS = {"Python start + import torch (timed apart)": "#bbbbbb",
          "spawn, launcher, rendezvous (the rest)": "#937860", "import Lightning (+ build Trainer)": "#8172b2",
          "Lightning set-up (fit to first batch)": "#ffbf00", "the fit (train + validate)": "#4c72b0",
          "exit (leave group, return)": "#c44e52"}


def python_start(modules=("torch",)) -> float:
    """Seconds a fresh Python takes to start, import `modules` and exit: what a script pays before its
    first line of work. Defined in notebook 04_case2_lightning."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import " + ", ".join(modules)], check=True, capture_output=True)
    return time.perf_counter() - t0


def one_process(torch_s: float, lightning_s: float, one: dict) -> dict:
    """A one-process run's parts (s): a fresh Python importing torch (`torch_s`) and then Lightning
    (`lightning_s`: torch and Lightning, timed apart), Lightning's set-up and the fit (`one`: what
    `fit_one(..., timed=True)` returned). Defined in notebook 04_case2_lightning."""
    setup = one["timer"]["startup"]
    return {"Python start + import torch (timed apart)": torch_s,
            "import Lightning (+ build Trainer)": max(0.0, lightning_s - torch_s),
            "Lightning set-up (fit to first batch)": setup, "the fit (train + validate)": one["wall"] - setup}


def launched(ranks: list, t_call: float, t_return: float, torch_start_s: float) -> dict:
    """A launched run's parts (s) on its slowest rank (the last to end its fit), from the kernel's
    stamps around `launch` (`t_call`, `t_return`) and the rank's own. `torch_start_s`: a fresh
    Python importing torch, timed apart; the rest of the time before the worker runs is the spawn,
    the launcher's imports and the rendezvous (ranks that share cores start slower: it holds that
    too). Defined in notebook 04_case2_lightning."""
    r = max(ranks, key=lambda x: x["t_fit_end"])
    before = r["t_entered"] - t_call
    setup = r["timer"]["startup"]
    return {"Python start + import torch (timed apart)": min(torch_start_s, before),
            "spawn, launcher, rendezvous (the rest)": max(0.0, before - torch_start_s),
            "import Lightning (+ build Trainer)": r["t_fit_start"] - r["t_entered"],
            "Lightning set-up (fit to first batch)": setup, "the fit (train + validate)": r["wall"] - setup,
            "exit (leave group, return)": t_return - r["t_fit_end"]}


def plot_run(bars: dict, title: str):
    """Horizontal stacked bars, one per run (`bars`: label -> parts in s), the legend outside the data.
    Returns the Figure, closed. Defined in notebook 04_case2_lightning."""
    fig, ax = plt.subplots(figsize=(9.5, 0.7 * len(bars) + 1.4))
    seen = set()
    for y, parts in enumerate(bars.values()):
        left = 0.0
        for name, s in parts.items():
            ax.barh(y, s, left=left, color=COLORS.get(name, "#64b5cd"), edgecolor="white",
                    label=None if name in seen else name)
            seen.add(name)
            left += s
        ax.text(left, y, f" {left:.1f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(bars)), list(bars))
    ax.invert_yaxis()
    ax.set_xlabel("wall time (s)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.margins(x=0.12)
    fig.tight_layout()
    plt.close(fig)
    return fig
