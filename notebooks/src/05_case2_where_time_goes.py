# %% [markdown]
# # 05 · Case 2: where the wall time goes
#
# **What you will learn**
# - to time every Lightning micro-step (forward, backward, all-reduce, optimizer, batch wait) with a Callback and a DDP communication hook;
# - that `accumulate_grad_batches=3` all-reduces on every third micro-step only, and what the 0.5 MB all-reduce costs against the bandwidth curve;
# - which costs of the posted test are fixed (start-up, validation, logging, NVML, data drawn per item) rather than compute.
#
# **Builds on** `04_case2_lightning` (the posted test, the launcher with Lightning) and `StepTimer` from `00_first_launch`.
# Previous: `04_case2_lightning.ipynb`. Next: `06_case2_breakeven.ipynb`.

# %%
import time

import torch

from ddp_lessons import allreduce, case2, launch, place, plots, records
from ddp_lessons.case2.exercises import check
from ddp_lessons.timing import median_step

torch.set_num_threads(1)  # one thread per process, as each launched worker gets
opts = case2.Options(epochs=2, nvml="off" if case2.nvml_error() else "step")

# %%
where = place(3)  # the case's three ranks: NCCL with a GPU each where three are visible, else gloo on the CPU
solo = place(1)   # the recorded one-GPU runs at the end, made again live where a GPU is visible
print(where.describe())

# %% [markdown]
# `case2_timing.StepTimerCallback` marks `on_train_batch_start`, `on_before_backward`, `on_after_backward`, `on_before_optimizer_step` and `on_train_batch_end`; `timed_strategy(cb)` is `DDPStrategy(ddp_comm_state=cb.timer, ddp_comm_hook=timed_comm_hook)`, the timer's hook around torch's `allreduce_hook` (with one change: Lightning registers comm hooks only on CUDA, so the subclass registers it on CPUs too). Three timed workers:

# %%
t0 = time.perf_counter()
ranks = launch(case2.fit_worker, (opts, where.accelerator), world_size=where.world_size, timeout=240)
total = time.perf_counter() - t0
steps = ranks[0]["times"]["steps"]
print("all-reduces per micro-step, rank 0, epoch 1:", [s["allreduce_calls"] for s in steps[:7]])
print("bytes per all-reduce:", {s["allreduce_bytes"] for s in steps if s["allreduce_calls"]}, "=", case2.param_count(), "params x 4 B")

# %% [markdown]
# Seven micro-steps per rank and epoch (1,667 samples in batches of 256): Lightning wraps the first two of every three in DDP's `no_sync`, and steps on the epoch's last batch anyway, so 0, 0, 1, 0, 0, 1, 1. Per step, per rank:

# %%
plots.step_breakdown([r["times"] for r in ranks], title=f"posted test, {where.describe()}", skip=2)

# %% [markdown]
# ## The whole run, taken apart (rank 0)

# %%
# NBVAL_IGNORE_OUTPUT
t = ranks[0]["times"]
parts = {"process start + rendezvous + imports": total - max(r["wall"] for r in ranks),
         "fit to first batch (Lightning setup)": t["startup"],
         "validation passes": sum(e["validation"] for e in t["epochs"]),
         "micro-steps: compute + framework": sum(s["step_time"] - s["allreduce"] for s in t["steps"]),
         "all-reduce (busy time)": sum(s["allreduce"] for s in t["steps"])}
for k, v in sorted(parts.items(), key=lambda kv: -kv[1]):
    print(f"{k:40s} {v:7.3f} s")

# %%
assert parts["process start + rendezvous + imports"] > 3 * parts["all-reduce (busy time)"]
print("starting the processes costs more than every all-reduce of the run together, several times over")

# %% [markdown]
# ## The all-reduce against the bandwidth curve
# The same three workers' all-reduce, alone, over message sizes around 0.5 MB:

# %%
sweep = launch(allreduce.allreduce_sweep, (allreduce.default_sizes(4096, 8 * 2**20), 10), world_size=where.world_size, timeout=120)
rows = allreduce.summarize(sweep)
fit = allreduce.fit_latency_bandwidth(rows)
plots.bandwidth([(where.describe(), rows, fit)])

# %%
# NBVAL_IGNORE_OUTPUT
hook = median_step(t, skip=2)
synced = [s["allreduce"] for s in t["steps"][2:] if s["allreduce_calls"]]
print(f"model: {allreduce.predict_time(4 * case2.param_count(), fit) * 1e3:.2f} ms for 0.54 MB; latency alone {fit['latency'] * 1e3:.2f} ms")
print(f"hook, inside training: {sorted(synced)[len(synced) // 2] * 1e3:.2f} ms median")


# %% [markdown]
# ## Data drawn in `__getitem__`, and `self.log` on every step
# One pass over the posted `SimpleDataset` (two `torch.randn` per item) against the same loader over tensors made once:

# %%
# NBVAL_IGNORE_OUTPUT
def one_pass(o):
    loader = torch.utils.data.DataLoader(case2.make_dataset(o), batch_size=256)
    t0 = time.perf_counter(); [b for b in loader]
    return time.perf_counter() - t0
randn_s = min(one_pass(opts) for _ in range(3))
tensor_s = min(one_pass(opts.replace(randn_in_getitem=False)) for _ in range(3))
print(f"randn per item: {randn_s * 1e3:.1f} ms per epoch; tensors: {tensor_s * 1e3:.1f} ms")

# %%
# NBVAL_IGNORE_OUTPUT
short = opts.replace(epochs=1, val_every=0)
logged = median_step(case2.fit_here(short, accelerator=where.accelerator)["times"], skip=2)["forward"]
rare = median_step(case2.fit_here(short.replace(log_every_step=False), accelerator=where.accelerator)["times"], skip=2)["forward"]
print(f"training_step with self.log every step: {logged * 1e3:.2f} ms; every 50th: {rare * 1e3:.2f} ms")

# %% [markdown]
# ## NVML in every step
# Where NVML raises (below: None where it works), the cost of the post's block on a GPU machine comes from the record, labelled with its hardware; where this machine has a GPU, it is measured again, live.

# %%
print(case2.nvml_error())

# %%
# NBVAL_IGNORE_OUTPUT
try:
    rec = records.stored_or_live("case2-h200-nvml", case2.rerun, solo)
    print(records.describe_machine(rec) + ("" if rec["machine"]["gpus"] else "  (a CPU stand-in, not a GPU figure)"))
    res = rec["results"]
    print(res["error"] or f"the post's NVML block alone: {res['per_call'] * 1e3:.2f} ms per call (median of {len(res['times'])}), "
          f"once per micro-step: 7 per epoch on each of 3 ranks")
    fit_rec = records.stored_or_live("case2-h200-posted", case2.rerun, solo)["results"]["lightning"][0]
    print(f"inside the {'live' if solo.backend == 'nccl' else 'recorded'} one-GPU fit of the posted test: {fit_rec['nvml_calls']} NVML blocks, "
          f"{fit_rec['optimizer_steps']} optimizer steps, {fit_rec['wall']:.2f} s for the whole fit")
except records.RecordError as exc:
    print(exc)

# %% [markdown]
# Read the two lines together: alone, the block costs more per call than a whole step of this
# model computes; inside the fit, 100 blocks and everything else took less than 100 standalone calls would,
# so the standalone figure is an upper bound for this script (why the block costs less inside the fit was
# not measured). Either way it is a host cost paid on every rank in every step, for a number nobody needs
# per step: sample utilisation from outside the training loop (`nvidia-smi dmon`) instead.

# %% [markdown]
# ## Summary
# - With `accumulate_grad_batches=3`, DDP all-reduces 0.54 MB on every third micro-step (and at the epoch's end); the hook and the bandwidth curve agree that it is latency-bound.
# - In the posted test, starting the processes costs several times more than all the all-reduces together (asserted above); the validation pass every epoch, drawing data per item and logging every step are measured above too (their order against the all-reduce moves with the machine's load, so it is shown, not asserted).
# - NVML init/query/shutdown in every step is a host cost on every rank; its size on a GPU is in the record.
#
# ## Exercises
# 1. How many all-reduces does each rank run per epoch with 3 workers, batch 256, 5,000 samples, `accumulate_grad_batches=3`? `check("05.1", answer)`
# 2. How many megabytes (10^6 B) of fp32 gradients does one all-reduce carry for the posted model? `check("05.2", answer)`

# %%
check("05.1", ...)

# %%
check("05.2", ...)
