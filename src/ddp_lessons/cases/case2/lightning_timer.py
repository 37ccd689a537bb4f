"""Where a Lightning step's time goes, measured inside the Trainer (case 2).

`LightningStepTimer`: a `StepTimer` whose steps are opened and closed by Lightning's hooks instead
of a hand-written loop; `StepTimerCallback`: the Callback that does it, per micro-step and per epoch;
`TimedDDPStrategy` (made by `timed_strategy`): `DDPStrategy` that registers the comm hook on any
device. Defined in notebook 05_case2_where_time_goes.
"""

from __future__ import annotations

import time

import pytorch_lightning as pl
from pytorch_lightning.strategies import DDPStrategy

from ...tool.timing import StepTimer


class LightningStepTimer(StepTimer):
    """A StepTimer driven by Callback hooks through its public event methods: `begin_pass` per epoch,
    `batch_waited` per micro-step, `phase_begins`/`phase_ends` around its phases."""

    def __init__(self, device="cpu", hook=None, state=None):
        # No model yet: the strategy registers `comm_hook()` (see timed_strategy).
        super().__init__(None, device=device, hook=hook, state=state)
        self._open: dict = {}

    def begin_epoch(self) -> None:
        self.begin_pass()   # a pass over the loader, as `timer.data` counts one: diagnose(run, epochs=...)

    def begin_step(self, gap_s: float) -> None:
        self.batch_waited(gap_s)  # host time waiting for the batch (inside step_time, as in StepTimer)

    def phase_begins(self, name: str) -> None:
        self._open[name] = self.mark()

    def phase_ends(self, name: str) -> None:
        """End phase `name` (its start marked by `phase_begins`); the step opens at its first phase."""
        if name in self._open:
            self.phase_span(name, self._open.pop(name), self.mark())


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
        # host clock (perf_counter) at the fit's start, this epoch's start, the first epoch's start and this
        # validation's start; the validation's seconds in this epoch so far
        self._fit_start: float | None = None
        self._train: float | None = None
        self._first_epoch: float | None = None
        self._val: float | None = None
        self._val_s = 0.0
        self._last_end = None

    # -- run and epochs: host clock (whole passes; Lightning syncs at their ends)
    def on_fit_start(self, trainer, pl_module):
        self._fit_start = time.perf_counter()

    def on_train_epoch_start(self, trainer, pl_module):
        self.timer.begin_epoch()
        self._train = time.perf_counter()
        self._last_end = None  # the first batch's wait includes starting the loader
        if self._first_epoch is None:
            self._first_epoch = self._train

    def on_train_epoch_end(self, trainer, pl_module):
        now = time.perf_counter()
        val, self._val_s = self._val_s, 0.0
        self.epochs.append({"epoch": trainer.current_epoch, "train": now - self._train - val,
                            "validation": val})

    def on_validation_start(self, trainer, pl_module):
        self._val = time.perf_counter()

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        # Validation runs inside the training epoch, before on_train_epoch_end.
        self._val_s += time.perf_counter() - self._val

    # -- micro-steps: the timer's clock (CUDA events on GPUs)
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        now = time.perf_counter()
        gap = now - (self._last_end if self._last_end is not None else self._train)
        self.timer.begin_step(gap)
        self.timer.phase_begins("forward")

    def on_before_backward(self, trainer, pl_module, loss):
        self.timer.phase_ends("forward")
        self.timer.phase_begins("backward")

    def on_after_backward(self, trainer, pl_module):
        self.timer.phase_ends("backward")

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.timer.phase_begins("optimizer")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.timer.phase_ends("optimizer")
        self.timer.step_done()
        self._last_end = time.perf_counter()

    def result(self) -> dict:
        """StepTimer's per-step dict plus `epochs` and `startup` (fit to first epoch, s)."""
        out = self.timer.result()
        out["epochs"] = self.epochs
        out["startup"] = ((0.0 if self._first_epoch is None else self._first_epoch)
                          - (0.0 if self._fit_start is None else self._fit_start))
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
    """`TimedDDPStrategy(ddp_comm_state=state, ddp_comm_hook=hook)` with the pair
    `StepTimer.comm_hook()` gives: the timer's hook around the callback's `hook`."""
    state, hook = callback.timer.comm_hook()
    return TimedDDPStrategy(ddp_comm_state=state, ddp_comm_hook=hook, **kwargs)
