# %% [markdown]
# # 04 · Case 2: a Lightning test where one GPU beat three
#
# **What you will learn**
# - to run a PyTorch Lightning script on several workers from a notebook, two ways: through the course's launcher, and with Lightning's own `ddp_notebook`;
# - how to check that Lightning reused the launcher's processes and process group instead of starting its own;
# - whether the posted test's result (one device beats three DDP workers) reproduces here, and why a fair answer says what each timed interval includes (process start, imports, Lightning's setup).
#
# **Builds on** `00_first_launch` (the launcher, `StepTimer`) and the case-1 notebooks.
# Previous: `03_case1_beyond.ipynb`. Next: `05_case2_where_time_goes.ipynb`.
#
# The post: a deliberately small Lightning model (10→256→256→256→1), a dataset that draws `torch.randn` in `__getitem__`, batch 256, `strategy='ddp', devices=3, accumulate_grad_batches=3`, `self.log` and an NVML query in every step. "Is my model too simple?"
# `ddp_lessons.cases.case2` rebuilds it with a named option for every later fix. The post's `WandbLogger` is replaced by an offline logger that keeps metrics in memory (`case2.memory_logger()`); nothing is sent anywhere.

# %%
import os
import statistics
import time

import torch

from ddp_lessons import launch, place
from ddp_lessons.tool import records, runtime
from ddp_lessons.course import replay
from ddp_lessons.cases import case2
from ddp_lessons.cases.case2 import rounds, verdicts
from ddp_lessons.cases.case2.lightning_timer import launched, one_process, plot_run, python_start
from ddp_lessons.cases.case2.exercises import check

torch.set_num_threads(1)  # one thread per process, as each launched worker gets on 2 cores
opts = case2.Options(epochs=3)
print(opts)

# %% [markdown]
# The post ran three DDP workers. Where three ranks run on this machine: NCCL with one GPU each where three
# GPUs are visible, else gloo on the CPU. Every run below, the one-device baseline included, uses that
# device (`where.accelerator`, Lightning's word for it), so the comparison is like for like:

# %%
where = place(3)  # the case's three ranks
solo = place(1)   # the recorded one-GPU run at the end, made again live where a GPU is visible
print(where.describe())

# %% [markdown]
# The post's `training_step` calls `pynvml.nvmlInit()` on every step. Without an NVIDIA driver that call raises; here is what it gives on this machine (None: NVML works):

# %%
print(case2.nvml.error())

# %% [markdown]
# Where NVML raises, the live runs switch the NVML block off by its option (`nvml="off"`); its cost on a GPU comes from a recorded run (notebook 05). Everything else is as posted.

# %%
if case2.nvml.error() is not None:
    opts = opts.replace(nvml="off")
print(opts.nvml, opts.batch_size, opts.size, opts.accumulate, case2.param_count())

# %% [markdown]
# ## One device
# The baseline: one process, `devices=1`, on the device the three workers use (`case2.fit_one`). Where no GPU is visible it runs in this
# kernel. Where one is, it runs in one process forked by the launcher, even when the fit itself is on the CPU: Lightning saves the CUDA random state around every stage wherever CUDA is available (`isolate_rng`), which initialises CUDA in the process, and `ddp_notebook` below can fork only from a kernel that never did.

# %%
# NBVAL_IGNORE_OUTPUT
one = case2.fit_one(opts, where, timed=True)  # timed: Lightning's set-up apart from the fit (plot below)
print(f"1 device: {one['wall']:.2f} s for {opts.epochs} epochs, {one['optimizer_steps']} optimizer steps")

# %% [markdown]
# ## Three workers through the launcher
# `launch` starts three processes (by spawn, a fresh Python each, as Lightning's own `strategy='ddp'` starts its ranks: the start-up measured below is the kind the asker paid), sets `RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT` and initialises `torch.distributed` (as placed above). Each worker (`case2.fit_worker`) then builds `Trainer(accelerator=where.accelerator, devices=3, num_nodes=1, strategy=DDPStrategy(...))`; an accelerator that contradicts the process group (`'cpu'` on NCCL, `'gpu'` on gloo) is refused.

# %%
t0, t_call = time.perf_counter(), time.time()  # the wall clock too: the workers stamp theirs
ranks = launch(case2.fit_worker, (opts, where.accelerator), world_size=where.world_size, timeout=240,
               start_method="spawn")
helper_total, t_return = time.perf_counter() - t0, time.time()
for r in ranks:
    print(f"rank {r['rank']}: launched by this kernel: {r['ppid'] == os.getpid()}, "
          f"Lightning says processes are created externally: {r['external']}, "
          f"same process group as the launcher's: {r['same_group']}, processes it started: {len(r['children'])}"
          + "".join(f"\n    {c}" for c in r["children"]))

# %% [markdown]
# Counted over the ranks: did every one of them run in a process this kernel launched, with Lightning saying so and keeping the launcher's process group?

# %%
print(len({r["pid"] for r in ranks}), "distinct worker PIDs")
verdicts.reused_processes(ranks, os.getpid()).show()
print("samples per rank (DistributedSampler pads 5,000 to a multiple of 3):", -(-opts.size // 3))

# %% [markdown]
# The mechanism: `LOCAL_RANK` in the environment makes Lightning's `LightningEnvironment` report that processes are created externally, so it starts none, and it skips `init_process_group` because `torch.distributed.is_initialized()` is already true. A Lightning version that did otherwise would show a process of its own on a rank above.

# %% [markdown]
# ## Three workers with Lightning's `ddp_notebook`
# Lightning can also start the workers itself from a kernel: `strategy='ddp_notebook'` forks them. Fork works only while this kernel has not touched CUDA.

# %%
# NBVAL_IGNORE_OUTPUT
t0 = time.perf_counter()
nb = case2.fit_here(opts, devices=where.world_size, strategy="ddp_notebook", accelerator=where.accelerator, timed=False)
nb_total = time.perf_counter() - t0
print(f"ddp_notebook: {nb_total:.2f} s in all")

# %% [markdown]
# ## What the launched run spent before training
# The launcher's run, as this kernel saw it, holds the three fits and more: starting three Pythons, importing torch and Lightning in each, the rendezvous, and at the end the workers' exit. Everything the kernel waited for beyond the slowest rank's `trainer.fit` is that start-up:

# %%
# NBVAL_IGNORE_OUTPUT
fits = [r["wall"] for r in ranks]
startup = helper_total - max(fits)
print(f"launcher, in all: {helper_total:.2f} s; trainer.fit per rank: "
      + ", ".join(f"{w:.2f}" for w in fits) + f" s; start-up and exit: {startup:.2f} s")

# %%
started = verdicts.startup_vs_fit(startup, fits).show()

# %% [markdown]
# Taken apart, beside a one-process run of the same fit. The one process here ran in this kernel, which had
# started long before; the asker's one-GPU script paid a fresh Python and its imports too, so that bar adds a
# fresh Python importing torch, then Lightning, timed apart. The launched bar is its slowest rank, from the
# stamps each process took: a fresh Python importing torch (timed apart), then the rest until the worker
# ran (spawning, the launcher's own imports, and the rendezvous: the launcher joins the process group before
# the worker starts), importing Lightning and building the Trainer, Lightning's set-up, the fit, the exit:

# %%
# NBVAL_IGNORE_OUTPUT
starts = {"torch": python_start(("torch",)), "torch + Lightning": python_start(("torch", "pytorch_lightning"))}
bars = {"1 process (fresh Python)": one_process(starts["torch"], starts["torch + Lightning"], one),
        f"{where.world_size} spawned workers (slowest rank)": launched(ranks, t_call, t_return, starts["torch"])}
for label, parts in bars.items():
    print(f"{label}: " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items()))
plot_run(bars, f"The posted test, {opts.epochs} epochs, NVML off: 1 process against {where.describe()}")

# %% [markdown]
# Everything before the fit, and the exit after it, is paid once a launch whatever the epoch count. Comparing
# the launched run's total with a one-device fit in this kernel, which started nothing, would compare
# start-ups as much as fits; a fair pair keeps start-up out of both sides.
#
# ## Who wins, fairly
# A fair pair starts nothing new on either side: one device, and workers forked by `ddp_notebook`, each timed from the call to its return (building the Trainer and Lightning's setup in both; forking, joining a process group and leaving it in the second; no Python started and no import in either). One epoch per run, in interleaved rounds (one device first in some rounds, last in others), so that a busy moment of the machine hits both alike.
#
# The post's three workers had a GPU each. Where fewer than three GPUs are visible (this machine has none), three workers share the CPU cores printed below. Where there are fewer cores than workers the pair is **oversubscribed**: the workers also wait for a core, which the asker's GPUs did not, so a loss here is the post's setup plus that wait, not the post's effect alone. The verdict is taken at three workers, as posted; the same pair at as many workers as cores follows it.

# %%
# NBVAL_IGNORE_OUTPUT
pair = rounds.one_vs_forked(opts.replace(epochs=1), where, rounds=6)
cores = runtime.cpu_count()
print(f"{where.world_size} forked workers on {where.device}, {cores} cores for this kernel and its workers"
      + (": oversubscribed" if where.device == "cpu" and where.world_size > cores else ""))
for name in ("one", "forked"):
    print(f"{name:7s}", " ".join(f"{x:5.2f}" for x in pair[name]), "s per round")

# %%
won = verdicts.one_device_vs_forked(pair["one"], pair["forked"], where.world_size,
                                    cores if where.device == "cpu" else None).show()

# %% [markdown]
# The decision uses the two sides' quartiles: a side wins only when its slower half still beats the other's faster half, so one busy moment of the machine cannot decide it. What the two sides do differently: the forked workers split the epoch's work (every sample drawn with `torch.randn`, all 5,000 validated) among them, but each run forks and joins a process group once, and on CPUs they share the cores. The same pair at as many workers as this machine has cores (no oversubscription), printed only: its margin is a few hundredths of a second per run, too thin to decide on a shared machine:

# %%
# NBVAL_IGNORE_OUTPUT
held = place(min(where.world_size, cores)) if where.device == "cpu" else where
pair_held = rounds.one_vs_forked(opts.replace(epochs=1), held, rounds=6)
for name in ("one", "forked"):
    print(f"{name:7s}", " ".join(f"{x:5.2f}" for x in pair_held[name]), f"s per round ({held.world_size} workers)")
print(f"medians: one {statistics.median(pair_held['one']):.2f} s, "
      f"{held.world_size} forked {statistics.median(pair_held['forked']):.2f} s")

# %% [markdown]
# Which of the costs weighs how much, and how fixed costs compare with what grows with the epochs, is notebook 05's question. `ddp_notebook` works only in a kernel that never initialised CUDA (on a GPU machine, Lightning in this kernel would, even for a CPU fit: hence `fit_one`), and its workers' results stay in the workers.
#
# ## Recorded on a GPU
# The same posted test (NVML block on, batch 256) recorded on one GPU, if the record exists; where this machine has a GPU, made again on it, live. One device means world size 1: no all-reduce moves a byte between GPUs in it, so it says what a step costs on that GPU, not what three GPUs cost:

# %%
# NBVAL_IGNORE_OUTPUT
from ddp_lessons.tool.timing import median_step
try:
    rec = replay.stored_or_live("case2-h200-posted", case2.rerun, solo)
    label = records.describe_machine(rec) + ("" if rec["machine"]["gpus"] else "  (a CPU stand-in, not a GPU figure)")
    r = rec["results"]["lightning"][0]
    print(label)
    print(f"world size {r['world_size']}; per micro-step (median): {median_step(r, skip=3)['step_time'] * 1e3:.2f} ms; "
          f"fit {r['wall']:.2f} s")
except records.RecordError as exc:
    print(exc)

# %% [markdown]
# ## Summary
# - The posted test, rebuilt in `ddp_lessons.cases.case2`, runs on one device and on three DDP workers. A timed interval is a comparison only once it says what it includes: the launched run's total holds three process starts, imports, a rendezvous and an exit besides the fit (the stacked bars take it apart); the fair pair (one device against forked `ddp_notebook` workers, interleaved rounds) keeps start-up out of both sides, and says when it is oversubscribed.
# - Under the launcher, Lightning reuses its processes and process group: `LOCAL_RANK` makes `creates_processes_externally` true, and an initialised process group is kept.
# - `ddp_notebook` starts workers by fork from the kernel; the launcher spawns them, which costs imports but works after CUDA is touched.
#
# ## Exercises
# 1. How many processes did Lightning itself start in the launcher run? `check("04.1", answer)`
# 2. How many training samples does each of the three ranks see per epoch? `check("04.2", answer)`

# %%
check("04.1", ...)

# %%
check("04.2", ...)
