# %% [markdown]
# # 05 · Case 2: where the wall time goes
#
# **What you will learn**
# - to time every Lightning micro-step (forward, backward, all-reduce, optimizer, batch wait) with a Callback and a DDP communication hook;
# - that `accumulate_grad_batches=3` all-reduces on every third micro-step only, and how to read the all-reduce hook's interval: per rank, wire time apart from waiting for peers;
# - how the posted test's start-up, paid once a launch, weighs against what three ranks save per epoch over the post's 200 epochs, and what validation, logging, NVML and data drawn per item cost in every step.
#
# **Builds on** `04_case2_lightning` (the posted test, the launcher with Lightning) and `StepTimer` from `00_first_launch`.
# Previous: `04_case2_lightning.ipynb`. Next: `06_case2_breakeven.ipynb`.

# %%
import time

import torch

from ddp_lessons import diagnose, launch, place
from ddp_lessons.tool import allreduce, plots, records
from ddp_lessons.tool.timing import timed_steps, timer_result
from ddp_lessons.course import diagnosis_verdicts, replay
from ddp_lessons.cases import case2
from ddp_lessons.cases.case2 import hook_intervals, rounds, verdicts
from ddp_lessons.cases.case2.breakeven import describe_payback, epoch_seconds, payback, powersgd_bytes
from ddp_lessons.cases.case2.lightning_timer import python_start
from ddp_lessons.cases.case2.exercises import check

torch.set_num_threads(1)  # one thread per process, as each launched worker gets
opts = case2.Options(epochs=2, nvml="off" if case2.nvml.error() else "step")

# %%
where = place(3)  # the case's three ranks: NCCL with a GPU each where three are visible, else gloo on the CPU
solo = place(1)   # the recorded one-GPU runs at the end, made again live where a GPU is visible
print(where.describe())

# %% [markdown]
# `case2_timing.StepTimerCallback` marks `on_train_batch_start`, `on_before_backward`, `on_after_backward`, `on_before_optimizer_step` and `on_train_batch_end`; `timed_strategy(cb)` is `DDPStrategy(ddp_comm_state=cb.timer, ddp_comm_hook=timed_comm_hook)`, the timer's hook around torch's `allreduce_hook` (with one change: Lightning registers comm hooks only on CUDA, so the subclass registers it on CPUs too). Three timed workers:

# %%
t0 = time.perf_counter()
ranks = launch(case2.fit_worker, (opts, where.accelerator), world_size=where.world_size, timeout=240,
               start_method="spawn")  # a fresh Python per rank, as Lightning's strategy='ddp' starts them
total = time.perf_counter() - t0
steps = timed_steps(ranks[0])
calls = [s["allreduce_calls"] for s in steps[:7]]
print("all-reduces per micro-step, rank 0, epoch 1:", calls)
print("bytes per all-reduce:", {s["allreduce_bytes"] for s in steps if s["allreduce_calls"]}, "=", case2.param_count(), "params x 4 B")
syncs = verdicts.syncs_per_epoch(calls, -(-opts.size // 3), opts.batch_size, opts.accumulate).show()

# %% [markdown]
# The mechanism: seven micro-steps per rank and epoch (1,667 samples in batches of 256); Lightning wraps the first two of every three in DDP's `no_sync`, and steps on the epoch's last batch anyway, so 0, 0, 1, 0, 0, 1, 1. (`Options.fixed()`, used by the recorded GPU pairs below, sets `accumulate=1`: an optimizer step and, on several workers, an all-reduce on every micro-step, three times as many per sample, and a third of the post's effective batch.) Per step, per rank:

# %%
plots.step_breakdown([timer_result(r) for r in ranks], title=f"posted test, {where.describe()}", skip=2)

# %% [markdown]
# ## The whole run, taken apart (rank 0)
# "All-reduce" below is the communication hook's interval: from the moment DDP hands this rank's bucket over (its gradients are ready) to the moment the all-reduce has completed. It holds the transfer, and waiting for the slowest peer to hand over its own bucket; 0.54 MB fits one bucket, so no queueing behind earlier buckets. On two cores with three ranks one rank is always descheduled, so the waiting can be most of it (taken apart per rank below).

# %%
# NBVAL_IGNORE_OUTPUT
t = timer_result(ranks[0])
parts = {"process start + imports + rendezvous + exit": total - max(r["wall"] for r in ranks),
         "fit to first batch (Lightning setup)": t["startup"],
         "validation passes": sum(e["validation"] for e in t["epochs"]),
         "micro-steps: compute + framework": sum(s["step_time"] - s["allreduce"] for s in t["steps"]),
         "all-reduce, hook interval (wire + waiting)": sum(s["allreduce"] for s in t["steps"])}
for k, v in sorted(parts.items(), key=lambda kv: -kv[1]):
    print(f"{k:44s} {v:7.3f} s")

# %% [markdown]
# ## Start-up against what three ranks save over 200 epochs
# The post ran 200 epochs. Three ranks pay more start-up per launch than one process (three Pythons,
# their imports, a rendezvous), once; they can only win it back per epoch, where each rank handles a third
# of the samples but adds an all-reduce. A **model**, labelled as one: a run costs its start-up once, then
# 200 epochs as long as this run's. Both sides measured here: the launch above (the slowest rank's fit
# start, the start and exit around it) against one process that starts fresh (a new Python importing torch
# and Lightning, timed apart) and fits the same epochs in this kernel; an epoch is its training pass and
# its validation pass:

# %%
# NBVAL_IGNORE_OUTPUT
one = case2.fit_one(opts, where, timed=True)
n, slowest = where.world_size, max(ranks, key=lambda r: r["wall"])
start_n = total - slowest["wall"] + timer_result(slowest)["startup"]
start_1 = python_start(("torch", "pytorch_lightning")) + one["timer"]["startup"]
epoch_1, epoch_n = epoch_seconds(one["timer"]), max(epoch_seconds(timer_result(r)) for r in ranks)
reduce_n = max(hook_intervals.per_epoch([timer_result(r) for r in ranks]))
print(f"per launch: {n} spawned ranks {start_n:.2f} s, one fresh process {start_1:.2f} s: {start_n - start_1:.2f} s more")
print(f"per epoch: one process {epoch_1 * 1e3:.0f} ms, {n} ranks {epoch_n * 1e3:.0f} ms (slowest rank; "
      f"of which all-reduce, hook interval: {reduce_n * 1e3:.0f} ms)")
print(f"model, {verdicts.POST_EPOCHS} epochs:", describe_payback(payback(start_n - start_1, epoch_1, epoch_n), n, start_n - start_1))

# %% [markdown]
# On a GPU the one-process epoch is far shorter, and so is what three GPUs could save. The recorded one-GPU
# run of the posted test gives a bound: three GPUs that split its epoch perfectly, with no all-reduce and no
# wait, save two thirds of it. No 3-GPU run of case 2 is recorded, so this is a bound, not a measurement:

# %%
# NBVAL_IGNORE_OUTPUT
try:
    posted = records.load("case2-h200-posted")
    e1 = epoch_seconds(posted["results"]["lightning"][0]["timer"])
    print(records.describe_machine(posted).split(";")[0] + f", posted test: {e1 * 1e3:.0f} ms an epoch on one GPU; "
          f"3 GPUs save at most {e1 * 2 / 3 * 1e3:.0f} ms an epoch, {e1 * 2 / 3 * verdicts.POST_EPOCHS:.1f} s over "
          f"{verdicts.POST_EPOCHS} epochs, against a launch that costs seconds")
except records.RecordError as exc:
    print(exc)

# %% [markdown]
# The mechanism, on any machine: where the ranks save nothing per epoch, no run length pays back their
# start-up; where they save some, the run has to be longer than the extra start-up divided by the saving.
# What each rank does per sample is divided among the ranks (drawing `torch.randn`, forward and backward,
# and validation: Lightning gives each rank a third of the validation set too); what it does per step or per
# epoch is not (Lightning's loop, the loader's start), and the all-reduce is added. The saving per epoch is
# the divided part less the added one: on a GPU the bound above says how large the divided part can be.
#
# ## What `diagnose` ranks first
# `ddp_lessons.diagnose` reads the same three ranks' timers and ranks the causes by what they cost (its
# figures vary from run to run and are not compared):

# %%
# NBVAL_IGNORE_OUTPUT
found = diagnose(ranks)
found

# %% [markdown]
# The fixed test (`Options.fixed()`: data made once, `self.log` every 50th step, no NVML block, no
# accumulation) on the same three workers, diagnosed the same way: what remains once the per-step host work
# is gone.

# %%
# NBVAL_IGNORE_OUTPUT
fixed_ranks = launch(case2.fit_worker, (case2.Options.fixed(epochs=opts.epochs), where.accelerator),
                     world_size=where.world_size, timeout=240, start_method="spawn")
remains = diagnose(fixed_ranks)
remains

# %%
verdicts.diagnose_ranks_startup_first(diagnosis_verdicts.ranks_first(found.causes, "startup", "start-up"),
                                      diagnosis_verdicts.ranks_first(remains.causes, "startup", "start-up")).show()

# %% [markdown]
# The fixes take out per-step host work; start-up is paid once a launch whatever the fixes, so in a short
# run it stays the cost to remove first: start once and train longer per launch.
#
# ## The all-reduce against the bandwidth curve
# The same three workers' all-reduce, alone, over message sizes around 0.5 MB (ranks start every size together; per iteration the slowest rank's time):

# %%
sweep = launch(allreduce.sweep, (allreduce.default_sizes(4096, 8 * 2**20), 10), world_size=where.world_size, timeout=120)
rows = allreduce.summarize(sweep)
fit = allreduce.fit_latency_bandwidth(rows)
plots.bandwidth([(where.describe(), rows, fit)])

# %% [markdown]
# What sets the wire time at 0.54 MB, the per-call latency or the bytes? The curve's two terms, fitted over the
# sweep's best times (per size, the fastest iteration, timed on the slowest rank) and over its median times
# (these hold waits for a rank that had no core at that moment, which are not the wire):

# %%
# NBVAL_IGNORE_OUTPUT
nbytes = 4 * case2.param_count()
best_fit = allreduce.fit_latency_bandwidth([dict(r, time=r["best"]) for r in rows])
for name, f in (("median times", fit), ("best times", best_fit)):
    print(f"fit over the {name:12s}: latency {f['latency'] * 1e3:.3f} ms, bandwidth {f['bandwidth'] / 1e9:.2f} GB/s; "
          f"at {nbytes / 1e6:.2f} MB bytes term / latency term "
          f"{nbytes / f['bandwidth'] / f['latency'] if f['latency'] > 0 else float('inf'):.3g}")

# %%
wire = verdicts.bytes_vs_latency([best_fit], nbytes).show()

# %% [markdown]
# Two levers act on the two terms: accumulation makes fewer calls (the post's `accumulate_grad_batches=3`
# already does), and a communication hook sends fewer bytes. In Lightning a hook is a strategy argument:
#
# ```python
# from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
# DDPStrategy(ddp_comm_hook=default_hooks.fp16_compress_hook)       # or bf16_compress_hook: half the bytes
# DDPStrategy(ddp_comm_state=powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=1,
#                                                        start_powerSGD_iter=10),
#             ddp_comm_hook=powerSGD_hook.powerSGD_hook)                # low-rank factors P and Q
# ```
#
# fp16/bf16 halve every bucket's bytes and keep one call; PowerSGD sends each weight matrix as two thin
# factors, far fewer bytes, but in three all-reduces a step (vectors, P, Q) instead of one, and it sends
# everything uncompressed for its first `start_powerSGD_iter` steps. On a slow link (PCIe without
# peer-to-peer, or between machines) and large buckets, where the bytes term dominates, both pay; where the
# latency term weighs, PowerSGD's extra calls can cost more than its bytes save. Neither hook was run here;
# what the fit over the best times predicts for case 2's gradients (a model):

# %%
# NBVAL_IGNORE_OUTPUT
psgd_bytes, psgd_calls = powersgd_bytes(case2.mlp())
for name, nb, calls in (("fp32, as posted", nbytes, 1), ("fp16/bf16 hook", nbytes // 2, 1),
                        ("PowerSGD, rank 1", psgd_bytes, psgd_calls)):
    t = calls * best_fit["latency"] + nb / best_fit["bandwidth"]
    print(f"{name:17s} {nb / 1e6:6.3f} MB in {calls} all-reduce(s): {t * 1e3:.2f} ms predicted")

# %% [markdown]
# ## Inside training: wire or waiting
# Inside training, the hook's interval per rank (steps after the first two that all-reduced), with min and max across ranks. The ranks finish an all-reduce together, so per step the rank that handed its bucket over last has the shortest interval (an upper bound on the wire time), and the rank that handed over first the longest (the wire plus the wait for the last):

# %%
# NBVAL_IGNORE_OUTPUT
read = hook_intervals.per_rank([timer_result(r) for r in ranks], skip=2)
near = min(rows, key=lambda r: abs(r["bytes"] - nbytes))
alone = {name: allreduce.predict_time(nbytes, f) for name, f in (("median", fit), ("best", best_fit))}
print(hook_intervals.table(read))
print(f"alone (sweep, {near['bytes'] / 1e6:.2f} MB, the nearest size): {near['time'] * 1e3:.2f} ms median, {near['best'] * 1e3:.2f} best; "
      f"the fits at {nbytes / 1e6:.2f} MB: {alone['median'] * 1e3:.2f} ms over the median times, {alone['best'] * 1e3:.2f} ms over the best")

# %%
waiting = verdicts.hook_vs_standalone(read["first_in"], alone["median"], alone["best"]).show()

# %% [markdown]
# The mechanism: a rank's hook interval starts when its own bucket is ready and ends when every rank's is in
# and the sum has come back, so a rank that is ready early waits inside it for the latest peer (or, with more
# ranks than cores, for its own turn on a core). A hook median read on one rank says as much about the other
# ranks' lateness as about the wire; what makes a peer late is not taken apart here.

# %% [markdown]
# ## Data drawn in `__getitem__`
# One pass over the posted `SimpleDataset` (two `torch.randn` per item) against the same loader over tensors made once:

# %%
# NBVAL_IGNORE_OUTPUT
data = rounds.randn_vs_tensors(opts, rounds=7)  # each value: median of 9 passes over the 5,000 samples, the two alternating
for name in ("randn", "tensors"):
    print(f"{name:8s}", " ".join(f"{x * 1e3:5.1f}" for x in data[name]), "ms per pass, per round")

# %%
drawn = verdicts.randn_loader(data["randn"], data["tensors"]).show()

# %% [markdown]
# The post's loaders run in the main process (`num_workers=0`, as posted): every sample's `torch.randn`
# is drawn there, on every rank, between steps. Loader processes (`num_workers > 0`) would draw them
# beside the step, but by default a `DataLoader` starts its workers again at every epoch, and Lightning
# runs two loaders an epoch (training, validation): 400 starts per rank over 200 epochs.
# `persistent_workers=True` keeps them. The wait for each epoch's first batch, one loader worker, this machine:

# %%
# NBVAL_IGNORE_OUTPUT
for keep in (False, True):
    waits = rounds.first_batch_waits(opts, persistent=keep, epochs=4)
    print(f"persistent_workers={keep!s:5s}: first batch after", ", ".join(f"{w * 1e3:.0f}" for w in waits), "ms, per epoch",
          flush=True)  # flushed before the next loader forks its worker

# %% [markdown]
# With workers kept, only the first epoch waits for them to start. Making the data once, as the fixed test
# does, removes the per-item work altogether.
#
# ## `self.log` on every step
# `training_step` (the model, the loss, `self.log`) with `self.log` on every step against every 50th, a four-epoch fit in this process per run (about 26 steps, so the fastest one is found), interleaved rounds. Each fit gives its fastest step: a step of about 2 ms either runs whole or loses its core to other work, so the fastest one is the step's own cost, and the median is not (beside two busy processes it moved threefold between rounds):

# %%
# NBVAL_IGNORE_OUTPUT
logs = rounds.log_every_vs_rare(opts.replace(epochs=4, val_every=0), where.accelerator, rounds=7)
for name in ("every", "rare"):
    print(f"{name:6s}", " ".join(f"{x * 1e3:5.2f}" for x in logs[name]), "ms per training_step (the fastest of a fit), per round")

# %%
logged = verdicts.log_every_step(logs["every"], logs["rare"]).show()

# %% [markdown]
# Drawing data per item and logging every step are host work in every step of every rank; with a model this
# small the step itself is short, so they are a large share of it. Make the data once, and log every N steps
# (`log_every_n_steps`, or `self.log` only every N batches).

# %% [markdown]
# ## NVML in every step (recorded)
# Where NVML raises (below: None where it works), the cost of the post's block on a GPU machine comes from the record, labelled with its hardware; where this machine has a GPU, it is measured again, live.

# %%
print(case2.nvml.error())

# %% [markdown]
# What one call of the block costs depends on the process it runs in. Where nothing holds NVML open, every `nvmlInit` starts NVML and every `nvmlShutdown` stops it again. torch keeps NVML open once it has counted GPUs through it (`torch.cuda._raw_device_count_nvml` calls `nvmlInit` and never `nvmlShutdown`; the launcher's `place` counts that way, in this kernel too), and then init and shutdown only count a reference. So the block is timed in a new Python process (`case2.nvml.cost_fresh`), and, where the run has it, with NVML held open (`nvml_cost(held=True)`):

# %%
# NBVAL_IGNORE_OUTPUT
nv = replay.stored_or_live("case2-h200-nvml", case2.rerun, solo)
print(records.describe_machine(nv) + ("" if nv["machine"]["gpus"] else "  (a CPU stand-in, not a GPU figure)"))
res = nv["results"]
per_call, held = res["per_call"], res.get("held")
print(res["error"] or f"the post's NVML block where nothing holds NVML open: {per_call * 1e3:.3f} ms per call "
      f"(median of {len(res['calls'])})")
if res["error"] is None:
    print(f"with NVML held open: {held['per_call'] * 1e3:.3f} ms per call (median of {len(held['calls'])})" if held
          else "with NVML held open: not in this record")

# %% [markdown]
# Inside a fit on the GPU, the block's cost is what the fit shows. The record below holds interleaved rounds on one GPU of the fixed test (`Options.fixed()`, `accumulate=1`) with the NVML block on every step and without it (world size 1: one rank, no all-reduce between GPUs):

# %%
# NBVAL_IGNORE_OUTPUT
pairs = records.load("case2-h200-pairs")
print(records.describe_machine(pairs) + f"; world size {pairs['config']['world_size']}, {pairs['config']['rounds']} interleaved rounds")
for key in ("training_step", "step"):
    for name in ("fixed-nvml", "fixed"):
        print(f"{verdicts.KEYS[key]:26s} {name:11s} {verdicts.spread_line(verdicts.per_round(pairs, name, key))}")
print("added by the block to training_step, per round:", ", ".join(f"{x * 1e3:.2f}" for x in verdicts.nvml_added(pairs)), "ms")

# %%
verdicts.nvml_in_training_step(pairs).show()

# %% [markdown]
# Beside it, two readings printed as numbers: the same ratio over the whole micro-step (which also holds the
# data wait, Lightning's loop, backward and the optimizer, varying from round to round), and what the block
# added inside the fit against the standalone per-call figure above:

# %%
# NBVAL_IGNORE_OUTPUT
on, off = verdicts.per_round(pairs, "fixed-nvml", "step"), verdicts.per_round(pairs, "fixed", "step")
print("whole micro-step,", verdicts.ratio_figure(on, off, "without / with the block per round"))
added = [x * 1e3 for x in verdicts.nvml_added(pairs) if x is not None]
print(f"added inside the fit {min(added):.2f} .. {max(added):.2f} ms per step"
      + (f", against {per_call * 1e3:.2f} ms per call standalone (nothing holding NVML open)" if per_call else ""))

# %% [markdown]
# The mechanism: a GPU fit holds NVML open (torch counted the GPUs through it), so inside the fit `nvmlInit`
# and `nvmlShutdown` only count a reference; whether that is all of the difference was not measured
# separately. The block also logs one value per GPU with `self.log`. Whatever its size, it is host work on
# every rank in every step, for a number nobody needs per step: sample utilisation from outside the training
# loop (`nvidia-smi dmon`) instead.
#
# ## The posted test against the fixed one (recorded)
# The same record holds the posted test against the fixed one, interleaved too. The fixed test drops accumulation as well (an optimizer step on every micro-step), so the pair compares whole fits of 5 epochs, not steps:

# %%
# NBVAL_IGNORE_OUTPUT
for name in ("posted", "fixed"):
    print(f"fit time, {name:6s} {verdicts.spread_line(verdicts.per_round(pairs, name, 'wall'), 1, 's')}")

# %%
fixes = verdicts.posted_vs_fixed(pairs, "wall").show()

# %% [markdown]
# ## Summary
# - With `accumulate_grad_batches=3`, Lightning all-reduces 0.54 MB once per optimizer step: every third micro-step and the epoch's last.
# - The hook's interval holds waiting for peers as well as the wire: read it per rank, with min and max across ranks, and against the same all-reduce alone. The wire time itself is a latency term and a bytes term; fp16/bf16 hooks cut the second, PowerSGD cuts it further but adds calls.
# - The post's question is start-up against what the ranks save per epoch: a launch costs seconds once; three ranks win only if they save per epoch, and then only after the extra start-up divided by that saving.
# - Drawing data per item, logging every step and the NVML block are host costs on every rank in every step; loader workers restart every epoch unless `persistent_workers=True`.
#
# ## Exercises
# 1. How many all-reduces does each rank run per epoch with 3 workers, batch 256, 5,000 samples, `accumulate_grad_batches=3`? `check("05.1", answer)`
# 2. How many megabytes (10^6 B) of fp32 gradients does one all-reduce carry for the posted model? `check("05.2", answer)`

# %%
check("05.1", ...)

# %%
check("05.2", ...)
