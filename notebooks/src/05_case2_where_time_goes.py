# %% [markdown]
# # 05 · Case 2: where the wall time goes
#
# **What you will learn**
# - to time every Lightning micro-step (forward, backward, all-reduce, optimizer, batch wait) with a Callback and a DDP communication hook;
# - that `accumulate_grad_batches=3` all-reduces on every third micro-step only, and how to read the all-reduce hook's interval: per rank, wire time apart from waiting for peers;
# - how the posted test's fixed costs (start-up, validation, logging, NVML, data drawn per item) compare with what grows with the epochs, each comparison decided by a verdict.
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
# Where the verdict holds: seven micro-steps per rank and epoch (1,667 samples in batches of 256); Lightning wraps the first two of every three in DDP's `no_sync`, and steps on the epoch's last batch anyway, so 0, 0, 1, 0, 0, 1, 1. (`Options.fixed()`, used by the recorded GPU pairs below, sets `accumulate=1`: an optimizer step and, on several workers, an all-reduce on every micro-step, three times as many per sample, and a third of the post's effective batch.) Per step, per rank:

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
# ## Start-up against the all-reduces, as a function of the epochs
# Start-up is paid once, the all-reduces every epoch: which is larger depends on the epoch count. Per rank, from this run: start-up (the launch's start and exit, plus that rank's Lightning setup) and the hook's all-reduce time per epoch. The epoch count where they are equal (the crossover) and two verdicts: at this run's epochs against three times the all-reduces, at the post's 200 against the all-reduces themselves:

# %%
# NBVAL_IGNORE_OUTPUT
launch_s = total - max(r["wall"] for r in ranks)
startups = [launch_s + timer_result(r)["startup"] for r in ranks]
per_epoch = hook_intervals.per_epoch([timer_result(r) for r in ranks])
for r, a, c in zip(ranks, per_epoch, verdicts.crossover_epochs(startups, per_epoch), strict=True):
    print(f"rank {r['rank']}: all-reduce {a * 1e3:.1f} ms per epoch; start-up {launch_s + timer_result(r)['startup']:.2f} s; "
          f"equal at {c:.0f} epochs")

# %%
verdicts.startup_vs_allreduce(startups, per_epoch, opts.epochs).show()

# %% [markdown]
# At the post's 200 epochs the two come close on this machine: start-up / all the all-reduces ranged from about 1.1 to 1.9 per rank over the runs in `data/runs/verdict-stability-cpu2.json` (2 CPU cores, torch 2.13). Too close to decide from one run, so this is this run's reading, not a verdict:

# %%
# NBVAL_IGNORE_OUTPUT
at_post = [s / (verdicts.POST_EPOCHS * a) for s, a in zip(startups, per_epoch, strict=True)]
print(f"at {verdicts.POST_EPOCHS} epochs, start-up / all the all-reduces, per rank: "
      + ", ".join(f"{x:.2f}" for x in at_post))

# %% [markdown]
# `ddp_lessons.diagnose` reads the same three ranks' timers and ranks the causes by what they cost (its
# figures vary from run to run and are not compared); the verdict after it says whether it puts first what
# this section measured first:

# %%
# NBVAL_IGNORE_OUTPUT
found = diagnose(ranks)
found

# %%
diagnosis_verdicts.ranks_first(found.causes, "startup", "start-up")

# %% [markdown]
# At this run's 2 epochs start-up costs several times all the all-reduces (the verdict above); at the post's 200 the two are of the same order here, and the crossover printed above is the epoch count where they are equal. A conclusion about start-up against communication is a statement about an epoch count: read it off the crossover, not off one short run.
#
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
diagnosis_verdicts.ranks_first(remains.causes, "startup", "start-up (fixed test)")

# %% [markdown]
# Where that verdict holds, the fixes leave the run's largest cost where it was: a short run on three
# workers spends most of its time starting them.
#
# ## The all-reduce against the bandwidth curve
# The same three workers' all-reduce, alone, over message sizes around 0.5 MB (ranks start every size together; per iteration the slowest rank's time):

# %%
sweep = launch(allreduce.sweep, (allreduce.default_sizes(4096, 8 * 2**20), 10), world_size=where.world_size, timeout=120)
rows = allreduce.summarize(sweep)
fit = allreduce.fit_latency_bandwidth(rows)
plots.bandwidth([(where.describe(), rows, fit)])

# %% [markdown]
# Inside training, the hook's interval per rank (steps after the first two that all-reduced), with min and max across ranks. The ranks finish an all-reduce together, so per step the rank that handed its bucket over last has the shortest interval (an upper bound on the wire time), and the rank that handed over first the longest (the wire plus the wait for the last):

# %%
# NBVAL_IGNORE_OUTPUT
nbytes = 4 * case2.param_count()
read = hook_intervals.per_rank([timer_result(r) for r in ranks], skip=2)
near = min(rows, key=lambda r: abs(r["bytes"] - nbytes))
best_fit = allreduce.fit_latency_bandwidth([dict(r, time=r["best"]) for r in rows])
alone = {name: allreduce.predict_time(nbytes, f) for name, f in (("median", fit), ("best", best_fit))}
print(hook_intervals.table(read))
print(f"alone (sweep, {near['bytes'] / 1e6:.2f} MB, the nearest size): {near['time'] * 1e3:.2f} ms median, {near['best'] * 1e3:.2f} best; "
      f"the fits at {nbytes / 1e6:.2f} MB: {alone['median'] * 1e3:.2f} ms over the median times, {alone['best'] * 1e3:.2f} ms over the best")

# %%
waiting = verdicts.hook_vs_standalone(read["first_in"], alone["median"], alone["best"]).show()

# %% [markdown]
# Where the verdict holds, the rank that is ready first spends most of its hook interval not on the transfer but waiting for the last peer (or for its own turn on a core): a hook median read on one rank says as much about the other ranks' lateness as about the wire. What makes a peer late (three ranks on two cores, one rank's slower step) is not taken apart here. Where the verdict does not hold, at most half of even the longest interval is waiting. What sets the wire time itself at 0.54 MB, the per-call latency or the bytes? The curve's two terms, fitted over the sweep's best times (per size, the fastest iteration, timed on the slowest rank): the median times hold waits for a rank that had no core at that moment (three ranks on two cores), which are not the wire. Both fits:

# %%
# NBVAL_IGNORE_OUTPUT
for name, f in (("median times", fit), ("best times", best_fit)):
    print(f"fit over the {name:12s}: latency {f['latency'] * 1e3:.3f} ms, bandwidth {f['bandwidth'] / 1e9:.2f} GB/s; "
          f"at {nbytes / 1e6:.2f} MB bytes term / latency term "
          f"{nbytes / f['bandwidth'] / f['latency'] if f['latency'] > 0 else float('inf'):.3g}")

# %%
wire = verdicts.bytes_vs_latency([best_fit], nbytes).show()

# %% [markdown]
# The verdict above says whether, on this machine, both terms count at 0.54 MB. Where it holds, the all-reduce is neither latency-bound nor bandwidth-bound here: fewer calls (accumulation) and fewer bytes (compression) would each cut a part of the wire time. Which of the two terms is larger is not claimed: the ratio in the deciding numbers is this run's. Inside training, the waiting above comes on top of the wire.

# %% [markdown]
# ## Data drawn in `__getitem__`, and `self.log` on every step
# One pass over the posted `SimpleDataset` (two `torch.randn` per item) against the same loader over tensors made once:

# %%
# NBVAL_IGNORE_OUTPUT
data = rounds.randn_vs_tensors(opts, rounds=7)  # each value: median of 9 passes over the 5,000 samples, the two alternating
for name in ("randn", "tensors"):
    print(f"{name:8s}", " ".join(f"{x * 1e3:5.1f}" for x in data[name]), "ms per pass, per round")

# %%
drawn = verdicts.randn_loader(data["randn"], data["tensors"]).show()

# %% [markdown]
# And `training_step` (the model, the loss, `self.log`) with `self.log` on every step against every 50th, a one-epoch fit in this process per run, interleaved rounds. Each fit gives its fastest step: a step of about 2 ms either runs whole or loses its core to other work, so the fastest one is the step's own cost, and the median is not (beside two busy processes it moved threefold between rounds):

# %%
# NBVAL_IGNORE_OUTPUT
logs = rounds.log_every_vs_rare(opts.replace(epochs=1, val_every=0), where.accelerator, rounds=7)
for name in ("every", "rare"):
    print(f"{name:6s}", " ".join(f"{x * 1e3:5.2f}" for x in logs[name]), "ms per training_step (the fastest of a fit), per round")

# %%
logged = verdicts.log_every_step(logs["every"], logs["rare"]).show()

# %% [markdown]
# On this machine both cost time: tensors made once beat `torch.randn` per item in every round, and logging every 50th step beat logging every step in every round (the two verdicts, each decided on the per-round ratios of paired rounds). Both are host work in every step of every rank, and with a model this small they are a large share of the step: make the data once, and log every N steps.

# %% [markdown]
# ## NVML in every step
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

# %%
if held:
    verdicts.nvml_held_vs_fresh(res).show()

# %% [markdown]
# Where the verdict above is printed it decides whether holding NVML open makes the block cheaper per call; where it is not, the record holds only the first figure. Inside a fit on the GPU, the block's cost is what the fit shows. The record below holds interleaved rounds on one GPU of the fixed test (`Options.fixed()`, `accumulate=1`) with the NVML block on every step and without it (world size 1: one rank, no all-reduce between GPUs):

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
verdicts.nvml_in_step(pairs).show()
if per_call is not None:
    verdicts.nvml_below_standalone(pairs, per_call).show()

# %% [markdown]
# Read the verdicts above together, for the recorded GPU: whether the block slows `training_step` in every round; whether that shows in the whole micro-step beyond the rounds' spread (the step also holds the data wait, Lightning's loop, backward and the optimizer, which vary from round to round); and whether inside the fit the block costs less than the standalone figure of a process where nothing holds NVML open (a GPU fit holds it: torch counted the GPUs through NVML; whether that is why was not measured separately here). The block in the fit also logs one value per GPU with `self.log`. Whatever its size, it is a host cost on every rank in every step, for a number nobody needs per step: sample utilisation from outside the training loop (`nvidia-smi dmon`) instead.
#
# The same record holds the posted test against the fixed one, interleaved too. The fixed test drops accumulation as well (an optimizer step on every micro-step), so the pair compares whole fits of 5 epochs, not steps:

# %%
# NBVAL_IGNORE_OUTPUT
for name in ("posted", "fixed"):
    print(f"fit time, {name:6s} {verdicts.spread_line(verdicts.per_round(pairs, name, 'wall'), 1, 's')}")

# %%
fixes = verdicts.posted_vs_fixed(pairs, "wall").show()

# %% [markdown]
# ## Summary
# - With `accumulate_grad_batches=3`, DDP all-reduces 0.54 MB once per optimizer step: every third micro-step and the epoch's last (verdict above).
# - The hook's interval holds waiting for peers as well as the wire: read it per rank, with min and max across ranks, and against the same all-reduce alone; the verdicts above say whether most of it is waiting here, and whether latency and bytes both count in the wire time at 0.54 MB.
# - Start-up against all-reduces depends on the epoch count: the crossover above, a verdict at this run's epochs, and a reading at the post's 200.
# - Drawing data per item, logging every step and the NVML block are host costs on every rank; each has its verdict above (the NVML block's from interleaved rounds on a recorded GPU).
#
# ## Exercises
# 1. How many all-reduces does each rank run per epoch with 3 workers, batch 256, 5,000 samples, `accumulate_grad_batches=3`? `check("05.1", answer)`
# 2. How many megabytes (10^6 B) of fp32 gradients does one all-reduce carry for the posted model? `check("05.2", answer)`

# %%
check("05.1", ...)

# %%
check("05.2", ...)
