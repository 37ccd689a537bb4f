# %% [markdown]
# # 06 · Case 2: is the model too simple? A break-even predictor, and the fixed test
#
# **What you will learn**
# - to predict, from measured costs, from which width, depth, batch and dataset size several workers beat one;
# - to check the prediction against a small measured run, and to measure scaling efficiency honestly on 2 cores;
# - what Lightning adds per step, against the same workload in plain PyTorch.
#
# **Builds on** `05_case2_where_time_goes` (the costs taken apart). Previous: `05_case2_where_time_goes.ipynb`. This is the last notebook.

# %%
import time

import ipywidgets as widgets
import torch

from ddp_lessons import allreduce, case2, launch, place, records
from ddp_lessons.case2 import plain
from ddp_lessons.case2.breakeven import Costs, breakeven, fit_compute, predict, table
from ddp_lessons.case2.exercises import check
from ddp_lessons.timing import median_step

torch.set_num_threads(1)
fixed = case2.Options.fixed(epochs=2)
print(fixed)

# %% [markdown]
# The measured part runs on 2 workers, the modelled answer is for the post's 3. Where each runs here (NCCL
# with a GPU each where enough GPUs are visible, else gloo on the CPU), and where the recorded one-GPU sweep
# is made again live (on a GPU, if any):

# %%
where = place(2)   # the measured 1-against-2 runs
where3 = place(3)  # the post's three workers: the all-reduce of the modelled answer
solo = place(1)    # the recorded one-GPU compute sweep
print(where.describe())
print(where3.describe())

# %% [markdown]
# ## Measured costs on this machine
# Compute per step at three widths (plain loop, one process, on the 2 workers' device), then the all-reduce on 2 workers:

# %%
# NBVAL_IGNORE_OUTPUT
sweep = plain.compute_sweep(fixed, [64, 256, 1024], where.accelerator, steps=15)
c0, k = fit_compute([(r["batch"], r["params"], r["compute"]) for r in sweep])
ar = allreduce.summarize(launch(allreduce.allreduce_sweep, (allreduce.default_sizes(4096, 8 * 2**20), 10), world_size=where.world_size))
fit = allreduce.fit_latency_bandwidth(ar)
print(f"compute = {c0 * 1e3:.2f} ms + {k * 1e12:.2f} ps x batch x params; all-reduce {fit['latency'] * 1e3:.2f} ms + bytes / {fit['bandwidth'] / 1e9:.2f} GB/s")

# %% [markdown]
# ## The fixed test: 1 against 2 workers, in Lightning and in plain PyTorch
# Data made once as tensors, no NVML, logging every 50 steps, no validation pass every epoch, the loss shape fixed, a wider model (1024).
# The one-worker runs use the two workers' device (`where.accelerator`), so each pair is like for like:

# %%
# NBVAL_IGNORE_OUTPUT
big = fixed.replace(width=1024)
one_l, one_p = case2.fit_here(big, accelerator=where.accelerator), plain.plain_fit(big, where.accelerator)
two_l = launch(case2.fit_worker, (big, where.accelerator), world_size=where.world_size, timeout=240)
two_p = launch(plain.plain_fit, (big, where.accelerator), world_size=where.world_size, timeout=120)
for name, a, b in [("Lightning", one_l, two_l), ("plain", one_p, two_p)]:
    s = a["wall"] / max(r["wall"] for r in b)
    print(f"{name:9s}: 1 worker {a['wall']:.2f} s, 2 workers {max(r['wall'] for r in b):.2f} s: speedup {s:.2f}, efficiency {s / 2:.0%}")

# %%
# NBVAL_IGNORE_OUTPUT
lstep, pstep = median_step(one_l["times"], 3)["step_time"], median_step(one_p["times"], 3)["step_time"]
print(f"per step: Lightning {lstep * 1e3:.2f} ms, plain {pstep * 1e3:.2f} ms: Lightning adds {(lstep - pstep) * 1e3:.2f} ms")

# %% [markdown]
# On two shared cores the two workers also share the compute, so "scaling" is bounded by the cores, not by DDP. The predictor, fed the costs measured above, by width:

# %%
# NBVAL_IGNORE_OUTPUT
shared = where.device == "cpu"  # workers on shared cores each run slower; on GPUs each has its own device
costs = Costs(c0=c0, k=k, step_fixed=max(lstep - pstep, 0.0), latency=fit["latency"], bandwidth=fit["bandwidth"],
              slowdown={2: 2.0, 3: 3.0} if shared else {}, source="this machine")
rows = table(costs, "width", [64, 256, 1024, 4096], world_size=2, **{"epochs": 2})
print(f"break-even width on 2 {'CPU' if shared else 'GPU'} workers:", breakeven(costs, "width", [64, 256, 1024, 4096, 16384], world_size=2))

# %% [markdown]
# With `slowdown` = world size (two workers on two cores each run at half speed) the compute is not divided, only moved; what the second worker can still save is the per-step fixed cost, against one all-reduce per step. Compare the predicted break-even above with the measured speedups of the previous cells. On GPUs each worker has its own device (no slowdown).
#
# ## The modelled 3-GPU answer
# GPU compute from the recorded single-GPU sweep (made again live where this machine has a GPU). The 3-GPU
# all-reduce is measured live where three GPUs are visible; elsewhere it has not been recorded, so an NVLink
# all-reduce is assumed (30 µs + bytes / 100 GB/s), labelled as an assumption:

# %%
# NBVAL_IGNORE_OUTPUT
try:
    rec = records.stored_or_live("case2-h200-sweep", case2.rerun, solo)
    gpu_label = records.describe_machine(rec) + ("" if rec["machine"]["gpus"] else "  (a CPU stand-in, not a GPU figure)")
    g0, gk = fit_compute([(r["batch"], r["params"], r["compute"]) for r in rec["results"]["rows"]])
except records.RecordError as exc:
    gpu_label, g0, gk = f"no record ({exc})", 1e-3, 1e-13
print(gpu_label)

# %%
# NBVAL_IGNORE_OUTPUT
if where3.backend == "nccl":  # three GPUs here: their all-reduce, measured, replaces the assumption
    ar3 = allreduce.summarize(launch(allreduce.allreduce_sweep, (allreduce.default_sizes(4096, 64 * 2**20), 20), world_size=where3.world_size))
    link = allreduce.fit_latency_bandwidth(ar3)
    gpu = Costs(c0=g0, k=gk, latency=link["latency"], bandwidth=link["bandwidth"], source="all-reduce measured live")
    print(f"{where3.describe()}: all-reduce {link['latency'] * 1e6:.0f} us + bytes / {link['bandwidth'] / 1e9:.0f} GB/s (measured live)")
else:
    gpu = Costs(c0=g0, k=gk, latency=30e-6, bandwidth=100e9, source="assumed all-reduce")
print("break-even width on 3 GPUs (200 epochs, batch 256):", breakeven(gpu, "width", [256, 1024, 4096, 16384], epochs=200))

# %%
# Multi-GPU recordings, when they exist (a later issue): data/runs/case2-h200x3-*.json
x3 = [n for n in records.list_records("case2") if n.startswith("case2-h200x3-")]
print("3-GPU records:", x3 or "none yet")


# %% [markdown]
# ## Try it: the predictor under your own sizes
# The widgets only compute the predictor (no launch). The plain call below carries the checked output.

# %%
def show(width=256, depth=3, batch=256, size=5000, world_size=3):
    a = predict(gpu, width=width, depth=depth, batch=batch, size=size, world_size=1, epochs=200)
    b = predict(gpu, width=width, depth=depth, batch=batch, size=size, world_size=world_size, epochs=200)
    print(f"{a['params']:,} params; 1 worker {a['total']:.2f} s, {world_size} workers {b['total']:.2f} s: speedup {a['total'] / b['total']:.2f}")


# %%
# NBVAL_IGNORE_OUTPUT
widgets.interact(show, width=widgets.IntSlider(256, 16, 8192, 16), depth=(1, 12), batch=widgets.IntSlider(256, 16, 4096, 16),
                 size=widgets.IntSlider(5000, 1000, 200000, 1000), world_size=(2, 8));

# %%
hand = Costs(c0=1e-3, k=0.0, latency=1e-3, bandwidth=1e9)
print(predict(hand, world_size=3)["steps_per_epoch"], "steps per rank;", round(predict(hand, world_size=3)["total"] * 1e3, 2), "ms on 3 workers against",
      round(predict(hand, world_size=1)["total"] * 1e3, 2), "ms on 1")

# %% [markdown]
# ## Summary
# - DDP divides the steps by the number of workers and adds one all-reduce per synchronised step; it wins once the compute it saves outweighs the all-reduce, start-up and fixed costs.
# - The posted test's fixed costs (validation every epoch, NVML and logging per step, data drawn per item, process start) are fixes of their own, each a named option of `case2.Options`.
# - On two CPU cores the workers share the cores, so the measured scaling is bounded by them; the GPU answer is a model fed with recorded compute (live on a GPU machine) and an assumed all-reduce (measured live where three GPUs are visible) until the 3-GPU run is recorded.
#
# ## Exercises
# 1. With `Costs(c0=2e-3, k=0, latency=1e-3, bandwidth=1e9)` and the posted sizes, what speedup does the predictor give 3 workers over 1? Work it out by hand, then `check("06.1", answer)`

# %%
check("06.1", ...)
